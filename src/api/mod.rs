//! The API: what a request means and what it is answered, knowing nothing of sockets.
//! The router names each route; handlers check in the contract's order (route, token,
//! request, store).

pub mod auth;
pub mod caller;
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
