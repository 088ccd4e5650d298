//! The SQLite writer: one connection, a group of changes per transaction, each committed
//! change with its event (the principal's next seq, taken once per group).

use crate::ops::random::Random;
use crate::store::admin::{Admin, Admitted, Seed};
use crate::store::ids::event_ids;
use crate::store::seam::{
    Attempt, CREATED, Change, DELETED, Job, Outcome, Owner, StoreResult, Writer, writer_of,
};
use crate::store::sqlite::control;
use crate::store::sqlite::file::{FileIdentity, Lost};
use crate::store::sqlite::reads::token_owner;
use crate::store::sqlite::settle::{self, Marker, PROBE, end};
use rusqlite::config::DbConfig;
use rusqlite::{Connection, OptionalExtension, params};
use std::borrow::Cow;
use std::collections::HashMap;

/// A principal's log as a group finds it: its last event's seq and time (plants.sql,
/// version 7).
const LOG_TAIL: &str = "SELECT last_seq, last_at FROM log_tails WHERE principal = ?1";
/// A principal's first event makes its log's row; a later one writes nothing there (its
/// own row is the log's tail): one page fewer written per commit.
const SAVE_LOG: &str = "INSERT INTO event_logs (principal, last_seq, last_at) VALUES (?1, ?2, ?3) \
     ON CONFLICT (principal) DO NOTHING";
/// An event: its id's 16 bytes and its kind's number are stored (plants.sql, version 7).
const APPEND_EVENT: &str = "INSERT INTO events (principal, seq, id, kind, at, plant, name, tag) \
     VALUES (?1, ?2, unhex(substr(?3, 5)), CASE ?4 WHEN 'plant.created' THEN 1 ELSE 2 END, \
     ?5, ?6, ?7, ?8)";
/// ?1 endpoint, ?2 owner, ?3 delivered, ?4 failures, ?5 now, ?6 lease, ?7 last seq.
const CLAIM: &str = "UPDATE webhooks SET lease_owner = ?2, lease_until = ?5 + ?6 \
     WHERE id = ?1 AND active = 1 AND delivered = ?3 AND failures = ?4 AND due <= ?5 \
     AND (lease_owner = ?2 OR lease_until < ?5) AND coalesce((SELECT last_seq FROM \
     log_tails WHERE principal = webhooks.principal), 0) >= ?7";
/// A claim that only renews the lease ?2 holds now (`Change::Claim`'s `renew`); as `CLAIM`.
const RENEW: &str = "UPDATE webhooks SET lease_until = ?5 + ?6 \
     WHERE id = ?1 AND active = 1 AND delivered = ?3 AND failures = ?4 \
     AND lease_owner = ?2 AND lease_until >= ?5";
/// ?1 endpoint, ?2 owner, ?3 seq, ?4 now, ?5 lease (0: given back).
const DELIVERED: &str = "UPDATE webhooks SET delivered = ?3, failures = 0, due = 0, \
     last_error = NULL, lease_until = CASE WHEN ?5 > 0 THEN ?4 + ?5 ELSE 0 END \
     WHERE id = ?1 AND lease_owner = ?2 AND delivered = ?3 - 1";
/// ?1 endpoint, ?2 owner, ?3 seq, ?4 now, ?5 failures, ?6 wait, ?7 error, ?8 active.
const FAILED: &str = "UPDATE webhooks SET failures = ?5, due = ?4 + ?6, last_error = ?7, \
     active = ?8, lease_until = 0 WHERE id = ?1 AND lease_owner = ?2 AND delivered = ?3 - 1";
const RELEASE: &str = "UPDATE webhooks SET lease_until = 0 WHERE id = ?1 AND lease_owner = ?2";

pub(super) struct SqliteWriter {
    pub(super) conn: Connection,
    /// Declared after `conn`, so dropped after it: it holds the file open (`held.rs`).
    pub(super) file: Option<FileIdentity>,
    /// The server's clock: webhook due times and leases (its steady reading), and whether
    /// event times never go back (`Clock::holds_times`).
    pub(super) clock: std::sync::Arc<crate::ops::clock::Clock>,
}

