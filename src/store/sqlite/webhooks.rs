//! Webhook endpoints on SQLite: the `webhook` subcommands' statements, and the
//! deliveries' read of every endpoint.

use crate::store::location::Location;
use crate::store::seam::{Endpoint, EndpointRecord, StoreError, StoreResult, WebhookAdmin};
use rusqlite::{Connection, OptionalExtension, params};
use std::time::Duration;

/// Every endpoint with its principal's last seq and the time of its next event, and now
/// by the steady clock (as due times and leases are taken on SQLite).
const ENDPOINTS: &str = "SELECT w.id, w.principal, w.url, w.secret, w.active, w.delivered, \
     w.failures, w.due, w.lease_owner, w.lease_until, coalesce(l.last_seq, 0), \
     (SELECT e.at FROM events e WHERE e.principal = w.principal AND e.seq = w.delivered + 1), ?1 \
     FROM webhooks w LEFT JOIN log_tails l ON l.principal = w.principal ORDER BY w.id";

/// Makes an endpoint active, due now, with a fresh schedule and no lease (an attempt
/// under way is not recorded, and made again); its cursor moves past the events the
/// retention removed while it was disabled (to the oldest kept, or to the log's end when
/// none is).
pub(super) const ENABLE: &str = "UPDATE webhooks SET active = 1, failures = 0, due = 0, \
     lease_owner = '', lease_until = 0, \
     delivered = max(delivered, coalesce( \
       (SELECT min(seq) - 1 FROM events e WHERE e.principal = webhooks.principal), \
       (SELECT last_seq FROM log_tails l WHERE l.principal = webhooks.principal), \
       delivered)) \
     WHERE id = ?1 RETURNING delivered";

/// The furthest ahead of the steady clock a lease is ever taken: `--webhook-timeout`'s
/// most (an hour) twice (a `duplicate` fault's renewal), with a margin; a lease further
/// ahead at open was stored by a test clock moved ahead (`Clock`'s ticks) and is void.
pub const LEASE_AT_MOST: Duration = Duration::from_secs(86_400);
/// The furthest ahead a retry is ever due: the longest wait a `--webhook-schedule`
/// lists (30 days), with a margin; one further ahead at open is due at once.
pub const DUE_AT_MOST: Duration = Duration::from_secs(31 * 86_400);

/// Leases and due times a test clock put ahead (steady milliseconds are its ticks) made
/// what a real clock could have: a run that crashed with its clock moved ahead leaves no
/// endpoint waiting for years. ?1 now, ?2 `LEASE_AT_MOST`, ?3 `DUE_AT_MOST`.
const PULL_BACK: &str = "UPDATE webhooks SET \
     lease_until = CASE WHEN lease_until > ?1 + ?2 THEN 0 ELSE lease_until END, \
     due = CASE WHEN due > ?1 + ?3 THEN ?1 ELSE due END \
     WHERE lease_until > ?1 + ?2 OR due > ?1 + ?3";

/// At open (`sqlite::open`), with the steady clock at `steady_ms`: `PULL_BACK`; how many
/// endpoints it changed.
pub(super) fn pull_back(conn: &Connection, steady_ms: i64) -> StoreResult<usize> {
    let ms = |d: Duration| d.as_millis() as i64;
    Ok(conn.execute(
        PULL_BACK,
        params![steady_ms, ms(LEASE_AT_MOST), ms(DUE_AT_MOST)],
    )?)
}

/// Due times and leases brought back by ?2 ms (the ticks ahead of the real clock: a
/// test clock's forward moves), to now by the real clock (?1 less ?2) at the earliest;
/// ?1 now by the steady clock.
const BRING_BACK: &str = "UPDATE webhooks SET \
     due = CASE WHEN due > ?1 - ?2 THEN max(?1 - ?2, due - ?2) ELSE due END, \
     lease_until = CASE WHEN lease_until > ?1 - ?2 THEN max(?1 - ?2, lease_until - ?2) \
     ELSE lease_until END \
     WHERE due > ?1 - ?2 OR lease_until > ?1 - ?2";

