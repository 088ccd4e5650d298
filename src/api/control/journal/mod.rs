//! The journal (`GET /_control/requests`): the requests that arrived, `/_control/` ones
//! excepted, each from the moment its head is read, in the order of arrival (`n`), with
//! what the client sent and what became of it (`entry.rs`). Bounded in entries
//! (`--journal-size`) and in bytes (`--journal-bytes`): the oldest go first.
//!
//! The HTTP layer holds a `Ticket` for each request in flight: the route's read of the
//! body goes into the entry, and the answer's first byte waits for `answered` (a request
//! dropped with none is answered `null`). A listing copies out the entries a few at a
//! time and writes their JSON holding no lock, so that no answer waits behind it. A
//! listing that waits (`wait`, `min`) is parked by the HTTP layer: `park` calls it back
//! when enough answered entries match.

mod entry;
mod query;

pub use entry::token_fingerprint;
pub use query::Query;

use crate::ops::clock::Clock;
use entry::{Answer, Entry, MAX_JOURNAL_BODY};
use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, MutexGuard};

/// Entries a listing copies out at a time (the journal's lock is held that long).
const LIST_CHUNK: usize = 256;

/// What is called once a parked listing has its entries.
pub type Wake = Box<dyn FnOnce() + Send>;

pub struct Journal {
    size: usize,
    max_bytes: usize,
    kept: Mutex<Kept>,
    /// The server's clock: an entry's `at` is on the test clock.
    clock: Arc<Clock>,
}

#[derive(Default)]
struct Kept {
    /// By `n`, oldest first.
    entries: VecDeque<Arc<Entry>>,
    /// The next arrival's `n` (from 1; a clear starts again at 1).
    next: u64,
    /// What the entries kept are counted to cost.
    bytes: usize,
    /// Answers recorded so far: each answered entry's `seq`.
    answers: u64,
    /// Clears so far.
    clears: u64,
    /// Listings waiting for entries (`park`), and the last one's id.
    waiters: Vec<Waiter>,
    parked: u64,
}

struct Waiter {
    id: u64,
    query: Arc<Query>,
    /// Answered entries that match, still to come.
    left: usize,
    wake: Wake,
}

/// Whether a request target is test control's own (never journaled).
fn is_control(url: &str) -> bool {
    let path = origin(url);
    path.starts_with("/_control/") || path == "/_control" || path.starts_with("/_control?")
}

/// A request target in origin form: `http://host/plants?x` is `/plants?x`.
fn origin(target: &str) -> &str {
    if target.starts_with('/') {
        return target;
    }
    match target.split_once("://") {
        Some((_, rest)) => rest.find('/').map_or("/", |i| &rest[i..]),
        None => target,
    }
}

