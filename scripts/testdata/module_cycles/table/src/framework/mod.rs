mod table;
mod thing;
pub use table::TABLE;
pub use thing::Thing;
