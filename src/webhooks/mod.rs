//! Webhook deliveries: each endpoint gets its principal's events, one at a time and in
//! `seq` order, signed as Standard Webhooks v1 (`sign.rs`), posted by a bounded pool of
//! threads (`client.rs`), retried on the schedule (`schedule.rs`).
//!
//! The `webhooks` thread reads every endpoint (when a commit rings `Board::deliveries`,
//! and every `POLL`), and hands each one that is active, due and behind its log to the
//! pool, unless a thread already has it; it takes the endpoints in turn, from the one
//! after the last it handed out. A thread first claims the endpoint's lease through the
//! writer, which succeeds only while the endpoint is still where the reader found it (so
//! one process makes each attempt, also with several PostgreSQL instances, and never
//! from a stale place), then posts the next events for at most `TURN`; after each
//! answer it records what came of it through the writer, under the lease and only if the
//! cursor is still where the attempt found it. The cursor moves only after a 2xx is
//! committed: an attempt cut short by a crash is made again, with the same `webhook-id`
//! and body. Leases and due times are taken by the database's clock. The delivery
//! threads are in `deliver.rs`. At shutdown no attempt starts, and those under way
//! finish within the drain (`Deliveries::finish`).

pub mod client;
mod deliver;
/// Test control's faults on attempts; without the `test-control` feature, `no_faults.rs`
/// stands in with its names.
#[cfg(feature = "test-control")]
mod faults;
#[cfg(not(feature = "test-control"))]
#[path = "no_faults.rs"]
mod faults;
pub mod schedule;
pub mod sign;

use crate::ops::clock::Clock;
use crate::ops::metrics::Metrics;
use crate::ops::threads::Threads;
use crate::store::{Change, Endpoint, Reader, Store};
use client::Client;
pub use deliver::{Config, LEASE_MARGIN};
use deliver::{Shared, post_loop};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{SyncSender, TrySendError, sync_channel};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The default of `--webhook-threads`.
pub const DEFAULT_THREADS: usize = 4;
/// The default of `--webhook-timeout`.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);
/// Endpoints are read at least this often (other instances' commits, due retries,
/// leases that ran out).
pub const POLL: Duration = Duration::from_secs(1);
/// At most one read of the endpoints per this long, however often commits ring.
const SCAN_GAP: Duration = Duration::from_millis(5);
/// How often the drain looks whether the attempts under way have finished.
const DRAIN_LOOK: Duration = Duration::from_millis(10);
/// The `webhooks` thread spends at most about a tenth of its time reading endpoints: after
/// a read that took T, the next waits at least `SCAN_SHARE` × T.
const SCAN_SHARE: u32 = 10;

/// The running deliveries.
pub struct Deliveries {
    shared: Arc<Shared>,
}

impl Deliveries {
    /// No new attempt starts; an attempt under way goes on (and records its answer)
    /// until `finish`.
    pub fn stop(&self) {
        self.shared.stopping.store(true, Ordering::Relaxed);
        self.shared.board.deliveries.stop();
    }

    /// The drain (after `stop`): waits until every attempt under way has finished and
    /// its answer is recorded, or until `deadline`. The leases of the attempts still
    /// under way then are given back (queued for the writer's last commit, never
    /// awaited), so that the next process, or another instance, makes them again at
    /// once rather than when the lease runs out; their answers are not recorded, as after
    /// a crash.
    pub fn finish(self, deadline: Instant) {
        let mut left = self.under_way();
        if !left.is_empty() {
            log::info!(
                "stopping: {} webhook attempt(s) under way are let finish",
                left.len()
            );
        }
        while !left.is_empty() && Instant::now() < deadline {
            std::thread::sleep(DRAIN_LOOK);
            left = self.under_way();
        }
        if !left.is_empty() {
            log::warn!(
                "drain timeout passed with {} webhook attempt(s) under way: their endpoints are given back, and the attempts are made again",
                left.len()
            );
        }
        for endpoint in left {
            self.shared.writes.try_send(Change::Release {
                endpoint,
                owner: self.shared.owner.clone(),
            });
        }
        // The attempts still under way are cut now, unrecorded, so that their threads end
        // with the server.
        self.shared.cut.store(true, Ordering::SeqCst);
        self.shared.client.shutdown();
    }

    /// The endpoints a delivery thread has now.
    fn under_way(&self) -> Vec<String> {
        self.shared
            .busy()
            .iter()
            .filter(|(_, hold)| hold.is_none())
            .map(|(id, _)| id.clone())
            .collect()
    }
}

