//! The black-box suite again, every test against PostgreSQL: `support` gives each test a
//! fresh database in a throw-away cluster this process starts. Needs the `postgres`
//! feature (the binary must speak PostgreSQL) and Debian's `postgresql` package.
//! `scale_out.rs` holds what only PostgreSQL can do: several instances on one database.

/// This crate runs the suite on PostgreSQL.
const POSTGRES: bool = true;

#[path = "it/api.rs"]
mod api;
#[path = "it/connections.rs"]
mod connections;
#[path = "it/durability.rs"]
mod durability;
#[path = "it/metrics.rs"]
mod metrics;
#[path = "it/robustness.rs"]
mod robustness;
#[path = "it/scale_out.rs"]
mod scale_out;
#[path = "it/support.rs"]
mod support;
#[path = "it/tokens.rs"]
mod tokens;
