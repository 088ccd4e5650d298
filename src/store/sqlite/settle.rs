//! A COMMIT that failed: whether its group took effect, settled where SQLite can tell.
//!
//! In WAL mode a COMMIT appends the group's pages to the `-wal` file, syncs it, and only
//! then makes the group visible to this process (the wal-index). Its error can come:
//! - before it committed (`SQLITE_BUSY`, `SQLITE_FULL` while the pages are written): the
//!   group did not take effect;
//! - after it committed: SQLite's automatic checkpoint runs inside the COMMIT's step and
//!   its error is the COMMIT's; the group is visible, and took effect;
//! - in the sync (an I/O error): the pages may have reached the disk all the same, and a
//!   restart (which rebuilds the wal-index from the file) would find the group although
//!   this process does not see it. The next commit that is durable writes its own pages
//!   over those frames (at the same place, or after a restart of the log with new salts),
//!   so from then on the group can never come back: a probe write that commits settles
//!   it as not taken effect.
//!   (Seen with an `LD_PRELOAD` shim that fails one `fdatasync` of the `-wal`: without
//!   the probe, the create answered 500 was there after `kill -9` and a restart; with
//!   it, it is not.)
//!
//! So: visible (the group's marker row, its last event, is there) → it took effect;
//! not visible and not an I/O error → it did not; an I/O error and a probe that commits
//! → it did not; otherwise the outcome is unknown: 500 "read before retrying", as on
//! PostgreSQL (`OUTCOME_UNKNOWN`). A group that appended no event has no marker, and is
//! taken as not visible: its plant changes found nothing to do (their answers are the
//! same either way), and the rest (a probe, a sweep, a webhook's lease or cursor) is
//! made again, each such update applying only to the row as its maker read it.

use crate::store::seam::{OUTCOME_UNKNOWN, Outcome, StoreError, StoreResult};
use rusqlite::{Connection, ErrorCode};

/// A health probe: a row written and removed where a change writes (its plant and its
/// event), each at least as large as a create's with a one-byte name, so that it needs
/// what a change needs of the disk.
pub(super) const PROBE: &str =
    "INSERT INTO plants VALUES ('', 0, 'probe', NULL) ON CONFLICT DO NOTHING;
     INSERT INTO events VALUES ('', 0, zeroblob(16), 2, 9223372036854775807,
         9223372036854775807, 'probe', NULL)
         ON CONFLICT DO NOTHING;
     DELETE FROM plants WHERE principal = '';
     DELETE FROM events WHERE principal = '';";

/// The last event a group appended: its principal, seq and id. Once the group commits,
/// that row is there; before, it is not.
pub(super) type Marker = Option<(String, i64, String)>;

/// Ends the transaction `apply` began: its COMMIT (or, with the `fault-injection`
/// feature, the fault armed for a transaction that `changed` something).
pub(super) fn end(conn: &Connection, changed: bool) -> rusqlite::Result<()> {
    #[cfg(feature = "fault-injection")]
    if changed && let Some(fault) = crate::store::fault::commit_fault() {
        return inject(conn, fault);
    }
    let _ = changed;
    conn.execute_batch("COMMIT")
}

/// The answer to a group whose COMMIT failed with `e`: its outcomes when it took effect,
/// the error when it did not, `OUTCOME_UNKNOWN` when that cannot be told.
pub(super) fn failed_commit(
    conn: &Connection,
    e: rusqlite::Error,
    jobs: usize,
    outcomes: Vec<Outcome>,
    marker: Marker,
) -> StoreResult<Vec<Outcome>> {
    // Still open, the transaction did not commit; it may have written frames all the same
    // (an I/O error), which the probe below settles.
    let open = !conn.is_autocommit();
    if open {
        let _ = conn.execute_batch("ROLLBACK");
    }
    let seen = match &marker {
        Some((principal, seq, id)) if !open => visible(conn, principal, *seq, id),
        _ => Ok(false),
    };
    match seen {
        Ok(true) => {
            log::warn!(
                "the COMMIT of a group of {jobs} change(s) reported an error ({e}), but the \
                 group had committed: answered by its outcomes"
            );
            return Ok(outcomes);
        }
        Ok(false) if !is_io_error(&e) => return Err(e.into()),
        Ok(false) => {}
        Err(check) => {
            log::error!(
                "the COMMIT of a group of {jobs} change(s) failed ({e}) and the group cannot \
                 be looked up ({check}): whether it took effect cannot be told"
            );
            return Err(StoreError(OUTCOME_UNKNOWN.into()));
        }
    }
    match probe(conn) {
        Ok(()) => {
            log::warn!(
                "the COMMIT of a group of {jobs} change(s) failed in its sync ({e}); a later \
                 commit is durable, so the group can never take effect"
            );
            Err(e.into())
        }
        Err(p) => {
            log::error!(
                "the COMMIT of a group of {jobs} change(s) failed in its sync ({e}) and no \
                 later commit is durable ({p}): whether it took effect cannot be told"
            );
            Err(StoreError(OUTCOME_UNKNOWN.into()))
        }
    }
}

/// An error of the disk itself (`SQLITE_IOERR` and its extended codes), as a failed sync
/// reports: the group's pages may be on the disk.
fn is_io_error(e: &rusqlite::Error) -> bool {
    match e {
        rusqlite::Error::SqliteFailure(f, _) => f.code == ErrorCode::SystemIoFailure,
        _ => false,
    }
}

/// Whether the group's last event is in the database as this connection sees it.
fn visible(conn: &Connection, principal: &str, seq: i64, id: &str) -> rusqlite::Result<bool> {
    conn.query_row(
        "SELECT count(*) FROM events WHERE principal = ?1 AND seq = ?2 AND id = unhex(substr(?3, 5))",
        rusqlite::params![principal, seq, id],
        |r| r.get::<_, i64>(0),
    )
    .map(|n| n == 1)
}

/// A probe write, committed: Ok once it is durable.
fn probe(conn: &Connection) -> rusqlite::Result<()> {
    conn.execute_batch("BEGIN IMMEDIATE")?;
    let done = conn.execute_batch(PROBE).and_then(|()| end(conn, true));
    if done.is_err() && !conn.is_autocommit() {
        let _ = conn.execute_batch("ROLLBACK");
    }
    done
}

/// With the `fault-injection` feature: what a faulty COMMIT does instead of succeeding.
#[cfg(feature = "fault-injection")]
pub(super) fn inject(
    conn: &Connection,
    fault: crate::store::fault::CommitFault,
) -> rusqlite::Result<()> {
    use crate::store::fault::CommitFault;
    use rusqlite::ffi;
    let (end, code, what) = match fault {
        CommitFault::SyncFailsAfter => ("COMMIT", ffi::SQLITE_IOERR_FSYNC, "disk I/O error"),
        CommitFault::SyncFailsBefore => ("ROLLBACK", ffi::SQLITE_IOERR_FSYNC, "disk I/O error"),
        CommitFault::DiskFull => ("ROLLBACK", ffi::SQLITE_FULL, "database or disk is full"),
    };
    conn.execute_batch(end)?;
    Err(rusqlite::Error::SqliteFailure(
        ffi::Error::new(code),
        Some(format!("{what} (fault injection)")),
    ))
}
