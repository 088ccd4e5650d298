//! The delivery threads and what they share: a thread takes an endpoint from the
//! `webhooks` thread, claims its lease, posts its next events for a turn, and records
//! each answer through the writer.

use crate::api::events::write_event_json;
use crate::ops::clock::Clock;
use crate::ops::metrics::Metrics;
use crate::store::feed::Board;
use crate::store::{Attempt, Change, Endpoint, Outcome, Reader, Writes};
use crate::webhooks::client::{Answer, Client, Message};
use crate::webhooks::faults;
use crate::webhooks::schedule::{self, Schedule};
use crate::webhooks::sign;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Receiver;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

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
/// After a delivery thread panicked on an endpoint (a bug: none is known), its lease is
/// given back and this process does not hand it out again for this long, so a panic that
/// repeats costs an attempt and a log line per this long, never a tight loop.
pub const PANIC_BACKOFF: Duration = Duration::from_secs(5);

/// `serve`'s webhook settings.
#[derive(Debug, Clone)]
pub struct Config {
    pub threads: usize,
    pub timeout: Duration,
    pub schedule: Schedule,
    pub ca: Option<PathBuf>,
}

/// What every delivery thread shares.
pub struct Shared {
    pub(super) writes: Writes,
    /// The server's figures.
    pub(super) metrics: Arc<Metrics>,
    pub(super) board: Arc<Board>,
    pub(super) client: Client,
    pub(super) config: Config,
    /// This process, as a lease names it.
    pub(super) owner: String,
    /// Endpoints a thread has now (`None`), or that are not to be handed out before a
    /// time (`Some`).
    pub(super) busy: Mutex<HashMap<String, Option<Instant>>>,
    pub(super) stopping: AtomicBool,
    /// The drain's time ran out and the attempts still under way were cut
    /// (`Deliveries::finish`): their leases are given back, and their answers, an I/O
    /// error of our own making, are not recorded.
    pub(super) cut: AtomicBool,
    /// The server's clock: `webhook-timestamp`, a `Retry-After` date.
    pub(super) clock: Arc<Clock>,
    /// Test control, when on: its faults on deliveries (`faults.rs`).
    pub(super) control: Option<Arc<crate::api::control::Control>>,
}

impl Shared {
    pub(super) fn busy(&self) -> std::sync::MutexGuard<'_, HashMap<String, Option<Instant>>> {
        self.busy.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// How long a lease lasts: the attempt it covers, and a margin.
    pub(super) fn lease_ms(&self) -> i64 {
        (self.config.timeout + LEASE_MARGIN).as_millis() as i64
    }

