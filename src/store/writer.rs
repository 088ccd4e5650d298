//! The writer thread: takes the queued changes, commits them in groups (at most
//! `MAX_GROUP_COMMIT` a transaction), and calls each change's `Done` with its outcome once
//! the transaction that holds it is durable (or has failed); what `/healthz` learns of it.

use crate::ops::metrics::Metrics;
use crate::store::admin::{Admin, AdminJob};
use crate::store::feed::Board;
use crate::store::seam::{Change, Job, MAX_GROUP_COMMIT, Outcome, StoreError, StoreResult, Writer};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Receiver;
use std::time::Instant;

/// Writes that may wait for the writer thread before callers block.
pub const WRITE_QUEUE: usize = 1024;

/// What `/healthz` learns of the writer: whether the last commit went well, and since
/// when the one under way has waited for the database.
pub struct Health {
    pub ok: AtomicBool,
    /// Unix milliseconds when the commit under way was sent; 0 when none is.
    pub committing_since: std::sync::atomic::AtomicI64,
}

impl Default for Health {
    fn default() -> Health {
        Health {
            ok: AtomicBool::new(true),
            committing_since: std::sync::atomic::AtomicI64::new(0),
        }
    }
}

impl Health {
    /// Fails when the commit under way has waited `COMMIT_STALL_MS` for the database.
    pub fn stalled(&self) -> StoreResult<()> {
        let since = self.committing_since.load(Ordering::Relaxed);
        let now = crate::ops::clock::unix_now_millis();
        if since != 0 && now - since > COMMIT_STALL_MS {
            return Err(StoreError(format!(
                "a commit has waited {} s for the database",
                (now - since) / 1000
            )));
        }
        Ok(())
    }
}

/// A commit that has waited this long for the database makes `/healthz` fail (503).
pub const COMMIT_STALL_MS: i64 = 20_000;

pub fn run(
    mut writer: Box<dyn Writer>,
    queue: Receiver<Job>,
    healthy: Arc<Health>,
    board: Arc<Board>,
    metrics: &Metrics,
) {
    let mut batch = Vec::with_capacity(MAX_GROUP_COMMIT);
    // A whole-store operation found while gathering a group waits for that group's commit.
    let mut held: Option<Job> = None;
    loop {
        let Some(first) = held.take().or_else(|| queue.recv().ok()) else {
            break;
        };
        if let Change::Admin(job) = first.change {
            admin(&mut *writer, *job, &board);
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
        let started = Instant::now();
        healthy
            .committing_since
            .store(crate::ops::clock::unix_now_millis(), Ordering::Relaxed);
        let committed = writer.commit(&mut batch);
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
                healthy.ok.store(true, Ordering::Relaxed);
                announce(&board, &batch, &outcomes, metrics);
                for (job, outcome) in batch.drain(..).zip(outcomes) {
                    (job.done)(Ok(outcome));
                }
            }
            Err(e) => {
                healthy.ok.store(false, Ordering::Relaxed);
                metrics.commit_failures.fetch_add(1, Ordering::Relaxed);
                log::error!(
                    "database write failed, {} change(s) refused: {e}",
                    batch.len()
                );
                for job in batch.drain(..) {
                    (job.done)(Err(StoreError(e.0.clone())));
                }
            }
        }
    }
    writer.close();
}

/// Runs a whole-store operation alone. After a restore, the streams learn that the
/// store was replaced (they end), and webhook deliveries look again.
fn admin(writer: &mut dyn Writer, job: AdminJob, board: &Board) {
    let AdminJob { op, reply } = job;
    let restore = matches!(op, Admin::Restore(_));
    let result = writer.admin(op);
    if restore && result.is_ok() {
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