/// Starts the `webhooks` thread and `config.threads` delivery threads, each with reads of
/// its own; times are read on the server's `clock`.
pub fn start(
    store: &Store,
    config: Config,
    threads: &Threads,
    clock: Arc<Clock>,
    control: Option<Arc<crate::api::control::Control>>,
) -> Result<Deliveries, String> {
    let client = Client::new(config.timeout, config.ca.as_deref())?;
    let mut owner = [0u8; 8];
    getrandom::fill(&mut owner).map_err(|e| format!("no randomness: {e}"))?;
    let lend = || {
        store
            .lend()
            .map_err(|e| format!("cannot open the database: {e}"))
    };
    let (reader, writes) = lend()?;
    let board = store.board();
    let shared = Arc::new(Shared {
        writes,
        metrics: store.metrics(),
        board: board.clone(),
        client,
        owner: owner.iter().map(|b| format!("{b:02x}")).collect(),
        busy: Mutex::new(HashMap::new()),
        stopping: AtomicBool::new(false),
        cut: AtomicBool::new(false),
        control,
        config,
        clock,
    });
    let (hand, taken) = sync_channel::<Endpoint>(shared.config.threads);
    let taken = Arc::new(Mutex::new(taken));
    for n in 0..shared.config.threads {
        let (s, t, (r, _)) = (shared.clone(), taken.clone(), lend()?);
        threads
            .spawn(&format!("webhook-{n}"), 512 * 1024, move || {
                post_loop(&s, &r, &t)
            })
            .map_err(|e| format!("cannot start a webhook thread: {e}"))?;
    }
    board.deliveries.want(true);
    let s = shared.clone();
    threads
        .spawn("webhooks", 256 * 1024, move || dispatch(&s, &reader, &hand))
        .map_err(|e| format!("cannot start the webhooks thread: {e}"))?;
    Ok(Deliveries { shared })
}

/// The `webhooks` thread: reads the endpoints and hands those with work to the pool, in
/// turn.
fn dispatch(s: &Shared, reader: &Reader, hand: &SyncSender<Endpoint>) {
    let mut wait = Duration::ZERO;
    let mut failing = false;
    // The endpoint handed out last: the next pass starts after it.
    let mut last = String::new();
    while s.board.deliveries.wait(wait) {
        if s.stopping.load(Ordering::Relaxed) {
            break;
        }
        let scan = Instant::now();
        let mut endpoints = match reader.endpoints() {
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
        let now = endpoints
            .first()
            .map_or_else(|| s.clock.steady_millis(), |e| e.now_ms);
        observe(&endpoints, s.clock.unix_now_millis(), &s.metrics);
        // In turn: those after the last handed out first (the list is in id order).
        let after = endpoints.partition_point(|e| e.id <= last);
        endpoints.rotate_left(after);
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
            let mut busy = s.busy();
            match busy.get(&ep.id) {
                Some(None) => continue,
                Some(Some(t)) if *t > Instant::now() => {
                    // Held back after a claim that did not apply: look again when it ends.
                    let left = t.saturating_duration_since(Instant::now());
                    next = next.min(now + left.as_millis() as i64 + 1);
                    continue;
                }
                _ => {}
            }
            let due = ep.due_ms.max(free_at);
            if due > now {
                next = next.min(due);
                continue;
            }
            let id = ep.id.clone();
            match hand.try_send(ep) {
                Ok(()) => {
                    busy.insert(id.clone(), None);
                    last = id;
                }
                // Every thread is busy: the next ring or poll tries again.
                Err(TrySendError::Full(_)) => break,
                Err(TrySendError::Disconnected(_)) => return,
            }
        }
        wait = Duration::from_millis((next - now).max(0) as u64).max(SCAN_GAP);
        // However often commits ring, reading the endpoints takes a bounded share.
        std::thread::sleep(SCAN_GAP.max(scan.elapsed() * SCAN_SHARE));
    }
}

/// The figures `/metrics` shows of the endpoints; `now` by this process's clock, as the
/// events' times are.
fn observe(endpoints: &[Endpoint], now: i64, metrics: &Metrics) {
    let active = endpoints.iter().filter(|e| e.active);
    metrics.webhooks_active.set(active.clone().count() as i64);
    metrics
        .webhooks_disabled
        .set(endpoints.iter().filter(|e| !e.active).count() as i64);
    metrics.webhook_pending.set(
        active
            .clone()
            .map(|e| (e.last_seq - e.delivered).max(0))
            .sum(),
    );
    let oldest = active
        .filter(|e| e.delivered < e.last_seq)
        .filter_map(|e| e.next_at_ms)
        .min();
    metrics
        .webhook_oldest_pending_ms
        .set(oldest.map_or(0, |at| (now - at).max(0)));
}