    pub(super) fn settle(&self, ep: &Endpoint, seq: i64, attempt: Attempt) -> bool {
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

/// A delivery thread: takes endpoints from the `webhooks` thread until it stops.
pub(super) fn post_loop(s: &Shared, reader: &Reader, taken: &Mutex<Receiver<Endpoint>>) {
    loop {
        let next = taken.lock().unwrap_or_else(|e| e.into_inner()).recv();
        let Ok(ep) = next else { return };
        let claimed =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| deliver(s, reader, &ep)));
        let hold = match claimed {
            Ok(true) => None,
            // A claim that did not apply waits a little before the endpoint is tried again.
            Ok(false) => Some(Instant::now() + CLAIM_BACKOFF),
            // A panic (the hook logged it) must neither leave the endpoint taken for good
            // nor make a tight loop of claims: its lease is given back, and this process
            // leaves it alone for a while.
            Err(_) => {
                log::error!(
                    "webhook {}: a delivery thread panicked; its lease is given back and it is tried again in {} s",
                    ep.id,
                    PANIC_BACKOFF.as_secs()
                );
                s.writes.try_send(Change::Release {
                    endpoint: ep.id.clone(),
                    owner: s.owner.clone(),
                });
                Some(Instant::now() + PANIC_BACKOFF)
            }
        };
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
/// apply (true, with nothing done, once the server is stopping). The lease is given back
/// at the end of the turn, whatever ended it.
fn deliver(s: &Shared, reader: &Reader, ep: &Endpoint) -> bool {
    if s.stopping.load(Ordering::Relaxed) {
        // Handed out just before the server began to stop: no attempt, no claim.
        return true;
    }
    let leased_at = Instant::now();
    if !claim(s, ep, ep.delivered, ep.failures, s.lease_ms(), false) {
        return false;
    }
    if !turn(s, reader, ep, leased_at) {
        s.writes.try_send(Change::Release {
            endpoint: ep.id.clone(),
            owner: s.owner.clone(),
        });
    }
    true
}

/// Takes the endpoint's lease for `lease_ms` (the claim applies to the lease's owner
/// too), or, `renew`, lengthens the one this turn holds (never one a restore gave back),
/// while it is at `delivered` with `failures` and its log not shorter than `ep` found it
/// (a restore's: `turn` judges a gap by `ep.last_seq`); false when that did not apply.
fn claim(
    s: &Shared,
    ep: &Endpoint,
    delivered: i64,
    failures: i64,
    lease_ms: i64,
    renew: bool,
) -> bool {
    let claim = Change::Claim {
        endpoint: ep.id.clone(),
        owner: s.owner.clone(),
        delivered,
        failures,
        last_seq: ep.last_seq,
        lease_ms,
        renew,
    };
    match s.writes.write(claim) {
        Ok(Outcome::Updated(applied)) => applied,
        Ok(_) => false,
        Err(e) => {
            log::warn!("webhook {}: cannot claim it: {e}", ep.id);
            false
        }
    }
}

/// Posts the endpoint's next events, one by one, until one fails, none is left, the turn
/// is over, or the lease (taken at `leased_at`, renewed since) would run out during the
/// next attempt. True when the last record gave the lease back.
fn turn(s: &Shared, reader: &Reader, ep: &Endpoint, leased_at: Instant) -> bool {
    let Some(key) = sign::key(&ep.secret) else {
        let error = "the stored secret is not whsec_ and base64".to_owned();
        return fail(s, ep, ep.delivered + 1, ep.failures + 1, error);
    };
    let lease = Duration::from_millis(s.lease_ms() as u64);
    let mut lease_ends = leased_at + lease;
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
            // The failures recorded so far at this event.
            let failed = if delivered == ep.delivered {
                ep.failures
            } else {
                0
            };
            // Test control: a fault that makes the attempt last longer (a delay, a
            // duplicate) first has the lease renewed to cover that too; then its delay is
            // waited out before the attempt.
            let fault = s.control.as_deref().and_then(|c| faults::take(c, ep));
            if let Some(f) = &fault {
                let extra = faults::lease_extra(f, s.config.timeout);
                if !extra.is_zero() {
                    let renewing = Instant::now();
                    let extra_ms = i64::try_from(extra.as_millis()).unwrap_or(i64::MAX / 4);
                    if !claim(s, ep, delivered, failed, s.lease_ms() + extra_ms, true) {
                        return false;
                    }
                    lease_ends = renewing + lease + extra;
                }
                let control = s.control.as_deref();
                if !control.is_some_and(|c| faults::wait(&s.stopping, c, f)) {
                    return false;
                }
            }
            // No attempt that could outlive the lease (another process could then make
            // the same attempt at once), and none once the server is stopping.
            let lease_left = lease_ends.saturating_duration_since(Instant::now());
            if s.stopping.load(Ordering::Relaxed)
                || event.seq != delivered + 1
                || lease_left < s.config.timeout + LEASE_SLACK
            {
                return false;
            }
            let timestamp = s.clock.unix_now();
            let signature = sign::signature(&key, &event.id, timestamp, &event.body);
            let message = Message {
                id: &event.id,
                timestamp,
                signature: &signature,
                body: &event.body,
            };
            let failures = 1 + failed;
            let answer = match &fault {
                None => s.client.post(&ep.url, &message),
                Some(f) => faults::post(&s.client, ep, &key, &message, f),
            };
            if s.cut.load(Ordering::SeqCst) {
                return true;
            }
            // A delivery that panics once its attempt was made (tests/it/webhooks.rs).
            #[cfg(feature = "fault-injection")]
            if ep.url.ends_with("/__panic") {
                panic!("fault injection: a delivery panicked");
            }
            match answer {
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
                    lease_ends = renewing + lease;
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
                        .and_then(|v| schedule::retry_after(v, s.clock.unix_now()));
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
