//! What the retention may remove, by the wall clock and by this process's monotonic
//! clock (docs/design.md, "Time"): a step of the wall clock never makes the sweep
//! remove an event this process committed less than the retention ago.
//!
//! Every commit takes its time from its store's `Commits::commit_time`, which notes it in
//! a bucket of the monotonic clock (one `Commits` per store: servers in one process keep
//! their own): each bucket keeps the earliest wall time read
//! in it, until the retention has passed (by the monotonic clock) since its last reading.
//! The sweep's cutoff is never later than a kept bucket's earliest time, so an event is
//! removable only once its own commit is older than the retention on the monotonic
//! clock too (or was made by an earlier process).

use crate::ops::clock::{self, Clock};
use crate::store::seam::{Change, Job, Outcome};
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The default of `--webhook-hold`.
pub const DEFAULT_HOLD: Duration = Duration::from_secs(7 * 86_400);
/// The retention sweep runs this often (and at once again while a sweep removes
/// `SWEEP_ROWS` within `SWEEP_QUICK`).
pub const SWEEP_EVERY: std::time::Duration = std::time::Duration::from_secs(2);
/// A sweep slower than this waits `SWEEP_EVERY` before the next, even when more is due:
/// the writer is never kept busy by sweeps back to back.
pub const SWEEP_QUICK: std::time::Duration = std::time::Duration::from_millis(50);

/// The buckets cover the retention in about this many steps: the sweep may remove an
/// event up to 1/`BUCKETS` of the retention later than its time says.
const BUCKETS: i64 = 256;
/// Most buckets kept, whatever the retention (the oldest two are merged beyond: the
/// merged one keeps the earlier time, and lasts as long as the later).
const MAX_BUCKETS: usize = 2 * BUCKETS as usize;

/// How long events are kept, and how much longer an active webhook endpoint may hold
/// the ones it has still to get.
#[derive(Debug, Clone, Copy)]
pub struct Retention {
    pub keep: Duration,
    pub hold: Duration,
}

impl Retention {
    /// A sweep, now: past the retention by `cutoff`, stamped ahead by more than
    /// `clock::STEP`, held past the retention and the hold.
    pub fn sweep(&self, commits: &Commits) -> Change {
        let before_ms = commits.cutoff(self.keep);
        Change::Sweep {
            before_ms,
            future_ms: now(&commits.clock).saturating_add(clock::STEP_MS),
            hold_before_ms: before_ms.saturating_sub(millis(self.hold)),
        }
    }
}

impl From<Duration> for Retention {
    fn from(keep: Duration) -> Retention {
        Retention {
            keep,
            hold: DEFAULT_HOLD,
        }
    }
}

/// A stretch of the monotonic clock (milliseconds, `Clock::monotonic_millis`: the test
/// clock's forward moves count, so that advancing it lets the retention remove) and the
/// earliest wall time read in it.
#[derive(Debug, Clone, Copy)]
struct Bucket {
    first: i64,
    last: i64,
    earliest: i64,
}

/// The buckets of one store's commits in this process.
#[derive(Debug)]
pub struct Commits {
    retention: Retention,
    buckets: Mutex<VecDeque<Bucket>>,
    /// How long one bucket lasts (monotonic milliseconds): the retention / `BUCKETS`.
    width: i64,
    /// The server's clock.
    clock: Arc<Clock>,
}

fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX / 4)
}

impl Commits {
    /// The buckets of a store whose events are kept for `retention`, on `clock`.
    pub fn new(retention: Retention, clock: Arc<Clock>) -> Commits {
        Commits {
            retention,
            buckets: Mutex::new(VecDeque::new()),
            width: (millis(retention.keep) / BUCKETS).max(1),
            clock,
        }
    }

    /// A sweep by the retention, now (`Retention::sweep`). The writer reads it as it
    /// commits the sweep (`writer::run`), on the thread that runs a reset's restore: a
    /// sweep is wholly before a reset or wholly after it, never read on a test clock the
    /// reset undid and made on the store it restored.
    pub fn sweep(&self) -> Change {
        self.retention.sweep(self)
    }

    /// The wall time of a commit (milliseconds since the epoch), noted for the sweep.
    pub fn commit_time(&self) -> i64 {
        let at = self.clock.unix_now_millis();
        self.note(self.clock.monotonic_millis(), at);
        at
    }

