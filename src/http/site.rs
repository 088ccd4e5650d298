//! What one server's HTTP threads share (its connections, workers, answer writers and
//! event streams), reached from each connection: the server's figures, its event streams
//! and the threads it started. Two servers in one process share none of it.

use crate::http::feed::Streams;
use crate::http::socket;
use crate::ops::metrics::Metrics;
use crate::ops::threads::Threads;
use std::net::Shutdown;
use std::os::fd::RawFd;
use std::sync::{Arc, Mutex};

/// Stack of each writer thread (it streams a list: SQLite runs there).
pub const WRITER_STACK_BYTES: usize = 256 * 1024;

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

impl Site {
    /// Runs `job` with `what` (which holds a request's answer to write) on a writer thread
    /// of its own, so that no worker waits on a client. `what` stays reachable here so
    /// that, if no thread can be had, the connection `fd` is shut down before tiny_http's
    /// drop of the request tries to write to it.
    pub fn on_writer<T: Send + 'static>(&self, fd: RawFd, what: T, job: fn(T)) {
        let held = Arc::new(Mutex::new(Some(what)));
        let for_thread = held.clone();
        let spawned = self.threads.spawn("writer", WRITER_STACK_BYTES, move || {
            let taken = for_thread.lock().ok().and_then(|mut j| j.take());
            if let Some(what) = taken {
                job(what);
            }
        });
        if let Err(e) = spawned {
            let taken = held.lock().ok().and_then(|mut j| j.take());
            if let Some(what) = taken {
                log::warn!("cannot start a writer thread ({e}); closing the connection");
                socket::shutdown(fd, Shutdown::Both);
                drop(what);
            }
        }
    }
}
