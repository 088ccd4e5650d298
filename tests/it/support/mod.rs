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

mod http;
mod pki;
mod postgres;
mod receiver;
mod server;
mod sse;
mod wait;

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

/// True, after saying why, when a test holds only for PostgreSQL and the suite runs on
/// SQLite.
pub fn postgres_only(why: &str) -> bool {
    if !on_postgres() {
        eprintln!("not on SQLite: {why}");
    }
    !on_postgres()
}

/// The schema version this build migrates to: the last `-- version N` of `plants.sql`.
pub fn schema_version() -> i64 {
    include_str!("../../../plants.sql")
        .lines()
        .filter_map(|l| l.strip_prefix("-- version "))
        .map(|n| n.trim().parse::<i64>().expect("a version number"))
        .max()
        .expect("plants.sql has versions")
}
