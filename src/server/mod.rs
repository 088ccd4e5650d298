//! The library's front door: `Server::builder()` (`builder.rs`) sets what the flags set
//! and starts a server in this process; `serve.rs` is a server's life (`start`,
//! `Running`, `Error`), which the binary's `serve` runs too.

mod builder;
mod serve;

pub use builder::{Builder, Server};
pub use serve::{Error, Running, start};