/// At a stop, with the steady clock at `steady_ms` and its ticks `ahead_ms` ahead of the
/// real clock's (`Clock::ahead_millis`): `BRING_BACK`, so that the next run (its steady
/// clock starts from the real one) waits for each what this run had left, no more.
pub(super) fn bring_back(conn: &Connection, steady_ms: i64, ahead_ms: i64) -> StoreResult<usize> {
    Ok(conn.execute(BRING_BACK, params![steady_ms, ahead_ms])?)
}

/// Every endpoint, as the deliveries see it, at `steady_ms` (`Clock::steady_millis`).
pub(super) fn endpoints(conn: &Connection, steady_ms: i64) -> StoreResult<Vec<Endpoint>> {
    let mut st = conn.prepare_cached(ENDPOINTS)?;
    let rows = st.query_map([steady_ms], |r| {
        Ok(Endpoint {
            id: r.get(0)?,
            principal: r.get(1)?,
            url: r.get(2)?,
            secret: r.get(3)?,
            active: r.get::<_, i64>(4)? == 1,
            delivered: r.get(5)?,
            failures: r.get(6)?,
            due_ms: r.get(7)?,
            lease_owner: r.get(8)?,
            lease_until_ms: r.get(9)?,
            last_seq: r.get(10)?,
            next_at_ms: r.get(11)?,
            now_ms: r.get(12)?,
        })
    })?;
    Ok(rows.collect::<Result<_, _>>()?)
}

/// Webhook administration on a SQLite file; `read_only` (for `webhook list`): opened
/// read-only, never migrated.
pub fn admin(location: &Location, read_only: bool) -> StoreResult<Box<dyn WebhookAdmin>> {
    if let Location::Memory(_) = location {
        return Err(StoreError(
            "webhooks need a database file, not :memory:".into(),
        ));
    }
    let (conn, held) = location.open_admin(read_only)?;
    Ok(Box::new(Webhooks { conn, _held: held }))
}

struct Webhooks {
    conn: Connection,
    /// Kept until after `conn` is closed (declared after it): `held.rs`.
    _held: Option<std::sync::Arc<crate::store::sqlite::held::Held>>,
}

impl WebhookAdmin for Webhooks {
    fn add(&mut self, record: &EndpointRecord, secret: &str) -> StoreResult<i64> {
        Ok(self.conn.query_row(
            "INSERT INTO webhooks (id, principal, url, secret, created_at, active, delivered)
             VALUES (?1, ?2, ?3, ?4, ?5, 1,
                     coalesce((SELECT last_seq FROM log_tails WHERE principal = ?2), 0))
             RETURNING delivered",
            params![
                record.id,
                record.principal,
                record.url,
                secret,
                record.created_at
            ],
            |r| r.get(0),
        )?)
    }

    fn list(&mut self) -> StoreResult<Vec<EndpointRecord>> {
        let mut st = self.conn.prepare(
            "SELECT w.id, w.principal, w.url, w.created_at, w.active, w.delivered,
                    coalesce(l.last_seq, 0), w.failures, w.last_error
             FROM webhooks w LEFT JOIN log_tails l ON l.principal = w.principal
             ORDER BY w.created_at, w.id",
        )?;
        let rows = st.query_map([], |r| {
            Ok(EndpointRecord {
                id: r.get(0)?,
                principal: r.get(1)?,
                url: r.get(2)?,
                created_at: r.get(3)?,
                active: r.get::<_, i64>(4)? == 1,
                delivered: r.get(5)?,
                last_seq: r.get(6)?,
                failures: r.get(7)?,
                last_error: r.get(8)?,
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    fn remove(&mut self, id: &str) -> StoreResult<bool> {
        Ok(self
            .conn
            .execute("DELETE FROM webhooks WHERE id = ?1", [id])?
            > 0)
    }

    fn enable(&mut self, id: &str) -> StoreResult<Option<(i64, i64)>> {
        let tx = self
            .conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        let before: Option<i64> = tx
            .query_row("SELECT delivered FROM webhooks WHERE id = ?1", [id], |r| {
                r.get(0)
            })
            .optional()?;
        let Some(before) = before else {
            return Ok(None);
        };
        let after = tx.query_row(ENABLE, [id], |r| r.get(0))?;
        tx.commit()?;
        Ok(Some((before, after)))
    }
}
