//! Webhook deliveries: each endpoint gets its principal's events, one at a time and in
//! `seq` order, signed as Standard Webhooks v1 (`sign.rs`), posted by a bounded pool of
//! threads (`client.rs`), retried on the schedule (`schedule.rs`).
//!
//! The `webhooks` thread reads every endpoint (when a commit rings `Board::deliveries`,
//! and every `POLL`), and hands each one that is active, due and behind its log to the
//! pool, unless a thread already has it. A thread first claims the endpoint's lease
//! through the writer (so one process makes each attempt, also with several PostgreSQL
//! instances), then posts the next events; after each answer it records what came of it
//! through the writer, under the lease and only if the cursor is still where the attempt
//! found it. The cursor moves only after a 2xx is committed: an attempt cut short by a
//! crash is made again, with the same `webhook-id` and body.

pub mod client;
pub mod schedule;
pub mod sign;

use crate::api::events::write_event_json;
use crate::ops::clock;
use crate::ops::metrics::METRICS;
use crate::store::feed::Board;
use crate::store::{Attempt, Change, Endpoint, Outcome, Readers, Store, Writes};
use client::{Answer, Client, Message};
use schedule::Schedule;
use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// The default of `--webhook-threads`.
pub const DEFAULT_THREADS: usize = 4;
/// The default of `--webhook-timeout`.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);
/// Endpoints are read at least this often (other instances' commits, due retries,
/// leases that ran out).
pub const POLL: Duration = Duration::from_secs(1);
/// At most one read of the endpoints per this long, however often commits ring.
const SCAN_GAP: Duration = Duration::from_millis(5);
/// A lease outlives the attempt it covers by this much.
pub const LEASE_MARGIN: Duration = Duration::from_secs(5);
/// Events read from the log at a time.
const PAGE: u32 = 64;
/// Events one thread posts to one endpoint before it gives the thread to the next.
const RUN: usize = 256;

/// `serve`'s webhook settings.
#[derive(Debug, Clone)]
pub struct Config {
    pub threads: usize,
    pub timeout: Duration,
    pub schedule: Schedule,
    pub ca: Option<PathBuf>,
}

/// The running deliveries.
pub struct Deliveries {
    stopping: Arc<AtomicBool>,
    board: Arc<Board>,
    dispatcher: JoinHandle<()>,
}

impl Deliveries {
    /// No new attempt starts; the one under way is dropped with the process (and made
    /// again at the next start).
    pub fn stop(self) {
        self.stopping.store(true, Ordering::Relaxed);
        self.board.deliveries.stop();
        let _ = self.dispatcher.join();
    }
}

/// What every delivery thread shares.
struct Shared {
    readers: Readers,
    writes: Writes,
    board: Arc<Board>,
    client: Client,
    config: Config,
    /// This process, as a lease names it.
    owner: String,
    /// Endpoints a thread has now.
    busy: Mutex<HashSet<String>>,
    stopping: Arc<AtomicBool>,
}

/// Starts the `webhooks` thread and `config.threads` delivery threads.
pub fn start(store: &Store, config: Config) -> Result<Deliveries, String> {
    let client = Client::new(config.timeout, config.ca.as_deref())?;
    let mut owner = [0u8; 8];
    getrandom::fill(&mut owner).map_err(|e| format!("no randomness: {e}"))?;
    let (readers, writes) = store.lend();
    let stopping = Arc::new(AtomicBool::new(false));
    let board = store.board();
    let shared = Arc::new(Shared {
        readers,
        writes,
        board: board.clone(),
        client,
        owner: owner.iter().map(|b| format!("{b:02x}")).collect(),
        busy: Mutex::new(HashSet::new()),
        stopping: stopping.clone(),
        config,
    });
    let (hand, taken) = sync_channel::<Endpoint>(shared.config.threads);
    let taken = Arc::new(Mutex::new(taken));
    for n in 0..shared.config.threads {
        let (s, t) = (shared.clone(), taken.clone());
        std::thread::Builder::new()
            .name(format!("webhook-{n}"))
            .stack_size(512 * 1024)
            .spawn(move || post_loop(&s, &t))
            .map_err(|e| format!("cannot start a webhook thread: {e}"))?;
    }
    board.deliveries.want(true);
    let s = shared.clone();
    let dispatcher = std::thread::Builder::new()
        .name("webhooks".into())
        .stack_size(256 * 1024)
        .spawn(move || dispatch(&s, &hand))
        .map_err(|e| format!("cannot start the webhooks thread: {e}"))?;
    Ok(Deliveries {
        stopping,
        board,
        dispatcher,
    })
}

