//! plant-store: a small HTTP store of plants (create, list and delete them, for
//! bearer-token callers, in SQLite), as a library. A server started here is the
//! `plant-store` binary's own, in this process: same routes, answers, limits and
//! durability. Start one per test on port 0, or host one in a daemon.
//!
//! ```
//! use std::io::{Read, Write};
//!
//! let server = plant_store::Server::builder()
//!     .token("a-test-token")
//!     .option("workers", "2")
//!     .start()?;
//! // `server.url()` is `http://127.0.0.1:PORT`; any HTTP client will do.
//! let mut tcp = std::net::TcpStream::connect(server.addr())?;
//! tcp.write_all(b"GET /healthz HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n")?;
//! let mut answer = String::new();
//! tcp.read_to_string(&mut answer)?;
//! assert!(answer.starts_with("HTTP/1.1 200"));
//! assert!(answer.ends_with(r#"{"status":"ok"}"#));
//! // In-flight requests finish, the database closes, every thread has ended.
//! server.stop()?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! - [`Server::builder`] sets what the flags set: `.addr` (default `127.0.0.1:0`), `.db`
//!   (default `:memory:`, a database of the server's own), `.token` (as
//!   `PLANT_STORE_TOKEN`), and `.option(name, value)` for any other flag by its long
//!   name, checked as the command line checks it; `.control_token` turns test control on
//!   and `.seed_file` loads a seed before `start` returns (docs/testing.md).
//! - [`Builder::start`] returns once the server listens; [`Running::addr`] and
//!   [`Running::url`] say where. [`Running::stop`], or dropping the [`Running`], stops it
//!   gracefully.
//! - Nothing is process-wide but the table of the SQLite files the process has open
//!   (POSIX locks are the process's): servers in one process have their own store,
//!   tokens, workers, rate limits and `/metrics`. The library installs no logger (it logs through
//!   the `log` facade; the host picks one), no signal handler and no panic hook, and
//!   never exits the process. docs/embedding.md says what each server costs.

// Without the `webhooks` feature the store keeps its webhook tables and the code that
// reads and writes them (a build with the feature may use the same database), which
// nothing calls then; the default build still checks all of it for dead code.
#![cfg_attr(not(feature = "webhooks"), allow(dead_code, unused_imports))]

mod api;
mod cli;
mod http;
mod ops;
mod store;
/// Webhook deliveries; a build without the `webhooks` feature has none (`cli/webhook.rs`
/// is then `cli/no_webhooks.rs`, which refuses them).
#[cfg(feature = "webhooks")]
mod webhooks;

pub use cli::serve::{Error, Running};
pub use cli::server::{Builder, Server};

/// What the `plant-store` binary needs of its library beyond the front door: the command
/// line, and the process-wide set-up that only a program's `main` may make. Not for
/// library users.
#[doc(hidden)]
pub mod binary {
    pub use crate::cli::options::ServeConfig;
    pub use crate::cli::serve::{Error, start};
    pub use crate::cli::{Failure, Ran, run};
    pub use crate::http::socket::raise_fd_limit;
    pub use crate::ops::logging::init as init_logging;
    #[cfg(target_env = "gnu")]
    pub use crate::ops::malloc::Malloc;
    pub use crate::ops::process::{limit_malloc_arenas, log_panics};
    pub use crate::ops::stdio::{announce, say};
}

/// The layers' rule, checked on the source (a test).
#[cfg(test)]
mod layers;
