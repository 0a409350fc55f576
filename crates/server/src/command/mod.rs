//! Commands as something to call: the context a command is parsed in
//! ([`Ctx`]), and [`call`], which runs any command by name without a
//! connection (a Lua script's `redis.call`).

pub mod call;
mod ctx;

pub use call::{call, call_read, is_fatal};
pub use ctx::{Authorize, Ctx};