impl Shared {
    fn busy(&self) -> std::sync::MutexGuard<'_, HashSet<String>> {
        self.busy.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn lease_until(&self) -> i64 {
        clock::unix_now_millis() + (self.config.timeout + LEASE_MARGIN).as_millis() as i64
    }

    fn settle(&self, ep: &Endpoint, seq: i64, attempt: Attempt) -> bool {
        let change = Change::Settle {
            endpoint: ep.id.clone(),
            owner: self.owner.clone(),
            seq,
            attempt,
        };
        match self.writes.write(change) {
            Ok(Outcome::Updated(applied)) => applied,
            Ok(_) => false,
            Err(e) => {
                log::warn!("webhook {}: cannot record an attempt: {e}", ep.id);
                false
            }
        }
    }
}

/// The `webhooks` thread: reads the endpoints and hands those with work to the pool.
fn dispatch(s: &Shared, hand: &SyncSender<Endpoint>) {
    let mut wait = Duration::ZERO;
    let mut failing = false;
    while s.board.deliveries.wait(wait) {
        if s.stopping.load(Ordering::Relaxed) {
            break;
        }
        let endpoints = match s.readers.endpoints() {
            Ok(e) => {
                failing = false;
                e
            }
            Err(e) => {
                if !failing {
                    log::warn!("cannot read the webhook endpoints: {e}");
                }
                failing = true;
                wait = POLL;
                continue;
            }
        };
        let now = clock::unix_now_millis();
        observe(&endpoints, now);
        let mut next = now + POLL.as_millis() as i64;
        for ep in endpoints {
            if !ep.active || ep.delivered >= ep.last_seq {
                continue;
            }
            let free_at = if ep.lease_owner == s.owner {
                0
            } else {
                ep.lease_until_ms + 1
            };
            let due = ep.due_ms.max(free_at);
            if due > now {
                next = next.min(due);
                continue;
            }
            let mut busy = s.busy();
            if busy.contains(&ep.id) {
                continue;
            }
            let id = ep.id.clone();
            match hand.try_send(ep) {
                Ok(()) => {
                    busy.insert(id);
                }
                // Every thread is busy: the next ring or poll tries again.
                Err(TrySendError::Full(_)) => break,
                Err(TrySendError::Disconnected(_)) => return,
            }
        }
        wait = Duration::from_millis((next - now).max(0) as u64).max(SCAN_GAP);
        std::thread::sleep(SCAN_GAP);
    }
}

/// The figures `/metrics` shows of the endpoints.
fn observe(endpoints: &[Endpoint], now: i64) {
    let active = endpoints.iter().filter(|e| e.active);
    METRICS.webhooks_active.set(active.clone().count() as i64);
    METRICS
        .webhooks_disabled
        .set(endpoints.iter().filter(|e| !e.active).count() as i64);
    METRICS.webhook_pending.set(
        active
            .clone()
            .map(|e| (e.last_seq - e.delivered).max(0))
            .sum(),
    );
    let oldest = active
        .filter(|e| e.delivered < e.last_seq)
        .filter_map(|e| e.next_at_ms)
        .min();
    METRICS
        .webhook_oldest_pending_ms
        .set(oldest.map_or(0, |at| (now - at).max(0)));
}

/// A delivery thread: takes endpoints from the `webhooks` thread until it stops.
fn post_loop(s: &Shared, taken: &Mutex<Receiver<Endpoint>>) {
    loop {
        let next = taken.lock().unwrap_or_else(|e| e.into_inner()).recv();
        let Ok(ep) = next else { return };
        deliver(s, &ep);
        s.busy().remove(&ep.id);
        // The endpoint may have more: let the `webhooks` thread look again.
        s.board.deliveries.ring();
    }
}

/// An event as it is posted: seq, id, and the body (the feed's JSON).
struct Event {
    seq: i64,
    id: String,
    body: Vec<u8>,
}

