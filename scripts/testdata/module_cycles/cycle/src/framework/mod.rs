mod thing;
pub use thing::Thing;