impl Writer for SqliteWriter {
    fn commit(
        &mut self,
        batch: &mut Vec<Job>,
        at: i64,
        random: &Random,
    ) -> StoreResult<Vec<Outcome>> {
        if let Some(f) = &self.file {
            f.verify()?;
        }
        let before = self.conn.total_changes();
        let (outcomes, marker) = match apply(&self.conn, batch, at, &self.clock, random) {
            Ok(applied) => applied,
            Err(e) => {
                let _ = self.conn.execute_batch("ROLLBACK");
                return Err(e);
            }
        };
        let changed = self.conn.total_changes() != before;
        match end(&self.conn, changed) {
            Ok(()) => Ok(outcomes),
            Err(e) => settle::failed_commit(&self.conn, e, batch.len(), outcomes, marker),
        }
    }

    /// Test control's whole-store operations, between two groups; those that write, on a
    /// file that is still this database's.
    fn admin(&mut self, op: Admin, _random: &Random) -> StoreResult<Admitted> {
        if let (Some(f), false) = (&self.file, matches!(op, Admin::Snapshot)) {
            f.verify()?;
        }
        match op {
            Admin::Snapshot => control::snapshot(&self.conn).map(Admitted::Image),
            Admin::Restore { image, .. } => {
                control::restore(&mut self.conn, &image).map(|()| Admitted::Done)
            }
            Admin::AddToken(token) => match control::insert_token(&self.conn, &token) {
                Ok(()) => Ok(Admitted::Done),
                Err(e)
                    if e.sqlite_error_code() == Some(rusqlite::ErrorCode::ConstraintViolation) =>
                {
                    Ok(Admitted::Taken)
                }
                Err(e) => Err(e.into()),
            },
        }
    }

    /// The final checkpoint (`wal_checkpoint(TRUNCATE)`: the WAL into the file, and the
    /// WAL emptied), when `checkpoint` and the file is still this database's; then the
    /// connection closed, with SQLite's own checkpoint on close turned off whenever that
    /// one did not run. A file renamed over or removed still gets its checkpoint (into
    /// this database's own file, which its descriptor still names: the file at the path
    /// is not touched, nor, SQLite's close not run, the files beside it). A file written
    /// over in place gets nothing: its content is another's; its WAL, which belongs to
    /// what was there before, is moved aside (when no other process has the file open),
    /// so that the next start does not apply it to the new content.
    fn close(self: Box<Self>, checkpoint: bool) {
        let SqliteWriter {
            conn, file, clock, ..
        } = *self;
        let lost = file.as_ref().map_or(Ok(()), FileIdentity::lost);
        // Times a test clock put ahead, brought back to the real clock's (only into a
        // file that is still this database's).
        let ahead = clock.ahead_millis();
        if ahead > 0
            && lost.is_ok()
            && let Err(e) =
                crate::store::sqlite::webhooks::bring_back(&conn, clock.steady_millis(), ahead)
        {
            log::warn!("cannot bring webhook due times back from the test clock: {e}");
        }
        let why = match (&lost, checkpoint) {
            (Err(Lost::Overwritten), _) => Some("the file was written over while in use"),
            (_, false) => Some("the stop's time is up (the WAL is applied at the next start)"),
            (Ok(()), true) | (Err(Lost::Replaced), true) => None,
        };
        let checkpointed = why.is_none()
            && match conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(())) {
                Ok(()) => true,
                Err(e) => {
                    log::warn!("final checkpoint failed: {e}");
                    false
                }
            };
        if (!checkpointed || lost.is_err())
            && let Err(e) = conn.set_db_config(DbConfig::SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, true)
        {
            log::warn!("cannot turn off SQLite's checkpoint on close: {e}");
        }
        drop(conn);
        match (why, checkpointed) {
            (None, true) => log::info!("database checkpointed and closed"),
            (None, false) => log::info!("database closed"),
            (Some(why), _) => log::warn!("database closed without the final checkpoint: {why}"),
        }
        if let (Some(f), Err(Lost::Overwritten)) = (&file, lost) {
            f.set_wal_aside();
        }
    }
}