/// Claims the endpoint and posts its next events, up to `RUN`, until one fails.
fn deliver(s: &Shared, ep: &Endpoint) {
    let claim = Change::Claim {
        endpoint: ep.id.clone(),
        owner: s.owner.clone(),
        now_ms: clock::unix_now_millis(),
        until_ms: s.lease_until(),
    };
    match s.writes.write(claim) {
        Ok(Outcome::Updated(true)) => {}
        Ok(_) => return,
        Err(e) => {
            log::warn!("webhook {}: cannot claim it: {e}", ep.id);
            return;
        }
    }
    let Some(key) = sign::key(&ep.secret) else {
        let error = "the stored secret is not whsec_ and base64".to_owned();
        fail(s, ep, ep.delivered + 1, ep.failures + 1, error);
        return;
    };
    let mut delivered = ep.delivered;
    let mut posted = 0;
    while posted < RUN {
        let mut events = Vec::new();
        let read = s
            .readers
            .events_page(&ep.principal, delivered, PAGE, |row| {
                let mut body = Vec::with_capacity(160);
                write_event_json(row, &mut body);
                events.push(Event {
                    seq: row.seq,
                    id: row.id.to_owned(),
                    body,
                });
            });
        if let Err(e) = read {
            log::warn!("webhook {}: cannot read the events: {e}", ep.id);
            return;
        }
        let last_page = events.len() < PAGE as usize;
        let Some(first) = events.first() else { return };
        if first.seq != delivered + 1 {
            // Never by the retention (it keeps what an endpoint has still to get): the log
            // was restored from an older copy, or rows were removed by hand.
            let error = format!("events after {delivered} are no longer kept");
            fail(s, ep, delivered + 1, ep.failures + 1, error);
            return;
        }
        let count = events.len();
        for (i, event) in events.into_iter().enumerate() {
            if s.stopping.load(Ordering::Relaxed) || event.seq != delivered + 1 {
                return;
            }
            let timestamp = clock::unix_now();
            let signature = sign::signature(&key, &event.id, timestamp, &event.body);
            let message = Message {
                id: &event.id,
                timestamp,
                signature: &signature,
                body: &event.body,
            };
            let failures = 1 + if delivered == ep.delivered {
                ep.failures
            } else {
                0
            };
            match s.client.post(&ep.url, &message) {
                Answer::Delivered => {
                    METRICS.webhook_attempts[0].fetch_add(1, Ordering::Relaxed);
                    // The lease is given back with the last event known.
                    let keep = !(last_page && i + 1 == count) && posted + 1 < RUN;
                    let lease_until_ms = if keep { s.lease_until() } else { 0 };
                    if !s.settle(ep, event.seq, Attempt::Delivered { lease_until_ms }) {
                        return;
                    }
                    delivered = event.seq;
                    posted += 1;
                }
                Answer::Gone => {
                    METRICS.webhook_attempts[2].fetch_add(1, Ordering::Relaxed);
                    let error = "HTTP 410: the endpoint is gone; disabled".to_owned();
                    fail(s, ep, event.seq, failures, error);
                    return;
                }
                Answer::Failed { error, retry_after } => {
                    METRICS.webhook_attempts[1].fetch_add(1, Ordering::Relaxed);
                    let after = retry_after
                        .as_deref()
                        .and_then(|v| schedule::retry_after(v, clock::unix_now()));
                    match s.config.schedule.after(failures, after) {
                        Some(wait) => {
                            let due = clock::unix_now_millis() + wait.as_millis() as i64;
                            retry(s, ep, event.seq, failures, error, due);
                        }
                        None => {
                            let error = format!("{error}; the schedule is used up: disabled");
                            fail(s, ep, event.seq, failures, error);
                        }
                    }
                    return;
                }
            }
            if posted == RUN {
                return;
            }
        }
        if last_page {
            return;
        }
    }
}

/// Records a failed attempt at `seq`, to be made again at `due_ms`.
fn retry(s: &Shared, ep: &Endpoint, seq: i64, failures: i64, error: String, due_ms: i64) {
    let attempt = Attempt::Failed {
        failures,
        due_ms,
        error,
        active: true,
    };
    s.settle(ep, seq, attempt);
}

/// Records a failed attempt at `seq` that disables the endpoint.
fn fail(s: &Shared, ep: &Endpoint, seq: i64, failures: i64, error: String) {
    log::warn!("webhook {} disabled at seq {seq}: {error}", ep.id);
    let attempt = Attempt::Failed {
        failures,
        due_ms: 0,
        error,
        active: false,
    };
    s.settle(ep, seq, attempt);
}
