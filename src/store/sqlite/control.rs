//! Test control's copies and tokens on SQLite: a copy of the whole database into memory
//! (the online backup API), the database made again what a copy holds (the same API, in
//! one step, so one write transaction: a reader sees all of it or none of it; then every
//! webhook lease is given back, so no answer to an attempt from before counts), and a
//! token stored. The seed's transaction is the writer's (`writer.rs`).

use crate::store::admin::{Image, NewToken};
use crate::store::seam::{BUSY_TIMEOUT, StoreError, StoreResult};
use rusqlite::backup::{Backup, StepResult};
use rusqlite::{Connection, params};
use std::sync::Mutex;
use std::time::Duration;

/// A restore that meets a reader's lock (`:memory:` locks the whole database) tries
/// again this often, for at most `BUSY_TIMEOUT`.
const RESTORE_RETRY: Duration = Duration::from_millis(1);

/// A copy of the whole database, in memory.
pub(super) fn snapshot(conn: &Connection) -> StoreResult<Image> {
    let mut copy = Connection::open_in_memory()?;
    copy_all(conn, &mut copy)?;
    Ok(Image(Box::new(Mutex::new(copy))))
}

/// Every webhook's lease given back: a delivery's answer recorded under a lease taken
/// before a restore would move the restored cursor past an event it never sent.
const CLEAR_LEASES: &str = "UPDATE webhooks SET lease_owner = '', lease_until = 0";

/// The whole database made what `image` holds, with no webhook lease held (the writer
/// runs this between two groups, so no settlement comes between the two steps).
pub(super) fn restore(conn: &mut Connection, image: &Image) -> StoreResult<()> {
    let copy = image
        .0
        .downcast_ref::<Mutex<Connection>>()
        .ok_or_else(|| StoreError("not a copy of a SQLite database".into()))?;
    let copy = copy.lock().unwrap_or_else(|e| e.into_inner());
    copy_all(&copy, conn)?;
    conn.execute(CLEAR_LEASES, [])?;
    Ok(())
}

/// Copies every page of `from` into `to` in one step (one write transaction on `to`),
/// waiting while a reader's lock is in the way.
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

/// Stores a token (its hash, never the token): the `token add` command's, a seed's, one
/// made at run time.
pub(super) fn insert_token(conn: &Connection, token: &NewToken) -> rusqlite::Result<()> {
    conn.prepare_cached(
        "INSERT INTO tokens (public_id, hash, principal, scope, created_at, expires_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    )?
    .execute(params![
        token.public_id,
        &token.hash[..],
        token.principal,
        token.scope,
        token.created_at,
        token.expires_at
    ])?;
    Ok(())
}