    /// The sweep's cutoff (milliseconds since the epoch): events stamped before it are
    /// past the retention. The earlier of the wall clock and the steady clock
    /// (`Clock::steady_millis`), less the retention, and never after the earliest time
    /// this store read for a commit less than the retention ago by the monotonic clock.
    pub fn cutoff(&self, retention: Duration) -> i64 {
        let mono = self.clock.monotonic_millis();
        self.cutoff_at(mono, now(&self.clock), millis(retention))
    }

    /// A reset brought the ticks back (`Clock::reset`): the buckets noted ahead of them
    /// (by a test clock's moves, their commits undone by the reset's restore) go, so that
    /// none lasts the way back again.
    pub fn forget_ahead(&self) {
        let mono = self.clock.monotonic_millis();
        let mut buckets = self.buckets.lock().unwrap_or_else(|e| e.into_inner());
        buckets.retain(|b| b.last <= mono);
    }

    fn note(&self, mono: i64, at: i64) {
        let width = self.width;
        let mut buckets = self.buckets.lock().unwrap_or_else(|e| e.into_inner());
        match buckets.back_mut() {
            Some(b) if mono - b.first < width => {
                b.last = b.last.max(mono);
                b.earliest = b.earliest.min(at);
            }
            _ => buckets.push_back(Bucket {
                first: mono,
                last: mono,
                earliest: at,
            }),
        }
        if buckets.len() > MAX_BUCKETS
            && let (Some(a), Some(b)) = (buckets.pop_front(), buckets.pop_front())
        {
            buckets.push_front(Bucket {
                first: a.first,
                last: a.last.max(b.last),
                earliest: a.earliest.min(b.earliest),
            });
        }
    }

    fn cutoff_at(&self, mono: i64, now: i64, keep: i64) -> i64 {
        let mut buckets = self.buckets.lock().unwrap_or_else(|e| e.into_inner());
        while buckets.front().is_some_and(|b| mono - b.last > keep) {
            buckets.pop_front();
        }
        buckets
            .iter()
            .map(|b| b.earliest)
            .fold(now.saturating_sub(keep), i64::min)
    }
}

/// "Now" as the sweep judges an event's time to be in the future: the earlier of the
/// wall and steady clocks.
pub fn now(clock: &Clock) -> i64 {
    clock.unix_now_millis().min(clock.steady_millis())
}

/// The retention: every `SWEEP_EVERY`, a sweep of the events older than the retention
/// (by `retention::cutoff`) goes through the writer (bounded: `SWEEP_ROWS`), until `stop`
/// is dropped.
pub(super) fn sweep(
    jobs: &std::sync::mpsc::SyncSender<Job>,
    stop: &std::sync::mpsc::Receiver<()>,
    commits: &Commits,
) {
    use std::sync::mpsc::RecvTimeoutError;
    let mut pause = SWEEP_EVERY;
    while let Err(RecvTimeoutError::Timeout) = stop.recv_timeout(pause) {
        let (reply, answer) = std::sync::mpsc::sync_channel(1);
        let job = Job {
            // Read again by the writer as it commits it (`Commits::sweep`).
            change: commits.sweep(),
            done: Box::new(move |outcome| {
                let _ = reply.send(outcome);
            }),
        };
        let started = std::time::Instant::now();
        if jobs.send(job).is_err() {
            return;
        }
        pause = match answer.recv() {
            Ok(Ok(Outcome::Swept { more: true })) if started.elapsed() < SWEEP_QUICK => {
                std::time::Duration::ZERO
            }
            Ok(Err(e)) => {
                log::warn!("the event retention sweep failed: {e}");
                SWEEP_EVERY
            }
            _ => SWEEP_EVERY,
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_commit_read_on_a_clock_behind_is_kept_for_the_retention_by_the_monotonic_clock() {
        let commits = Commits::new(Duration::from_secs(7 * 86_400).into(), Arc::default());
        let base = 1_000;
        let day = 86_400_000;
        let real = 1_800_000_000_000;
        // Committed at `base` on a clock 30 days behind; the clock is corrected.
        commits.note(base, real - 30 * day);
        // A second later, with a 7-day retention: the cutoff is before that commit's time.
        let cut = commits.cutoff_at(base + 1000, real, 7 * day);
        assert!(cut <= real - 30 * day, "{cut}");
        // Once 7 days have passed on the monotonic clock, the wall clock rules again.
        let later = base + 7 * day + 2000;
        assert_eq!(commits.cutoff_at(later, real + 7 * day, 7 * day), real);
    }
}
