//! What one server's HTTP threads share (its connections, workers, answer writers and
//! event streams), reached from each connection: the server's figures, its event streams
//! and the threads it started. Two servers in one process share none of it.

use crate::http::feed::Streams;
use crate::ops::metrics::Metrics;
use crate::ops::threads::Threads;
use std::sync::Arc;

/// One server's shared HTTP state.
pub struct Site {
    pub metrics: Arc<Metrics>,
    pub streams: Streams,
    pub threads: Threads,
    /// Test control, when on: the journal's hook at the answer (`response::write`).
    pub control: Option<Arc<crate::api::control::Control>>,
    /// Work put off without holding a worker (test control's `delay` faults).
    pub delays: Arc<crate::http::delay::Delays>,
}
