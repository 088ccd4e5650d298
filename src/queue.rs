//! The workers' queue. It holds requests from the dispatcher, at most `capacity` waiting
//! (beyond that the dispatcher answers 503), and writes whose transaction has committed,
//! put back by the writer thread to be answered. The writer never waits here, so a write
//! holds no worker while it waits for its commit: every connection can have a write in
//! the same group commit, whatever the number of workers.
//!
//! Requests of one connection are handled one at a time, in order: a client that
//! pipelines `POST` then `DELETE` then `GET` gets them applied in that order. Each taken
//! request comes with its connection's `Turn`, and the connection's next request waits
//! until that turn is dropped (its answer sent).

use std::collections::{HashMap, VecDeque};
use std::hash::Hash;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

pub struct WorkQueue<K: Hash + Eq + Copy, R, S> {
    state: Mutex<State<K, R, S>>,
    ready: Condvar,
    capacity: usize,
}

struct State<K: Hash + Eq + Copy, R, S> {
    /// New requests, with their connection.
    requests: VecDeque<(Option<K>, R)>,
    /// Requests whose connection's turn has come (it is in `busy` already).
    resumed: VecDeque<(K, R)>,
    /// Connections with a request in progress, and their later requests.
    busy: HashMap<K, VecDeque<R>>,
    /// Requests offered and not yet taken by a worker, however they wait.
    waiting: usize,
    settled: VecDeque<(Turn<K, R, S>, S)>,
    /// Turns handed out and not yet dropped.
    turns: usize,
    open: bool,
}

/// What a worker takes from the queue.
pub enum Task<K: Hash + Eq + Copy, R, S> {
    Request(Turn<K, R, S>, R),
    /// A write, committed, with the turn it has held since its request was taken.
    Settled(Turn<K, R, S>, S),
}

/// A request's hold on its connection, from when a worker takes it until it is answered;
/// dropping it lets the connection's next request go.
pub struct Turn<K: Hash + Eq + Copy, R, S> {
    queue: Arc<WorkQueue<K, R, S>>,
    key: Option<K>,
}

impl<K: Hash + Eq + Copy, R, S> WorkQueue<K, R, S> {
    pub fn new(capacity: usize) -> Arc<WorkQueue<K, R, S>> {
        Arc::new(WorkQueue {
            state: Mutex::new(State {
                requests: VecDeque::new(),
                resumed: VecDeque::new(),
                busy: HashMap::new(),
                waiting: 0,
                settled: VecDeque::new(),
                turns: 0,
                open: true,
            }),
            ready: Condvar::new(),
            capacity,
        })
    }

    fn lock(&self) -> MutexGuard<'_, State<K, R, S>> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Queues a request of connection `key` (`None`: unordered), or gives it back when
    /// `capacity` requests are waiting already or the queue is closed.
    pub fn offer(&self, key: Option<K>, request: R) -> Result<(), R> {
        let mut state = self.lock();
        if !state.open || state.waiting >= self.capacity {
            return Err(request);
        }
        state.waiting += 1;
        state.requests.push_back((key, request));
        drop(state);
        self.ready.notify_one();
        Ok(())
    }

