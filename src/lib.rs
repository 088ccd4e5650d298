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
//!     .workers(2)
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
//! A server for a client's test suite: test control on, with a control token of its
//! own (docs/testing.md).
//!
//! ```
//! use plant_store::control::{Fault, Match};
//!
//! let server = plant_store::Server::builder()
//!     .test_control()
//!     .test_seed(42)
//!     .workers(2)
//!     .start()?;
//! // Test control typed and in-process: `plant_store::control`.
//! let control = server.control()?;
//! let p = control.mint("p-42")?;
//! control.fault(Fault::on(Match::post("/plants").principal("p-42")).after().reset().times(1))?;
//! // … the client under test writes with `p.token`: committed, its answer lost …
//! control.reset()?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! - [`Server::builder`] sets what the flags set: `.addr` (default `127.0.0.1:0`), `.db`
//!   (default `:memory:`, a database of the server's own), `.token` (as
//!   `PLANT_STORE_TOKEN`), setters for the common flags (`.workers`, `.drain_timeout`,
//!   `.max_connections`, `.rate_limit`, `.journal_size`, `.test_seed`), and
//!   `.option(name, value)` for any other flag by its long name, checked as the command
//!   line checks it; whichever method sets an option, the last call wins.
//!   `.test_control` turns test control on with a random control token
//!   ([`Running::control_token`]), `.control_token` with one given, and `.seed_file`
//!   loads a seed before `start` returns (docs/testing.md); [`Running::control`] is then
//!   its control surface typed ([`control`]).
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
// nothing calls then; without `test-control`, the store's whole-store copies, the test
// clock and the seeded ids stay, which nothing asks for then. The default build still
// checks all of it for dead code.
#![cfg_attr(
    any(not(feature = "webhooks"), not(feature = "test-control")),
    allow(dead_code, unused_imports)
)]

mod api;
mod cli;
mod config;
mod http;
mod ops;
/// The library's front door: `Server::builder()`, a server's life (`Running`), its `Error`.
mod server;
mod store;
/// Webhook deliveries; a build without the `webhooks` feature has none (`cli/webhook.rs`
/// is then `cli/no_webhooks.rs`, which refuses them).
#[cfg(feature = "webhooks")]
mod webhooks;

/// Test control typed and in-process; a build without the `test-control` feature has
/// none.
#[cfg(feature = "test-control")]
pub use server::control;
pub use server::{Builder, Error, Running, Server};

/// What the `plant-store` binary needs of its library beyond the front door: the command
/// line (`run`), and for `serve` a server described by its arguments (`Serve`) with the
/// process-wide set-up that only a program's `main` may make. Not for library users: it
/// is no part of the library's interface, and may change in any release.
#[doc(hidden)]
pub mod binary {
    pub use crate::cli::{Failure, Ran, Serve, run};
    #[cfg(target_env = "gnu")]
    pub use crate::ops::malloc::Malloc;
    pub use crate::ops::stdio::{announce, say};
}

/// The layers' rule, checked on the source (a test).
#[cfg(test)]
mod layers;
