//! HTTP on top of tiny_http: the accept loop, a connection's life, the gate that reads
//! each request strictly before tiny_http parses it, the workers' queue and answers.

pub mod accept;
pub mod access;
pub mod conn;
pub mod connection;
/// Test control's hooks where requests are answered (`delay`, `fault`, `fault_bytes`,
/// `waiting`); without the `test-control` feature, `no_control.rs` stands in for the
/// four, with their names.
#[cfg(feature = "test-control")]
pub mod delay;
#[cfg(feature = "test-control")]
pub mod fault;
#[cfg(feature = "test-control")]
pub mod fault_bytes;
pub mod feed;
pub mod framing;
pub mod gate;
#[cfg(not(feature = "test-control"))]
mod no_control;
pub mod queue;
pub mod response;
pub mod site;
pub mod socket;
#[cfg(feature = "test-control")]
pub mod waiting;
pub mod workers;
#[cfg(not(feature = "test-control"))]
pub use no_control::{delay, fault, fault_bytes, waiting};