    /// The next task: committed writes first, then requests whose connection is free;
    /// `None` once the queue is closed, empty, and every turn is dropped.
    pub fn take(self: &Arc<Self>) -> Option<Task<K, R, S>> {
        let mut state = self.lock();
        loop {
            if let Some((turn, s)) = state.settled.pop_front() {
                return Some(Task::Settled(turn, s));
            }
            let next = match state.resumed.pop_front() {
                Some((key, r)) => Some((Some(key), r)),
                None => loop {
                    match state.requests.pop_front() {
                        Some((Some(key), r)) => match state.busy.get_mut(&key) {
                            // Its connection has a request in progress: it waits its turn.
                            Some(later) => later.push_back(r),
                            None => {
                                state.busy.insert(key, VecDeque::new());
                                break Some((Some(key), r));
                            }
                        },
                        other => break other,
                    }
                },
            };
            if let Some((key, r)) = next {
                state.waiting -= 1;
                state.turns += 1;
                let turn = Turn {
                    queue: self.clone(),
                    key,
                };
                return Some(Task::Request(turn, r));
            }
            if !state.open && state.turns == 0 {
                return None;
            }
            state = self.ready.wait(state).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// Refuses new requests; `take` ends once what is queued is taken and answered.
    pub fn close(&self) {
        self.lock().open = false;
        self.ready.notify_all();
    }
}

impl<K: Hash + Eq + Copy, R, S> Turn<K, R, S> {
    /// Queues `settled` to be taken with this turn; never waits for room.
    pub fn settle(self, settled: S) {
        let queue = self.queue.clone();
        queue.lock().settled.push_back((self, settled));
        queue.ready.notify_one();
    }
}

impl<K: Hash + Eq + Copy, R, S> Drop for Turn<K, R, S> {
    fn drop(&mut self) {
        let mut state = self.queue.lock();
        state.turns -= 1;
        let mut resumed = false;
        if let Some(key) = self.key {
            match state.busy.get_mut(&key).and_then(VecDeque::pop_front) {
                Some(next) => {
                    state.resumed.push_back((key, next));
                    resumed = true;
                }
                None => {
                    state.busy.remove(&key);
                }
            }
        }
        let last = !state.open && state.turns == 0;
        drop(state);
        if last {
            self.queue.ready.notify_all();
        } else if resumed {
            self.queue.ready.notify_one();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    type Q = WorkQueue<u8, &'static str, &'static str>;

    /// Takes a task, says what it was, and hands back its turn.
    fn next(q: &Arc<Q>) -> Option<(String, Turn<u8, &'static str, &'static str>)> {
        q.take().map(|t| match t {
            Task::Request(turn, r) => (format!("request {r}"), turn),
            Task::Settled(turn, s) => (format!("settled {s}"), turn),
        })
    }

    fn name(q: &Arc<Q>) -> String {
        next(q).unwrap().0
    }

    #[test]
    fn waiting_requests_are_bounded_and_settled_writes_go_first() {
        let q: Arc<Q> = WorkQueue::new(2);
        assert!(q.offer(None, "1").is_ok());
        assert!(q.offer(None, "2").is_ok());
        assert_eq!(q.offer(None, "3"), Err("3"));
        let (_, turn) = next(&q).unwrap();
        assert!(
            q.offer(None, "3").is_ok(),
            "room again once a request is taken"
        );
        turn.settle("w");
        assert_eq!(name(&q), "settled w");
        assert_eq!(name(&q), "request 2");
        assert_eq!(name(&q), "request 3");
    }

    #[test]
    fn a_connection_has_one_request_in_progress_at_a_time() {
        let q: Arc<Q> = WorkQueue::new(8);
        for (key, r) in [(1, "a1"), (1, "a2"), (2, "b1"), (1, "a3")] {
            q.offer(Some(key), r).unwrap();
        }
        let (a1, a1_turn) = next(&q).unwrap();
        assert_eq!(a1, "request a1");
        // a2 waits for a1: b1 goes first.
        let (b1, _b1_turn) = next(&q).unwrap();
        assert_eq!(b1, "request b1");
        assert_eq!(q.offer(Some(3), "c1"), Ok(()));
        assert_eq!(name(&q), "request c1");
        // a1 is a write: its commit keeps the turn, then its answer drops it.
        a1_turn.settle("a1 committed");
        let (settled, a1_turn) = next(&q).unwrap();
        assert_eq!(settled, "settled a1 committed");
        drop(a1_turn);
        let (a2, a2_turn) = next(&q).unwrap();
        assert_eq!(a2, "request a2");
        drop(a2_turn);
        assert_eq!(name(&q), "request a3");
    }

    #[test]
    fn a_closed_queue_ends_only_after_every_turn() {
        let q: Arc<Q> = WorkQueue::new(4);
        q.offer(Some(1), "1").unwrap();
        q.offer(Some(1), "2").unwrap();
        q.close();
        assert_eq!(q.offer(None, "3"), Err("3"), "closed to new requests");
        let (_, first) = next(&q).unwrap();
        let waiter = {
            let q = q.clone();
            std::thread::spawn(move || {
                let mut seen = Vec::new();
                while let Some((what, turn)) = next(&q) {
                    seen.push(what);
                    drop(turn);
                }
                seen
            })
        };
        std::thread::sleep(Duration::from_millis(50));
        assert!(!waiter.is_finished(), "request 1 is still in progress");
        first.settle("1 committed");
        assert_eq!(
            waiter.join().unwrap(),
            vec!["settled 1 committed".to_owned(), "request 2".to_owned()]
        );
        assert!(next(&q).is_none());
    }
}
