//! The retention sweep on SQLite (`Change::Sweep`; docs/api.md, "Events", and
//! docs/design.md, "The change feed"): per principal, by seq ranges on the log's
//! primary key, so that its cost grows with the principals and what it removes, never
//! with what active webhook endpoints hold.

use crate::store::seam::{Outcome, SWEEP_ROWS, StoreResult};
use rusqlite::{Connection, OptionalExtension, params};

/// Disables each active endpoint whose next event is stamped before ?1: it has held it
/// past the retention and `--webhook-hold` (its events are then the sweep's).
const HELD_TOO_LONG: &str = "UPDATE webhooks SET active = 0, lease_until = 0, \
     last_error = 'the event at seq ' || (delivered + 1) || \
     ' was held past the retention and --webhook-hold: disabled' \
     WHERE active = 1 AND EXISTS (SELECT 1 FROM events e WHERE e.principal = webhooks.principal \
     AND e.seq = webhooks.delivered + 1 AND e.at < ?1) RETURNING id, delivered + 1";
/// Each principal, and the last seq the sweep may remove of its log: its last, or the
/// lowest cursor of its active endpoints.
const PRINCIPALS: &str = "SELECT l.principal, min(l.last_seq, coalesce((SELECT min(w.delivered) \
     FROM webhooks w WHERE w.principal = l.principal AND w.active = 1), l.last_seq)) \
     FROM log_tails l";
/// The first event of a principal's log.
const HEAD: &str = "SELECT seq, at FROM events WHERE principal = ?1 ORDER BY seq LIMIT 1";
/// The first event from ?2 to ?3 that is neither stamped before ?4 nor after ?5: the
/// sweep stops before it.
const FIRST_KEPT: &str = "SELECT min(seq) FROM events WHERE principal = ?1 \
     AND seq BETWEEN ?2 AND ?3 AND at >= ?4 AND at <= ?5";
/// The last event from ?2 to ?3 stamped before ?4.
const LAST_OLD: &str =
    "SELECT max(seq) FROM events WHERE principal = ?1 AND seq BETWEEN ?2 AND ?3 AND at < ?4";
const REMOVE: &str = "DELETE FROM events WHERE principal = ?1 AND seq BETWEEN ?2 AND ?3";
/// Before events of a log are removed, its row takes its last seq and time (commits write
/// it only at the log's first event: plants.sql, version 7), which removing its last
/// event would otherwise lose.
const KEEP_TAIL: &str = "UPDATE event_logs SET (last_seq, last_at) = \
     (SELECT last_seq, last_at FROM log_tails WHERE principal = ?1) WHERE principal = ?1";

/// One sweep, in the writer's transaction.
pub(super) fn sweep(
    conn: &Connection,
    before_ms: i64,
    future_ms: i64,
    hold_before_ms: i64,
) -> StoreResult<Outcome> {
    let mut held = conn.prepare_cached(HELD_TOO_LONG)?;
    let disabled = held.query_map([hold_before_ms], |r| {
        Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?))
    })?;
    for endpoint in disabled {
        let (id, seq) = endpoint?;
        log::warn!(
            "webhook {id} disabled at seq {seq}: it held the event past the retention and --webhook-hold"
        );
    }
    let principals = conn
        .prepare_cached(PRINCIPALS)?
        .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?)))?
        .collect::<Result<Vec<_>, _>>()?;
    let mut budget = i64::from(SWEEP_ROWS);
    for (principal, bound) in principals {
        let head: Option<(i64, i64)> = conn
            .prepare_cached(HEAD)?
            .query_row([&principal], |r| Ok((r.get(0)?, r.get(1)?)))
            .optional()?;
        let Some((first, at)) = head else { continue };
        if first > bound || (before_ms <= at && at <= future_ms) {
            continue;
        }
        let end = bound.min(first + budget - 1);
        let kept: Option<i64> = conn
            .prepare_cached(FIRST_KEPT)?
            .query_row(params![principal, first, end, before_ms, future_ms], |r| {
                r.get(0)
            })?;
        let end = kept.map_or(end, |k| k - 1);
        let last: Option<i64> = conn
            .prepare_cached(LAST_OLD)?
            .query_row(params![principal, first, end, before_ms], |r| r.get(0))?;
        if let Some(last) = last {
            conn.prepare_cached(KEEP_TAIL)?.execute([&principal])?;
            let removed = conn
                .prepare_cached(REMOVE)?
                .execute(params![principal, first, last])?;
            budget -= removed as i64;
            if budget <= 0 {
                break;
            }
        }
    }
    Ok(Outcome::Swept { more: budget <= 0 })
}
