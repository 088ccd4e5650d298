//! A group of writes as one simple query, its marker row, and the outcomes it reports.

use crate::store::seam::{
    Attempt, CREATED, Change, DELETED, Job, Outcome, SWEEP_ROWS, StoreError, StoreResult,
};

/// The row a change touches, as the order in which a group takes its locks: first the
/// principals' rows (by principal, then plant id; the probe's row has the empty principal,
/// which no caller has), then the webhook endpoints' rows (by id).
pub fn key(change: &Change) -> (bool, &str, i64) {
    match change {
        Change::Create { principal, id, .. } | Change::Delete { principal, id } => {
            (false, principal, *id)
        }
        Change::Claim { endpoint, .. } | Change::Settle { endpoint, .. } => (true, endpoint, 0),
        Change::Release { endpoint, .. } => (true, endpoint, 0),
        Change::Probe | Change::Sweep { .. } => (false, "", 0),
    }
}

/// The database's clock, in milliseconds since the Unix epoch: what leases and due times
/// are taken by, so that instances whose clocks differ agree.
const NOW_MS: &str = "(extract(epoch from clock_timestamp()) * 1000)::bigint";

/// The channel on which a group announces, at its commit, the principals whose logs it
/// appended to (the payload; empty for "any").
pub const EVENTS_CHANNEL: &str = "plant_store_events";
/// A principal longer than this is announced as "any" (a payload is at most 8000 bytes).
const MAX_NOTIFIED: usize = 1000;

/// Markers pruned at most per group (those older than the writer's retention).
const PRUNE_ROWS: u32 = 1000;

/// A group's marker: its row in `plant_store_groups`.
pub struct Marker {
    pub at: i64,
    pub nonce: [u8; 16],
}

impl Marker {
    pub fn new() -> StoreResult<Marker> {
        let mut nonce = [0u8; 16];
        getrandom::fill(&mut nonce).map_err(|e| StoreError(format!("no randomness: {e}")))?;
        Ok(Marker {
            at: crate::ops::clock::unix_now_millis(),
            nonce,
        })
    }
}

