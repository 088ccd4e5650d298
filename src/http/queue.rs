//! The workers' queue: requests handed over by connection threads, and writes whose
//! transaction has committed, put back by the writer thread to be answered. Neither side
//! ever waits for room: a connection has at most one request here at a time, so the
//! queue holds at most `--max-connections` requests, and the writer must never block.
//! A request that has waited longer than `--queue-timeout` is answered 503 by the worker
//! that takes it (`workers.rs`), so only work that cannot be served in time is refused.

use crate::ops::metrics::Metrics;
use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Instant;

pub struct WorkQueue<R, S> {
    /// The server's figures (the queue's depth).
    metrics: Arc<Metrics>,
    state: Mutex<State<R, S>>,
    ready: Condvar,
}

struct State<R, S> {
    /// New requests, with when they were queued.
    requests: VecDeque<(Instant, R)>,
    settled: VecDeque<S>,
    open: bool,
    /// Workers waiting in `take`: only then is a wake-up (a system call) worth sending.
    sleeping: usize,
}

/// What a worker takes from the queue.
pub enum Task<R, S> {
    /// A request and how long it has waited.
    Request(R, Instant),
    /// A write, committed (or failed), to be answered.
    Settled(S),
}

impl<R, S> WorkQueue<R, S> {
    pub fn new(metrics: Arc<Metrics>) -> WorkQueue<R, S> {
        WorkQueue {
            metrics,
            state: Mutex::new(State {
                requests: VecDeque::new(),
                settled: VecDeque::new(),
                open: true,
                sleeping: 0,
            }),
            ready: Condvar::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State<R, S>> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Queues a request, or gives it back when the queue is closed.
    pub fn offer(&self, request: R) -> Result<(), R> {
        let mut state = self.lock();
        if !state.open {
            return Err(request);
        }
        state.requests.push_back((Instant::now(), request));
        self.metrics.queue_depth.add(1);
        let wake = state.sleeping > 0;
        drop(state);
        if wake {
            self.ready.notify_one();
        }
        Ok(())
    }

    /// Queues a committed write to be answered; taken before any new request.
    pub fn settle(&self, settled: S) {
        let mut state = self.lock();
        state.settled.push_back(settled);
        let wake = state.sleeping > 0;
        drop(state);
        if wake {
            self.ready.notify_one();
        }
    }

    /// The next task, committed writes first; `None` once the queue is closed and empty.
    pub fn take(&self) -> Option<Task<R, S>> {
        let mut state = self.lock();
        loop {
            if let Some(s) = state.settled.pop_front() {
                return Some(Task::Settled(s));
            }
            if let Some((queued, r)) = state.requests.pop_front() {
                self.metrics.queue_depth.add(-1);
                return Some(Task::Request(r, queued));
            }
            if !state.open {
                return None;
            }
            state.sleeping += 1;
            state = self.ready.wait(state).unwrap_or_else(|e| e.into_inner());
            state.sleeping -= 1;
        }
    }

    /// Refuses new requests; `take` ends once what is queued is taken.
    pub fn close(&self) {
        self.lock().open = false;
        self.ready.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    type Q = WorkQueue<&'static str, &'static str>;

    fn name(q: &Q) -> Option<String> {
        q.take().map(|t| match t {
            Task::Request(r, _) => format!("request {r}"),
            Task::Settled(s) => format!("settled {s}"),
        })
    }

    #[test]
    fn settled_writes_go_first_then_requests_in_order() {
        let q = Q::new(Arc::default());
        q.offer("1").unwrap();
        q.offer("2").unwrap();
        q.settle("w");
        assert_eq!(name(&q).unwrap(), "settled w");
        assert_eq!(name(&q).unwrap(), "request 1");
        assert_eq!(name(&q).unwrap(), "request 2");
    }

    #[test]
    fn a_closed_queue_refuses_requests_and_ends_once_empty() {
        let q = Q::new(Arc::default());
        q.offer("1").unwrap();
        q.close();
        assert_eq!(q.offer("2"), Err("2"));
        q.settle("late write");
        assert_eq!(name(&q).unwrap(), "settled late write");
        assert_eq!(name(&q).unwrap(), "request 1");
        assert!(name(&q).is_none());
    }
}
