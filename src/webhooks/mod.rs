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
//! and body. Leases and due times are taken by the database's clock.

pub mod client;
pub mod schedule;
pub mod sign;

use crate::api::events::write_event_json;
use crate::ops::clock;
use crate::ops::metrics::Metrics;
use crate::ops::threads::Threads;
use crate::store::feed::Board;
use crate::store::{Attempt, Change, Endpoint, Outcome, Reader, Store, Writes};
use client::{Answer, Client, Message};
use schedule::Schedule;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};
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
/// A lease outlives the attempt it covers by this much.
pub const LEASE_MARGIN: Duration = Duration::from_secs(5);
/// An attempt starts only while its lease has `--webhook-timeout` and this much left: the
/// rest of the margin covers reading the event and recording the answer.
const LEASE_SLACK: Duration = Duration::from_secs(1);
/// Events read from the log at a time.
const PAGE: u32 = 64;
/// How long one thread posts to one endpoint before it gives the thread to the next (the
/// attempt under way is finished first).
pub const TURN: Duration = Duration::from_secs(1);
/// After a claim that did not apply (another process has the endpoint, or it moved on
/// since it was read), the endpoint is not handed out again for this long.
const CLAIM_BACKOFF: Duration = Duration::from_millis(100);
/// The `webhooks` thread spends at most about a tenth of its time reading endpoints: after
/// a read that took T, the next waits at least `SCAN_SHARE` × T.
const SCAN_SHARE: u32 = 10;

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
    shared: Arc<Shared>,
}

impl Deliveries {
    /// No new attempt starts; an attempt under way goes on (and records its answer) until
    /// `abandon`.
    pub fn stop(&self) {
        self.shared.stopping.store(true, Ordering::Relaxed);
        self.shared.board.deliveries.stop();
    }

    /// Just before the process exits: the leases of the attempts still under way are given
    /// back (queued for the writer's last commit, never awaited), so that the next process,
    /// or another instance, makes them again at once rather than when the lease runs out.
    /// Their answers are not recorded, as after a crash.
    pub fn abandon(self) {
        let busy: Vec<String> = self
            .shared
            .busy()
            .iter()
            .filter(|(_, hold)| hold.is_none())
            .map(|(id, _)| id.clone())
            .collect();
        for endpoint in busy {
            self.shared.writes.try_send(Change::Release {
                endpoint,
                owner: self.shared.owner.clone(),
            });
        }
    }
}

/// What every delivery thread shares.
struct Shared {
    writes: Writes,
    /// The server's figures.
    metrics: Arc<Metrics>,
    board: Arc<Board>,
    client: Client,
    config: Config,
    /// This process, as a lease names it.
    owner: String,
    /// Endpoints a thread has now (`None`), or that are not to be handed out before a
    /// time (`Some`).
    busy: Mutex<HashMap<String, Option<Instant>>>,
    stopping: AtomicBool,
}