/// Begins a transaction and applies the batch in it, leaving it open for `end`: the
/// outcomes, and the marker of the group.
fn apply(
    conn: &Connection,
    batch: &[Job],
    at: i64,
    clock: &crate::ops::clock::Clock,
    random: &Random,
) -> StoreResult<(Vec<Outcome>, Marker)> {
    let ids = event_ids(random, batch)?;
    conn.execute_batch("BEGIN IMMEDIATE")?;
    let mut logs = Logs {
        now: at,
        holds: clock.holds_times(),
        tails: HashMap::new(),
    };
    // Webhook leases and due times: by the steady clock, which no step of the wall clock
    // moves, and the test clock moves only forward (docs/design.md, "Time").
    let steady = clock.steady_millis();
    let mut append = conn.prepare_cached(APPEND_EVENT)?;
    let mut outcomes = Vec::with_capacity(batch.len());
    let mut last_appended = None;
    for (i, (job, event_id)) in batch.iter().zip(&ids).enumerate() {
        outcomes.push(match &job.change {
            Change::Create { .. } | Change::Delete { .. } => {
                let outcome = plant_change(conn, &mut logs, &mut append, &job.change, event_id)?;
                if outcome.appended(&job.change).is_some() {
                    last_appended = Some(i);
                }
                outcome
            }
            Change::Probe => {
                conn.execute_batch(PROBE)?;
                Outcome::Deleted
            }
            Change::Sweep {
                before_ms,
                future_ms,
                hold_before_ms,
            } => crate::store::sqlite::sweep::sweep(conn, *before_ms, *future_ms, *hold_before_ms)?,
            Change::Claim {
                endpoint,
                owner,
                delivered,
                failures,
                last_seq,
                lease_ms,
                renew,
            } => {
                let at = params![endpoint, owner, delivered, failures, steady, lease_ms];
                let applied = match renew {
                    true => conn.prepare_cached(RENEW)?.execute(at)?,
                    false => conn.prepare_cached(CLAIM)?.execute(params![
                        endpoint, owner, delivered, failures, steady, lease_ms, last_seq
                    ])?,
                };
                Outcome::Updated(applied == 1)
            }
            Change::Settle {
                endpoint,
                owner,
                seq,
                attempt,
            } => Outcome::Updated(
                match attempt {
                    Attempt::Delivered { lease_ms } => conn
                        .prepare_cached(DELIVERED)?
                        .execute(params![endpoint, owner, seq, steady, lease_ms])?,
                    Attempt::Failed {
                        failures,
                        wait_ms,
                        error,
                        active,
                    } => conn.prepare_cached(FAILED)?.execute(params![
                        endpoint,
                        owner,
                        seq,
                        steady,
                        failures,
                        wait_ms,
                        error,
                        i64::from(*active)
                    ])?,
                } == 1,
            ),
            Change::Admin(_) => {
                return Err(crate::store::seam::StoreError(
                    "a whole-store operation in a group".into(),
                ));
            }
            Change::Release { endpoint, owner } => Outcome::Updated(
                conn.prepare_cached(RELEASE)?
                    .execute(params![endpoint, owner])?
                    == 1,
            ),
        });
    }
    logs.save(conn)?;
    let marker = last_appended.and_then(|i| {
        let principal = outcomes[i].appended(&batch[i].change)?;
        let seq = logs.tails.get(principal)?.0;
        Some((principal.to_owned(), seq, ids[i].clone()))
    });
    Ok((outcomes, marker))
}

/// Inside a seed's transaction: its tokens, then its plants as creates (each with its
/// event). The first that cannot be stored fails the seed, naming its place.
pub(super) fn load_seed(
    conn: &Connection,
    seed: &Seed,
    clock: &crate::ops::clock::Clock,
    random: &Random,
) -> StoreResult<()> {
    for token in &seed.tokens {
        if let Err(e) = control::insert_token(conn, token) {
            let place = &token.place;
            return Err(crate::store::seam::StoreError(
                match e.sqlite_error_code() {
                    Some(rusqlite::ErrorCode::ConstraintViolation) => {
                        format!("{place}.token: this token is already stored")
                    }
                    _ => format!("{place}: {e}"),
                },
            ));
        }
    }
    let jobs: Vec<Job> = seed
        .plants
        .iter()
        .map(|p| Job {
            change: Change::Create {
                owner: Owner::Principal(p.principal.clone()),
                id: p.id,
                name: p.name.clone(),
                tag: p.tag.clone(),
            },
            done: Box::new(|_| {}),
        })
        .collect();
    let ids = event_ids(random, &jobs)?;
    let mut logs = Logs {
        now: clock.unix_now_millis(),
        holds: clock.holds_times(),
        tails: HashMap::new(),
    };
    let mut append = conn.prepare_cached(APPEND_EVENT)?;
    for ((job, id), plant) in jobs.iter().zip(&ids).zip(&seed.plants) {
        if plant_change(conn, &mut logs, &mut append, &job.change, id)? != Outcome::Created {
            return Err(crate::store::seam::StoreError(format!(
                "{}.id: principal {} already owns a plant with id {}",
                plant.place, plant.principal, plant.id
            )));
        }
    }
    logs.save(conn)
}