/// A group of changes as one simple query, one round trip: `BEGIN`, a statement per
/// change in `order`, `COMMIT`. Values are never spliced in as text: ids are integers,
/// and every string goes in as the hex of its bytes (`decode('…', 'hex')`), which no
/// setting of the server reads differently (event ids are `evt_` and hex digits).
///
/// Each principal's changes are preceded by taking its `event_logs` row (its lock is held
/// to the commit, so the principal's events take their seqs in commit order, on every
/// instance) and followed by a notification naming it. A change that applies appends its
/// event (`ids[i]` for `batch[i]`) with the next seq, at `marker.at` or the log's last time
/// if later. Locks are taken in one order, by principal (its log row, then its plants by
/// id), so groups of several instances never deadlock.
pub fn group_sql(
    batch: &[Job],
    order: &[usize],
    marker: &Marker,
    prune: Option<i64>,
    ids: &[String],
) -> String {
    use std::fmt::Write;
    fn hex(out: &mut String, bytes: &[u8]) {
        out.push_str("decode('");
        for b in bytes {
            let _ = write!(out, "{b:02x}");
        }
        out.push_str("', 'hex')");
    }
    fn text(out: &mut String, text: &str) {
        out.push_str("convert_from(");
        hex(out, text.as_bytes());
        out.push_str(", 'UTF8')");
    }
    /// The notification naming a principal whose log the group may have appended to.
    fn notify(out: &mut String, p: &str) {
        let _ = write!(out, "SELECT pg_notify('{EVENTS_CHANNEL}', ");
        if p.len() > MAX_NOTIFIED {
            out.push_str("''");
        } else {
            text(out, p);
        }
        out.push_str(");\n");
    }
    /// Appends the change's row count (0 or 1) to the group's outcomes (answering with
    /// its length only, so that the answer does not grow with the group).
    const RECORD: &str = " SELECT length(set_config('plant_store.outcomes', \
        current_setting('plant_store.outcomes') || count(*), true)) FROM r;\n";
    /// The event of a change that applied (`r` returned its row): the log's next seq,
    /// then the event row.
    fn append(out: &mut String, p: &str, kind: &str, plant: i64, at: i64, id: &str, data: &str) {
        out.push_str(
            ", l AS (UPDATE event_logs SET last_seq = last_seq + 1, last_at = greatest(last_at, ",
        );
        let _ = write!(out, "{at}) WHERE principal = ");
        text(out, p);
        out.push_str(" AND EXISTS (SELECT 1 FROM r) RETURNING last_seq, last_at), e AS (INSERT INTO events (principal, seq, id, kind, at, plant, name, tag) SELECT ");
        text(out, p);
        let _ = write!(
            out,
            ", last_seq, '{id}', '{kind}', last_at, {plant}, {data} FROM l)"
        );
    }
    let mut sql = String::with_capacity(256 + 640 * batch.len());
    sql.push_str("BEGIN;\nSELECT set_config('plant_store.outcomes', '', true);\n");
    let mut run: Option<&str> = None;
    for &i in order {
        let change = &batch[i].change;
        if run != change.principal() {
            if let Some(p) = run {
                notify(&mut sql, p);
            }
            run = change.principal();
            if let Some(p) = run {
                sql.push_str("INSERT INTO event_logs (principal, last_seq, last_at) VALUES (");
                text(&mut sql, p);
                sql.push_str(", 0, 0) ON CONFLICT (principal) DO UPDATE SET last_seq = event_logs.last_seq;\n");
            }
        }
        match change {
            Change::Create {
                principal: p,
                id,
                name,
                tag,
            } => {
                let mut data = String::new();
                hex(&mut data, name.as_bytes());
                data.push_str(", ");
                match tag {
                    Some(t) => hex(&mut data, t.as_bytes()),
                    None => data.push_str("NULL"),
                }
                sql.push_str("WITH r AS (INSERT INTO plants (principal, id, name, tag) VALUES (");
                text(&mut sql, p);
                let _ = write!(sql, ", {id}, {data}) ON CONFLICT DO NOTHING RETURNING 1)");
                append(&mut sql, p, CREATED, *id, marker.at, &ids[i], &data);
                sql.push_str(RECORD);
            }
            Change::Delete { principal: p, id } => {
                sql.push_str("WITH r AS (DELETE FROM plants WHERE principal = ");
                text(&mut sql, p);
                let _ = write!(sql, " AND id = {id} RETURNING 1)");
                append(&mut sql, p, DELETED, *id, marker.at, &ids[i], "NULL, NULL");
                sql.push_str(RECORD);
            }
            Change::Probe => sql.push_str(PROBE),
            Change::Sweep { before_ms } => {
                let _ = writeln!(
                    sql,
                    "WITH r AS (DELETE FROM events WHERE (principal, seq) IN (SELECT principal, seq \
                     FROM events WHERE at < {before_ms} AND NOT EXISTS (SELECT 1 FROM webhooks w \
                     WHERE w.principal = events.principal AND w.active = 1 AND w.delivered < events.seq) \
                     ORDER BY at, principal, seq LIMIT {SWEEP_ROWS}) RETURNING 1) \
                     SELECT length(set_config('plant_store.outcomes', \
                     current_setting('plant_store.outcomes') || (count(*) >= {SWEEP_ROWS})::int, true)) FROM r;"
                );
            }
            Change::Claim {
                endpoint,
                owner,
                delivered,
                failures,
                lease_ms,
            } => {
                sql.push_str("WITH r AS (UPDATE webhooks SET lease_owner = ");
                text(&mut sql, owner);
                let _ = write!(sql, ", lease_until = {NOW_MS} + {lease_ms} WHERE id = ");
                text(&mut sql, endpoint);
                let _ = write!(
                    sql,
                    " AND active = 1 AND delivered = {delivered} AND failures = {failures} \
                     AND due <= {NOW_MS} AND (lease_until < {NOW_MS} OR lease_owner = "
                );
                text(&mut sql, owner);
                sql.push_str(") RETURNING 1)");
                sql.push_str(RECORD);
            }
            Change::Settle {
                endpoint,
                owner,
                seq,
                attempt,
            } => {
                sql.push_str("WITH r AS (UPDATE webhooks SET ");
                match attempt {
                    Attempt::Delivered { lease_ms } => {
                        let until = if *lease_ms > 0 {
                            format!("{NOW_MS} + {lease_ms}")
                        } else {
                            "0".into()
                        };
                        let _ = write!(
                            sql,
                            "delivered = {seq}, failures = 0, due = 0, last_error = NULL, lease_until = {until}"
                        );
                    }
                    Attempt::Failed {
                        failures,
                        wait_ms,
                        error,
                        active,
                    } => {
                        let _ = write!(
                            sql,
                            "failures = {failures}, due = {NOW_MS} + {wait_ms}, last_error = "
                        );
                        text(&mut sql, error);
                        let _ = write!(sql, ", active = {}, lease_until = 0", i32::from(*active));
                    }
                }
                sql.push_str(" WHERE id = ");
                text(&mut sql, endpoint);
                sql.push_str(" AND lease_owner = ");
                text(&mut sql, owner);
                let _ = write!(sql, " AND delivered = {} RETURNING 1)", seq - 1);
                sql.push_str(RECORD);
            }
            Change::Release { endpoint, owner } => {
                sql.push_str("WITH r AS (UPDATE webhooks SET lease_until = 0 WHERE id = ");
                text(&mut sql, endpoint);
                sql.push_str(" AND lease_owner = ");
                text(&mut sql, owner);
                sql.push_str(" RETURNING 1)");
                sql.push_str(RECORD);
            }
        }
    }
    if let Some(p) = run {
        notify(&mut sql, p);
    }
    if let Some(before) = prune {
        let _ = writeln!(
            sql,
            "DELETE FROM plant_store_groups WHERE (at, nonce) IN (SELECT at, nonce \
             FROM plant_store_groups WHERE at < {before} ORDER BY at LIMIT {PRUNE_ROWS});"
        );
    }
    let _ = write!(
        sql,
        "INSERT INTO plant_store_groups (at, nonce, outcomes) VALUES ({}, ",
        marker.at
    );
    hex(&mut sql, &marker.nonce);
    sql.push_str(", current_setting('plant_store.outcomes')) RETURNING outcomes;\nCOMMIT;");
    sql
}