/// Starts the `webhooks` thread and `config.threads` delivery threads, each with reads of
/// its own.
pub fn start(store: &Store, config: Config, threads: &Threads) -> Result<Deliveries, String> {
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
        config,
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

impl Shared {
    fn busy(&self) -> std::sync::MutexGuard<'_, HashMap<String, Option<Instant>>> {
        self.busy.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// How long a lease lasts: the attempt it covers, and a margin.
    fn lease_ms(&self) -> i64 {
        (self.config.timeout + LEASE_MARGIN).as_millis() as i64
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
            .map_or_else(clock::unix_now_millis, |e| e.now_ms);
        observe(&endpoints, clock::unix_now_millis(), &s.metrics);
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

/// A delivery thread: takes endpoints from the `webhooks` thread until it stops.
fn post_loop(s: &Shared, reader: &Reader, taken: &Mutex<Receiver<Endpoint>>) {
    loop {
        let next = taken.lock().unwrap_or_else(|e| e.into_inner()).recv();
        let Ok(ep) = next else { return };
        // A panic (none is known) must not leave the endpoint taken for good.
        let claimed =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| deliver(s, reader, &ep)))
                .unwrap_or(true);
        // A claim that did not apply waits a little before the endpoint is tried again.
        let hold = (!claimed).then(|| Instant::now() + CLAIM_BACKOFF);
        match hold {
            Some(t) => s.busy().insert(ep.id.clone(), Some(t)),
            None => s.busy().remove(&ep.id),
        };
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

/// Claims the endpoint and posts its next events for a turn; false when the claim did not
/// apply. The lease is given back at the end of the turn, whatever ended it.
fn deliver(s: &Shared, reader: &Reader, ep: &Endpoint) -> bool {
    let leased_at = Instant::now();
    let claim = Change::Claim {
        endpoint: ep.id.clone(),
        owner: s.owner.clone(),
        delivered: ep.delivered,
        failures: ep.failures,
        lease_ms: s.lease_ms(),
    };
    match s.writes.write(claim) {
        Ok(Outcome::Updated(true)) => {}
        Ok(_) => return false,
        Err(e) => {
            log::warn!("webhook {}: cannot claim it: {e}", ep.id);
            return false;
        }
    }
    if !turn(s, reader, ep, leased_at) {
        s.writes.try_send(Change::Release {
            endpoint: ep.id.clone(),
            owner: s.owner.clone(),
        });
    }
    true
}

/// Posts the endpoint's next events, one by one, until one fails, none is left, the turn
/// is over, or the lease (taken or renewed at `leased_at`) would run out during the next
/// attempt. True when the last record gave the lease back.
fn turn(s: &Shared, reader: &Reader, ep: &Endpoint, mut leased_at: Instant) -> bool {
    let Some(key) = sign::key(&ep.secret) else {
        let error = "the stored secret is not whsec_ and base64".to_owned();
        return fail(s, ep, ep.delivered + 1, ep.failures + 1, error);
    };
    let lease = Duration::from_millis(s.lease_ms() as u64);
    let started = Instant::now();
    let mut delivered = ep.delivered;
    loop {
        let mut events = Vec::new();
        let read = reader.events_page(&ep.principal, delivered, PAGE, |row| {
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
            return false;
        }
        let last_page = events.len() < PAGE as usize;
        if events.first().is_none_or(|e| e.seq != delivered + 1) {
            if events.is_empty() && delivered >= ep.last_seq {
                return false;
            }
            // Never by the retention (it keeps what an active endpoint has still to get):
            // the log was restored from an older copy, or rows were removed by hand.
            let error = format!("events after {delivered} are no longer kept");
            return fail(s, ep, delivered + 1, ep.failures + 1, error);
        }
        let count = events.len();
        for (i, event) in events.into_iter().enumerate() {
            // No attempt that could outlive the lease (another process could then make
            // the same attempt at once), and none once the server is stopping.
            let lease_left = lease.saturating_sub(leased_at.elapsed());
            if s.stopping.load(Ordering::Relaxed)
                || event.seq != delivered + 1
                || lease_left < s.config.timeout + LEASE_SLACK
            {
                return false;
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
                    s.metrics.webhook_attempts[0].fetch_add(1, Ordering::Relaxed);
                    // The lease is given back with the last event known, or at the end
                    // of the turn.
                    let more = !(last_page && i + 1 == count)
                        && started.elapsed() < TURN
                        && !s.stopping.load(Ordering::Relaxed);
                    let lease_ms = if more { s.lease_ms() } else { 0 };
                    let renewing = Instant::now();
                    if !s.settle(ep, event.seq, Attempt::Delivered { lease_ms }) {
                        return false;
                    }
                    if !more {
                        return true;
                    }
                    leased_at = renewing;
                    delivered = event.seq;
                }
                Answer::Gone => {
                    s.metrics.webhook_attempts[2].fetch_add(1, Ordering::Relaxed);
                    let error = "HTTP 410: the endpoint is gone; disabled".to_owned();
                    return fail(s, ep, event.seq, failures, error);
                }
                Answer::Failed { error, retry_after } => {
                    s.metrics.webhook_attempts[1].fetch_add(1, Ordering::Relaxed);
                    let after = retry_after
                        .as_deref()
                        .and_then(|v| schedule::retry_after(v, clock::unix_now()));
                    return match s.config.schedule.after(failures, after) {
                        Some(wait) => retry(s, ep, event.seq, failures, error, wait),
                        None => {
                            let error = format!("{error}; the schedule is used up: disabled");
                            fail(s, ep, event.seq, failures, error)
                        }
                    };
                }
            }
        }
        if last_page {
            return false;
        }
    }
}

/// Records a failed attempt at `seq`, to be made again after `wait`; true when recorded
/// (which gives the lease back).
fn retry(
    s: &Shared,
    ep: &Endpoint,
    seq: i64,
    failures: i64,
    error: String,
    wait: Duration,
) -> bool {
    let attempt = Attempt::Failed {
        failures,
        wait_ms: i64::try_from(wait.as_millis()).unwrap_or(i64::MAX / 2),
        error,
        active: true,
    };
    s.settle(ep, seq, attempt)
}

/// Records a failed attempt at `seq` that disables the endpoint; true when recorded (which
/// gives the lease back).
fn fail(s: &Shared, ep: &Endpoint, seq: i64, failures: i64, error: String) -> bool {
    log::warn!("webhook {} disabled at seq {seq}: {error}", ep.id);
    let attempt = Attempt::Failed {
        failures,
        wait_ms: 0,
        error,
        active: false,
    };
    s.settle(ep, seq, attempt)
}
