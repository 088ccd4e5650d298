//! The black-box test suite: one crate, one module per area. Every test starts the real
//! binary through `support::TestServer` and talks HTTP to it.

/// This crate runs the suite on SQLite (`tests/postgres.rs` runs it on PostgreSQL).
const POSTGRES: bool = false;

mod api;
mod connections;
mod durability;
mod metrics;
mod robustness;
mod service;
mod static_build;
mod support;
mod tokens;
