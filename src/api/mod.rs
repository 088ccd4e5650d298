//! The API: what a request means and what it is answered, knowing nothing of sockets.
//! The router names each route; handlers check in the contract's order (route, token,
//! request, store).

pub mod auth;
pub mod caller;
/// Test control (docs/testing.md); without the `test-control` feature, `no_control.rs`
/// stands in with its names, and there is none.
#[cfg(feature = "test-control")]
pub mod control;
#[cfg(not(feature = "test-control"))]
#[path = "no_control.rs"]
pub mod control;
pub mod error;
pub mod events;
pub mod json;
pub mod limits;
pub mod listing;
pub mod plant;
pub mod query;
pub mod ratelimit;
pub mod routes;
pub mod seed;
