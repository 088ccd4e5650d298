//! The writer thread: takes the queued changes, commits them in groups (at most
//! `MAX_GROUP_COMMIT` a transaction), and calls each change's `Done` with its outcome once
//! the transaction that holds it is durable (or has failed); what `/healthz` learns of it.

use crate::ops::metrics::Metrics;
use crate::ops::random::Random;
use crate::store::admin::{Admin, AdminJob};
use crate::store::feed::Board;
use crate::store::retention::Commits;
use crate::store::seam::{
    Change, Job, MAX_GROUP_COMMIT, Outcome, Reads, StoreError, StoreResult, Writer,
};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Receiver;
use std::time::Instant;

/// Writes that may wait for the writer thread before callers block.
pub const WRITE_QUEUE: usize = 1024;

/// What `/healthz` learns of the writer: whether the last commit went well, and since
/// when the one under way has waited for the database.
pub struct Health {
    /// False after a failed write, until a commit that changed something (or a probe)
    /// succeeds: a transaction that writes no page commits even on a full disk.
    pub ok: AtomicBool,
    /// When the commit under way was sent, by the monotonic clock
    /// (milliseconds since `started`, which neither a step of the wall clock nor the test
    /// clock moves); 0 when none is.
    pub committing_since: std::sync::atomic::AtomicI64,
    started: Instant,
    /// The probes of `/healthz` while the store is not known to be healthy.
    probes: crate::store::health::Probes,
}

impl Default for Health {
    fn default() -> Health {
        Health {
            ok: AtomicBool::new(true),
            committing_since: std::sync::atomic::AtomicI64::new(0),
            started: Instant::now(),
            probes: Default::default(),
        }
    }
}

impl Health {
    /// Milliseconds since the store opened by the monotonic clock (never 0).
    pub(super) fn uptime_millis(&self) -> i64 {
        self.started.elapsed().as_millis() as i64 + 1
    }

    /// Fails when the commit under way has waited `COMMIT_STALL_MS` for the database.
    pub fn stalled(&self) -> StoreResult<()> {
        let since = self.committing_since.load(Ordering::Relaxed);
        let now = self.uptime_millis();
        if since != 0 && now - since > COMMIT_STALL_MS {
            return Err(StoreError(format!(
                "a commit has waited {} s for the database",
                (now - since) / 1000
            )));
        }
        Ok(())
    }
}

impl Health {
    /// Ok when the database answers a read now, and the last write committed (or, after
    /// a failed one, a `probe` write, started by `probe`, commits within `PROBE_WAIT`:
    /// at most one at a time, a failed one's answer reused for `PROBE_REUSE`). On SQLite the file must also still be the one
    /// opened. A failure comes with whether its cause is to be logged now: the same cause
    /// at most once per `CAUSE_LOG_EVERY`.
    pub fn check(
        &self,
        reads: &dyn Reads,
        probe: impl FnOnce(crate::store::health::ProbeDone),
    ) -> Result<(), (StoreError, bool)> {
        let checked = (|| {
            reads.check_file()?;
            self.stalled()?;
            if !self.ok.load(Ordering::Relaxed) {
                self.probes.probe(probe)?;
            }
            reads.ping()
        })();
        checked.map_err(|e| {
            let log = self.probes.to_log(&e.0);
            (e, log)
        })
    }
}

/// A commit that has waited this long for the database makes `/healthz` fail (503).
pub const COMMIT_STALL_MS: i64 = 20_000;