impl Journal {
    pub fn new(size: usize, max_bytes: usize, clock: Arc<Clock>) -> Journal {
        Journal {
            size,
            max_bytes,
            clock,
            kept: Mutex::new(Kept {
                next: 1,
                ..Kept::default()
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Kept> {
        self.kept.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A request whose head (of `head_len` bytes) was just read: its entry, listed from
    /// now; `None` when it is not journaled (a control request, or a journal that keeps
    /// none).
    pub fn arrived<'h>(
        self: &Arc<Self>,
        method: &str,
        target: &str,
        fields: impl IntoIterator<Item = (&'h str, &'h str)>,
        head_len: usize,
    ) -> Option<Ticket> {
        if self.size == 0 || self.max_bytes == 0 || is_control(target) {
            return None;
        }
        let at = self.clock.unix_now_millis();
        let entry = Arc::new(Entry::new(method, origin(target), fields, at, head_len));
        let cost = entry.cost();
        let mut kept = self.lock();
        entry.n.store(kept.next, Ordering::Relaxed);
        kept.next += 1;
        entry.charged.store(cost, Ordering::Relaxed);
        kept.bytes += cost;
        kept.entries.push_back(entry.clone());
        self.bound(&mut kept);
        drop(kept);
        Some(Ticket(Box::new(Held {
            journal: self.clone(),
            entry,
            body_read: false,
            done: false,
        })))
    }

    /// Counts `more` bytes for `entry`, if it is still kept, and keeps the bounds.
    fn charge(&self, kept: &mut Kept, entry: &Entry, more: usize) {
        let charged = entry.charged.load(Ordering::Relaxed);
        if charged > 0 && more > 0 {
            entry.charged.store(charged + more, Ordering::Relaxed);
            kept.bytes += more;
            self.bound(kept);
        }
    }

    /// The oldest entries go until both bounds hold.
    fn bound(&self, kept: &mut Kept) {
        while kept.entries.len() > self.size || kept.bytes > self.max_bytes {
            let Some(old) = kept.entries.pop_front() else {
                break;
            };
            kept.bytes -= old.charged.swap(0, Ordering::Relaxed);
        }
    }

    /// `DELETE /_control/requests`, and a reset: empty, `n` from 1 again; a request in
    /// flight stays, with a new `n` in its order of arrival.
    pub fn clear(&self) {
        let mut kept = self.lock();
        let old = std::mem::take(&mut kept.entries);
        kept.next = 1;
        kept.bytes = 0;
        kept.clears += 1;
        for e in &old {
            if !e.open.load(Ordering::Relaxed) {
                e.charged.store(0, Ordering::Relaxed);
                continue;
            }
            e.n.store(kept.next, Ordering::Relaxed);
            kept.next += 1;
            kept.bytes += e.charged.load(Ordering::Relaxed);
            kept.entries.push_back(e.clone());
        }
        for w in &mut kept.waiters {
            w.left = w.query.min;
        }
        drop(kept);
        // The entries are freed holding no lock.
        drop(old);
    }

    /// The entries past `after`, by `n`, copied out a few at a time: `each` is called
    /// with no lock held; it returns false to stop.
    fn each(&self, mut after: u64, mut each: impl FnMut(&Entry) -> bool) {
        loop {
            let chunk: Vec<Arc<Entry>> = {
                let kept = self.lock();
                let from = kept.entries.partition_point(|e| e.n() <= after);
                kept.entries
                    .range(from..)
                    .take(LIST_CHUNK)
                    .cloned()
                    .collect()
            };
            for e in &chunk {
                after = e.n();
                if !each(e) {
                    return;
                }
            }
            if chunk.len() < LIST_CHUNK {
                return;
            }
        }
    }

    /// `GET /_control/requests`: the entries that match, as a JSON array.
    pub fn list(&self, q: &Query) -> Vec<u8> {
        let mut out = b"[".to_vec();
        let mut left = q.limit.unwrap_or(usize::MAX);
        if left > 0 {
            self.each(q.after, |e| {
                if q.matches(e) {
                    if out.len() > 1 {
                        out.push(b',');
                    }
                    e.write_json(&mut out);
                    left -= 1;
                }
                left > 0
            });
        }
        out.push(b']');
        out
    }

    /// A listing that waits (`q.wait`): `wake` is called (on the thread that records the
    /// answer, or here) once `q.min` answered entries match. Its id, for `unpark`.
    pub fn park(&self, q: Arc<Query>, wake: Wake) -> u64 {
        let (id, since, clears) = {
            let mut kept = self.lock();
            kept.parked += 1;
            let id = kept.parked;
            let left = q.min;
            kept.waiters.push(Waiter {
                id,
                query: q.clone(),
                left,
                wake,
            });
            (id, kept.answers, kept.clears)
        };
        // Those answered before it was parked; the later ones are counted as they come.
        let mut found = 0;
        self.each(q.after, |e| {
            let before = e.late().answer.as_ref().is_some_and(|a| a.seq <= since);
            if before && q.matches(e) {
                found += 1;
            }
            found < q.min
        });
        let mut kept = self.lock();
        let Some(at) = kept.waiters.iter().position(|w| w.id == id) else {
            return id;
        };
        if kept.clears == clears {
            let w = &mut kept.waiters[at];
            w.left = w.left.saturating_sub(found);
        }
        if kept.waiters[at].left == 0 {
            let w = kept.waiters.swap_remove(at);
            drop(kept);
            (w.wake)();
        }
        id
    }

    /// A parked listing whose time is up: no longer waits.
    pub fn unpark(&self, id: u64) {
        self.lock().waiters.retain(|w| w.id != id);
    }
}

/// A request in flight, held by the HTTP layer from its arrival to its answer.
/// (One pointer: it travels with the request through the connection's phases.)
pub struct Ticket(Box<Held>);

struct Held {
    journal: Arc<Journal>,
    entry: Arc<Entry>,
    body_read: bool,
    done: bool,
}

impl Ticket {
    /// The body, as the route reads it (first read only; empty: none). It counts toward
    /// `--journal-bytes` once the request is answered.
    pub fn body(&mut self, body: &[u8]) {
        if std::mem::replace(&mut self.0.body_read, true) || body.is_empty() {
            return;
        }
        let kept = &body[..body.len().min(MAX_JOURNAL_BODY)];
        self.0.entry.late().body = Some((kept.to_vec(), body.len() > kept.len()));
    }

    /// Its answer's first byte is about to be sent (`status`; `None`: no answer is),
    /// with the caller's principal and the fault that took it.
    pub fn answered(mut self, status: Option<u16>, principal: Option<&str>, fault: Option<&str>) {
        self.0.finish(status, principal, fault);
    }
}

impl Drop for Ticket {
    /// A request that ends with no answer.
    fn drop(&mut self) {
        self.0.finish(None, None, None);
    }
}

impl Held {
    /// Records the answer, once; wakes the parked listings it makes whole.
    fn finish(&mut self, status: Option<u16>, principal: Option<&str>, fault: Option<&str>) {
        if std::mem::replace(&mut self.done, true) {
            return;
        }
        let elapsed = self.entry.arrived.elapsed();
        let journal = &self.journal;
        let mut kept = journal.lock();
        kept.answers += 1;
        let seq = kept.answers;
        self.entry.open.store(false, Ordering::Relaxed);
        let more = {
            let mut late = self.entry.late();
            late.principal = principal.map(str::to_owned);
            late.answer = Some(Answer {
                status,
                fault: fault.map(str::to_owned),
                duration_ms: (elapsed.as_micros() as f64 / 10.0).round() / 100.0,
                seq,
            });
            Entry::late_cost(&late)
        };
        journal.charge(&mut kept, &self.entry, more);
        if self.entry.charged.load(Ordering::Relaxed) == 0 || kept.waiters.is_empty() {
            return;
        }
        let mut woken = Vec::new();
        let mut at = 0;
        while at < kept.waiters.len() {
            let w = &mut kept.waiters[at];
            if w.query.after < self.entry.n() && w.query.matches(&self.entry) {
                w.left = w.left.saturating_sub(1);
            }
            if w.left == 0 {
                woken.push(kept.waiters.swap_remove(at).wake);
            } else {
                at += 1;
            }
        }
        drop(kept);
        for wake in woken {
            wake();
        }
    }
}

#[cfg(test)]
mod tests;
