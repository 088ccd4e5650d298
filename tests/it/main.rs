//! The black-box test suite: one crate, one module per area. Every test starts the real
//! binary through `support::TestServer` and talks HTTP to it.

mod api;
mod connections;
mod durability;
mod robustness;
mod service;
mod support;
mod tokens;
