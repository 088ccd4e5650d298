//! HTTP on top of tiny_http: the accept loop, a connection's life, the gate that reads
//! each request strictly before tiny_http parses it, the workers' queue and answers.

pub mod accept;
pub mod access;
pub mod conn;
pub mod connection;
pub mod delay;
pub mod fault;
pub mod fault_bytes;
pub mod feed;
pub mod framing;
pub mod gate;
pub mod queue;
pub mod response;
pub mod site;
pub mod socket;
pub mod waiting;
pub mod workers;
