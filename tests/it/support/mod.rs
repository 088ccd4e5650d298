//! The one door to the system under test: `TestServer` starts the real binary on port 0
//! with a temporary database, reads the `listening on` line, and kills the child on drop;
//! `Req` builds a request (or its raw bytes), `Resp` is a response read off a raw socket,
//! `check` runs a table of requests against their exact answers, and `eventually` is how
//! a test waits for a state. `Receiver` is the other end of webhook deliveries.
//!
//! The suite runs on SQLite, or on PostgreSQL with `PLANT_STORE_TEST_BACKEND=postgres`,
//! where `TempDir::db()` and `Launch::memory()` name a fresh database in a throw-away
//! cluster that this process starts (`postgres::Cluster`).

// Each test uses the part it needs.
#![allow(dead_code)]

mod cli;
mod features;
mod http;
mod pki;
mod postgres;
mod receiver;
mod server;
mod sse;
mod wait;

pub use cli::*;
pub use features::{Feature, built_in, has_command, panics_abort, without};
pub use http::*;
pub use pki::*;
pub use postgres::*;
pub use receiver::*;
pub use server::*;
pub use sse::*;
pub use wait::*;

pub const TOKEN: &str = "test-token-0123456789";

/// Whether the suite runs on PostgreSQL: `PLANT_STORE_TEST_BACKEND=postgres` (else it
/// runs on SQLite).
pub fn on_postgres() -> bool {
    match std::env::var("PLANT_STORE_TEST_BACKEND").as_deref() {
        Ok("postgres") => true,
        Ok("sqlite") | Err(_) => false,
        Ok(other) => panic!("PLANT_STORE_TEST_BACKEND is sqlite or postgres, not {other}"),
    }
}

/// True, after saying why, when a test holds only for SQLite and the suite runs on
/// PostgreSQL (where its twin, if any, is in the test itself or in `scale_out/`).
pub fn sqlite_only(why: &str) -> bool {
    if on_postgres() {
        eprintln!("not on PostgreSQL: {why}");
    }
    on_postgres()
}

/// True, after saying why, when the binary under test cannot have test control: one
/// built without the `test-control` feature (the device build), or a run on PostgreSQL
/// (test control is SQLite's).
pub fn no_test_control() -> bool {
    sqlite_only("test control is SQLite's") || without(Feature::TestControl)
}

/// True, after saying why, when a test holds only for PostgreSQL and the suite runs on
/// SQLite.
pub fn postgres_only(why: &str) -> bool {
    if !on_postgres() {
        eprintln!("not on SQLite: {why}");
    }
    !on_postgres()
}

/// True, after saying why, when the binary under test runs under an emulator
/// (`PLANT_STORE_EMULATOR`, as `.ci/run` runs the armv7 and riscv64 builds) and the test
/// cannot hold there. The reasons, in `EMULATED_*`.
pub fn native_only(why: &str) -> bool {
    let emulated = emulator().is_some();
    if emulated {
        eprintln!("not under an emulator: {why}");
    }
    emulated
}

/// qemu-user (7.2) does not answer `TCP_INFO` in full, so the server cannot tell where a
/// request ends in the stream: it serves one request per connection (no pipelining, no
/// `Expect: 100-continue`), and does not cut off clients that stop reading
/// (docs/device.md, "Static builds").
pub const EMULATED_TCP_INFO: &str = "without TCP_INFO (qemu-user) the server serves one request per connection and cuts off no slow reader";

/// Under qemu-user the process's RSS also holds the emulator and its cache of translated
/// code, which grows as new code runs: memory bounds do not apply.
pub const EMULATED_RSS: &str = "under qemu-user the RSS holds the emulator's translated code";

/// Under qemu-user each accept finds the new connection's descriptor through emulated
/// system calls over all open ones (`http/socket`): 2,000 connections take longer to be
/// accepted than the read timeout (2 s) the test gives them.
pub const EMULATED_ACCEPT: &str =
    "under qemu-user 2,000 connections are accepted slower than the test's 2 s read timeout";

/// The schema version this build migrates to: the last `-- version N` of `plants.sql`.
pub fn schema_version() -> i64 {
    include_str!("../../../plants.sql")
        .lines()
        .filter_map(|l| l.strip_prefix("-- version "))
        .map(|n| n.trim().parse::<i64>().expect("a version number"))
        .max()
        .expect("plants.sql has versions")
}
