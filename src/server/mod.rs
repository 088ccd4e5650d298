//! The library's front door: `Server::builder()` (`builder.rs`) sets what the flags set
//! and starts a server in this process; `serve.rs` is a server's life (`start`, the
//! threads, the drain), which the binary's `serve` runs too; `open.rs` the store it opens
//! (the start's terms, the seed); `running.rs` what its owner
//! holds of it (`Running`) and its `Error`; `control/` test control's start and test
//! control typed and in-process (`Running::control()`), the one module of the front door
//! that knows test control (without the `test-control` feature, `no_control.rs` stands
//! in, and no server has it).

mod builder;
#[cfg(feature = "test-control")]
pub mod control;
#[cfg(not(feature = "test-control"))]
#[path = "no_control.rs"]
pub(crate) mod control;
mod open;
mod running;
mod serve;

pub use builder::{Builder, Server};
pub use running::{Error, Running};
pub use serve::start;