/// A create or a delete, with its event when it applies. A change given by its token
/// (`Owner::Token`) has it looked up here, in the group's transaction.
fn plant_change(
    conn: &Connection,
    logs: &mut Logs,
    append: &mut rusqlite::CachedStatement<'_>,
    change: &Change,
    event_id: &str,
) -> StoreResult<Outcome> {
    let (owner, id, created) = match change {
        Change::Create {
            owner,
            id,
            name,
            tag,
        } => (owner, *id, Some((name, tag))),
        Change::Delete { owner, id } => (owner, *id, None),
        _ => unreachable!("only creates and deletes are plant changes"),
    };
    let principal = match owner {
        Owner::Principal(p) => Cow::Borrowed(p.as_str()),
        Owner::Token { hash, now } => match writer_of(token_owner(conn, hash)?, *now) {
            Ok(p) => Cow::Owned(p),
            Err(refusal) => return Ok(Outcome::Refused(refusal)),
        },
    };
    let applied = match created {
        Some((name, tag)) => conn
            .prepare_cached(
                "INSERT INTO plants (principal, id, name, tag) VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT DO NOTHING",
            )?
            .execute(params![principal, id, name, tag])?,
        None => conn
            .prepare_cached("DELETE FROM plants WHERE principal = ?1 AND id = ?2")?
            .execute(params![principal, id])?,
    } == 1;
    if applied {
        let (seq, at) = logs.next(conn, &principal)?;
        let kind = if created.is_some() { CREATED } else { DELETED };
        let (name, tag) = created.map_or((None, None), |(n, t)| (Some(n.as_str()), t.as_deref()));
        append.execute(params![principal, seq, event_id, kind, at, id, name, tag])?;
    }
    Ok(match (owner, created, applied) {
        (Owner::Token { .. }, _, applied) => Outcome::Owned {
            principal: principal.into_owned(),
            applied,
        },
        (Owner::Principal(_), Some(_), true) => Outcome::Created,
        (Owner::Principal(_), Some(_), false) => Outcome::Conflict,
        (Owner::Principal(_), None, true) => Outcome::Deleted,
        (Owner::Principal(_), None, false) => Outcome::NotFound,
    })
}

/// The logs a group appends to: each principal's last seq and time, read once when the
/// group first appends to it; a log new to the store gets its row before the commit. The transaction
/// holds the database's write lock throughout, so no other writer takes a seq between.
struct Logs {
    now: i64,
    /// Event times never go back (`Clock::holds_times`).
    holds: bool,
    tails: HashMap<String, (i64, i64)>,
}

impl Logs {
    /// The seq and time of the principal's next event: one more than its last, at the
    /// commit's time, or at the last event's if that is later by at most `clock::STEP`
    /// (a reading of a clock that stepped further ahead is not followed), or later at all
    /// with `holds` (`event_time`).
    fn next(&mut self, conn: &Connection, principal: &str) -> StoreResult<(i64, i64)> {
        let tail = match self.tails.get_mut(principal) {
            Some(tail) => tail,
            None => self.tails.entry(principal.to_owned()).or_insert(
                conn.prepare_cached(LOG_TAIL)?
                    .query_row([principal], |r| Ok((r.get(0)?, r.get(1)?)))
                    .optional()?
                    .unwrap_or((0, 0)),
            ),
        };
        *tail = (tail.0 + 1, event_time(tail.1, self.now, self.holds));
        Ok(*tail)
    }

    fn save(&self, conn: &Connection) -> StoreResult<()> {
        let mut st = conn.prepare_cached(SAVE_LOG)?;
        for (principal, (seq, at)) in &self.tails {
            st.execute(params![principal, seq, at])?;
        }
        Ok(())
    }
}

/// An event's time: `now`, or the log's `last` time when that is ahead of `now` by at
/// most `clock::STEP` (a small step back of the clock keeps times from going back; a
/// reading of a clock that stepped further ahead does not hold every later time). With
/// `holds` (test control, whose clock is moved at will) times never go back: `last`
/// whenever it is ahead.
fn event_time(last: i64, now: i64, holds: bool) -> i64 {
    if last > now && (holds || last - now <= crate::ops::clock::STEP_MS) {
        last
    } else {
        now
    }
}