/// The writer thread: `checkpoint` says, once the queue has ended, whether the writer
/// closes with the final checkpoint.
pub fn run(
    mut writer: Box<dyn Writer>,
    queue: Receiver<Job>,
    (healthy, checkpoint): (Arc<Health>, Arc<AtomicBool>),
    board: Arc<Board>,
    metrics: &Metrics,
    commits: &Commits,
    random: &Random,
) {
    let mut batch = Vec::with_capacity(MAX_GROUP_COMMIT);
    // A whole-store operation found while gathering a group waits for that group's commit.
    let mut held: Option<Job> = None;
    loop {
        let Some(first) = held.take().or_else(|| queue.recv().ok()) else {
            break;
        };
        if let Change::Admin(job) = first.change {
            admin(&mut *writer, *job, &board, random, commits);
            continue;
        }
        batch.push(first);
        while batch.len() < MAX_GROUP_COMMIT {
            match queue.try_recv() {
                Ok(job) if matches!(job.change, Change::Admin(_)) => {
                    held = Some(job);
                    break;
                }
                Ok(job) => batch.push(job),
                Err(_) => break,
            }
        }
        // A sweep's cutoffs are read now, on this thread, which also runs a reset's
        // restore (the reset made the clock real first): wholly before it or after it.
        for job in &mut batch {
            if matches!(job.change, Change::Sweep { .. }) {
                job.change = commits.sweep();
            }
        }
        let started = Instant::now();
        healthy
            .committing_since
            .store(healthy.uptime_millis(), Ordering::Relaxed);
        let committed = writer.commit(&mut batch, commits.commit_time(), random);
        healthy.committing_since.store(0, Ordering::Relaxed);
        match committed {
            Ok(_) if batch.is_empty() => {
                // Taken, to be answered once the outcome is known.
                healthy.ok.store(false, Ordering::Relaxed);
            }
            Ok(outcomes) => {
                metrics
                    .commit_seconds
                    .observe(started.elapsed().as_micros() as u64);
                metrics.commit_groups.observe(batch.len() as u64);
                if batch
                    .iter()
                    .zip(&outcomes)
                    .any(|(j, o)| wrote(&j.change, o))
                {
                    healthy.ok.store(true, Ordering::Relaxed);
                }
                announce(&board, &batch, &outcomes, metrics);
                for (job, outcome) in batch.drain(..).zip(outcomes) {
                    (job.done)(Ok(outcome));
                }
            }
            Err(e) => {
                healthy.ok.store(false, Ordering::Relaxed);
                metrics.commit_failures.fetch_add(1, Ordering::Relaxed);
                let probes = batch
                    .iter()
                    .filter(|j| matches!(j.change, Change::Probe))
                    .count();
                if e.is_outcome_unknown() {
                    log::error!(
                        "database write of unknown outcome, {} change(s): {e}",
                        batch.len()
                    );
                } else if probes < batch.len() {
                    log::error!(
                        "database write failed, {} change(s) refused: {e}",
                        batch.len() - probes
                    );
                }
                // A failed probe is reported by the health check that asked for it.
                for job in batch.drain(..) {
                    (job.done)(Err(StoreError(e.0.clone())));
                }
            }
        }
    }
    writer.close(checkpoint.load(Ordering::SeqCst));
}

/// Whether a committed change wrote something, so that its commit shows that writing
/// works: a probe, an event appended, a webhook row updated. A sweep, a claim that
/// matched nothing, a conflict write no page, and commit even on a full disk.
fn wrote(change: &Change, outcome: &Outcome) -> bool {
    match change {
        Change::Probe => true,
        Change::Sweep { .. } => false,
        _ => outcome.appended(change).is_some() || matches!(outcome, Outcome::Updated(true)),
    }
}

/// Runs a whole-store operation alone. After a restore, the streams learn that the
/// store was replaced (they end), and webhook deliveries look again; after a reset's, the
/// retention's guard forgets what the test clock's moves noted ahead of the ticks.
fn admin(
    writer: &mut dyn Writer,
    job: AdminJob,
    board: &Board,
    random: &Random,
    commits: &Commits,
) {
    let AdminJob { op, reply } = job;
    let restore = matches!(op, Admin::Restore { .. });
    let restart = matches!(op, Admin::Restore { restart: true, .. });
    if restore {
        board.replacing();
    }
    let result = writer.admin(op, random);
    if restart && result.is_ok() {
        random.restart();
        commits.forget_ahead();
    }
    if restore {
        // Even a failed restore ends what was read under the odd generation.
        board.replaced();
        board.deliveries.ring();
    }
    let _ = reply.send(result.map_err(|e| e.0));
}

/// Counts the events a committed group appended (one per applied create or delete) and
/// names their principals on the board, when anyone listens.
pub fn announce(board: &Board, batch: &[Job], outcomes: &[Outcome], metrics: &Metrics) {
    let appended = || {
        batch
            .iter()
            .zip(outcomes)
            .filter_map(|(job, outcome)| outcome.appended(&job.change))
    };
    let count = appended().count() as u64;
    metrics.events_appended.fetch_add(count, Ordering::Relaxed);
    if count > 0 && board.deliveries.wanted() {
        board.deliveries.ring();
    }
    if board.listening() {
        board.announce(appended());
    }
}
