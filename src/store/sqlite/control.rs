//! Test control's statements and copies on SQLite: a copy of the whole database into
//! memory (the online backup API), the database made again what a copy holds (the same
//! API, one step, so one transaction: a reader sees all of it or none), a token added,
//! and a seed loaded in one transaction.

use crate::store::admin::{Admin, Admitted, Image, NewToken, Seed};
use crate::store::seam::BUSY_TIMEOUT;
use crate::store::seam::{Change, Job, Outcome, Owner, StoreError, StoreResult, event_ids};
use crate::store::sqlite::insert_token;
use crate::store::sqlite::writer::{APPEND_EVENT, Logs, plant_change};
use rusqlite::Connection;
use rusqlite::backup::{Backup, StepResult};
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

/// A restore that meets a reader's lock (`:memory:` locks the whole database) tries
/// again this often.
const RESTORE_RETRY: Duration = Duration::from_millis(1);

/// Runs one whole-store operation on the writer's connection, between two groups.
pub(super) fn admin(conn: &mut Connection, op: Admin) -> StoreResult<Admitted> {
    match op {
        Admin::Snapshot => {
            let mut copy = Connection::open_in_memory()?;
            copy_all(conn, &mut copy)?;
            Ok(Admitted::Image(Image(Box::new(Mutex::new(copy)))))
        }
        Admin::Restore(image) => {
            let copy = image
                .0
                .downcast_ref::<Mutex<Connection>>()
                .ok_or_else(|| StoreError("not a copy of a SQLite database".into()))?;
            let copy = copy.lock().unwrap_or_else(|e| e.into_inner());
            // Every page in one step: one write transaction on the destination.
            copy_all(&copy, conn)?;
            Ok(Admitted::Done)
        }
        Admin::AddToken(token) => {
            insert_token(conn, &token.record, &token.hash)?;
            Ok(Admitted::Done)
        }
        Admin::Seed(seed) => {
            conn.execute_batch("BEGIN IMMEDIATE")?;
            let loaded = load(conn, &seed);
            conn.execute_batch(if loaded.is_ok() { "COMMIT" } else { "ROLLBACK" })?;
            loaded.map(|()| Admitted::Done)
        }
    }
}

/// Copies every page of `from` into `to` in one step (one write transaction on `to`),
/// waiting while a reader's lock is in the way (at most `BUSY_TIMEOUT`).
fn copy_all(from: &Connection, to: &mut Connection) -> StoreResult<()> {
    let started = std::time::Instant::now();
    let backup = Backup::new(from, to)?;
    loop {
        match backup.step(-1)? {
            StepResult::Done => return Ok(()),
            StepResult::More => {}
            _ if started.elapsed() > BUSY_TIMEOUT => {
                return Err(StoreError("the database stayed locked".into()));
            }
            _ => std::thread::sleep(RESTORE_RETRY),
        }
    }
}

/// Inside the seed's transaction: its tokens, then its plants as creates (each with its
/// event). The first that cannot be stored fails the seed, naming its place.
fn load(conn: &Connection, seed: &Seed) -> StoreResult<()> {
    for NewToken {
        record,
        hash,
        place,
    } in &seed.tokens
    {
        if let Err(e) = insert_token(conn, record, hash) {
            return Err(StoreError(match e.sqlite_error_code() {
                Some(rusqlite::ErrorCode::ConstraintViolation) => {
                    format!("{place}.token: this token is already stored")
                }
                _ => format!("{place}: {e}"),
            }));
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
    let ids = event_ids(&jobs)?;
    let mut logs = Logs {
        now: crate::ops::clock::unix_now_millis(),
        tails: HashMap::new(),
    };
    let mut append = conn.prepare_cached(APPEND_EVENT)?;
    for ((job, id), plant) in jobs.iter().zip(&ids).zip(&seed.plants) {
        match plant_change(conn, &mut logs, &mut append, &job.change, id)? {
            Outcome::Created => {}
            _ => {
                return Err(StoreError(format!(
                    "{}.id: principal {} already owns a plant with id {}",
                    plant.place, plant.principal, plant.id
                )));
            }
        }
    }
    logs.save(conn)
}