/// The probe's statements: rows written and removed where a change writes (its plant
/// and its event).
const PROBE: &str = "INSERT INTO plants VALUES ('', 0, '', NULL) ON CONFLICT DO NOTHING;
INSERT INTO events VALUES ('', 0, 'evt_probe', 'plant.deleted', 0, 0, NULL, NULL) ON CONFLICT DO NOTHING;
DELETE FROM plants WHERE principal = '';
DELETE FROM events WHERE principal = '';\n";

/// The group's outcomes as its marker row holds them: the last row of the answer.
pub fn group_outcomes(messages: &[postgres::SimpleQueryMessage]) -> StoreResult<&str> {
    messages
        .iter()
        .rev()
        .find_map(|m| match m {
            postgres::SimpleQueryMessage::Row(row) => row.get(0),
            _ => None,
        })
        .ok_or_else(|| StoreError("PostgreSQL did not answer with the group's outcomes".into()))
}

/// The outcomes, in the batch's order, from the group's digits (one per change in
/// `order`, probes aside): 1 applied, 0 not.
pub fn outcomes(batch: &[Job], order: &[usize], digits: &str) -> StoreResult<Vec<Outcome>> {
    let mut digits = digits.bytes();
    let mut out: Vec<Option<Outcome>> = batch.iter().map(|_| None).collect();
    for &i in order {
        let change = &batch[i].change;
        let applied = match change {
            Change::Probe => true,
            _ => match digits.next() {
                Some(b'1') => true,
                Some(b'0') => false,
                _ => {
                    return Err(StoreError(
                        "the group's outcomes do not match its changes".into(),
                    ));
                }
            },
        };
        out[i] = Some(match (change, applied) {
            (Change::Sweep { .. }, more) => Outcome::Swept { more },
            (Change::Create { .. }, true) => Outcome::Created,
            (Change::Create { .. }, false) => Outcome::Conflict,
            (Change::Delete { .. }, true) | (Change::Probe, _) => Outcome::Deleted,
            (Change::Delete { .. }, false) => Outcome::NotFound,
            (Change::Claim { .. } | Change::Settle { .. } | Change::Release { .. }, applied) => {
                Outcome::Updated(applied)
            }
        });
    }
    Ok(out
        .into_iter()
        .map(|o| o.expect("every change has an outcome"))
        .collect())
}
