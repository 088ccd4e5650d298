//! A group of writes as one simple query, its marker row, and the outcomes it reports.

use crate::store::seam::{
    Attempt, Change, Job, Outcome, Owner, Refusal, SWEEP_ROWS, StoreError, StoreResult,
};

/// The order of a group's statements: the principals' changes (by principal, then plant
/// id; the probe's row has the empty principal, which no caller has, and a change given
/// by its token comes first too), then the webhook endpoints' (by id), which is the order
/// their rows' locks are taken in.
pub fn key(change: &Change) -> (bool, &str, i64) {
    match change {
        Change::Create { owner, id, .. } | Change::Delete { owner, id } => match owner {
            Owner::Principal(p) => (false, p, *id),
            Owner::Token { .. } => (false, "", *id),
        },
        Change::Claim { endpoint, .. } | Change::Settle { endpoint, .. } => (true, endpoint, 0),
        Change::Release { endpoint, .. } => (true, endpoint, 0),
        Change::Probe | Change::Sweep { .. } | Change::Admin(_) => (false, "", 0),
    }
}

/// The database's clock, in milliseconds since the Unix epoch: what leases and due times
/// are taken by, so that instances whose clocks differ agree.
const NOW_MS: &str = "(extract(epoch from clock_timestamp()) * 1000)::bigint";

/// The prepared statements of a create and a delete, which a group `EXECUTE`s with the
/// principal (text), the plant's id, (for a create: its name and tag as bytes,) the
/// group's time in milliseconds, and the event's id. Each applies only for a principal
/// (not a refused token's NULL), appends its event when it applied (the log's next seq,
/// at the group's time, or at the log's last time if that is later by at most
/// `clock::STEP_MS`, the 60000 written in it), and adds its row count (0 or 1)
/// to the group's outcomes, answering with their length only, so that the answer does not
/// grow with the group.
const CREATE: &str = "plant_store_create";
const DELETE: &str = "plant_store_delete";

/// Prepares `CREATE` and `DELETE` on a connection, once (`PREPARE` lasts as long as the
/// session): a change then costs PostgreSQL no parse or plan of its own.
pub const PREPARE: &str =
    "PREPARE plant_store_create (text, bigint, bytea, bytea, bigint, text) AS \
     WITH r AS (INSERT INTO plants (principal, id, name, tag) SELECT $1, $2, $3, $4 \
     WHERE $1 IS NOT NULL ON CONFLICT DO NOTHING RETURNING 1), \
     l AS (UPDATE event_logs SET last_seq = last_seq + 1, last_at = CASE WHEN last_at - $5 <= 60000 THEN greatest(last_at, $5) ELSE $5 END \
     WHERE principal = $1 AND EXISTS (SELECT 1 FROM r) RETURNING last_seq, last_at), \
     e AS (INSERT INTO events (principal, seq, id, kind, at, plant, name, tag) \
     SELECT $1, last_seq, $6, 'plant.created', last_at, $2, $3, $4 FROM l) \
     SELECT length(set_config('plant_store.outcomes', \
     current_setting('plant_store.outcomes') || count(*), true)) FROM r;
PREPARE plant_store_delete (text, bigint, bigint, text) AS \
     WITH r AS (DELETE FROM plants WHERE principal = $1 AND id = $2 \
     RETURNING 1), \
     l AS (UPDATE event_logs SET last_seq = last_seq + 1, last_at = CASE WHEN last_at - $3 <= 60000 THEN greatest(last_at, $3) ELSE $3 END \
     WHERE principal = $1 AND EXISTS (SELECT 1 FROM r) RETURNING last_seq, last_at), \
     e AS (INSERT INTO events (principal, seq, id, kind, at, plant, name, tag) \
     SELECT $1, last_seq, $4, 'plant.deleted', last_at, $2, NULL, NULL FROM l) \
     SELECT length(set_config('plant_store.outcomes', \
     current_setting('plant_store.outcomes') || count(*), true)) FROM r;";

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
    pub fn new(at: i64) -> StoreResult<Marker> {
        let mut nonce = [0u8; 16];
        getrandom::fill(&mut nonce).map_err(|e| StoreError(format!("no randomness: {e}")))?;
        Ok(Marker { at, nonce })
    }
}

/// A group of changes as one simple query, one round trip: `BEGIN`, a statement per
/// change in `order` (a create or a delete `EXECUTE`s its prepared statement, `PREPARE`),
/// `COMMIT`. Values are never spliced in as text: ids are integers,
/// and every string goes in as the hex of its bytes (`decode('…', 'hex')`), which no
/// setting of the server reads differently (event ids are `evt_` and hex digits).
///
/// A change given by its token (`Owner::Token`) has it looked up first, once per token
/// and time: `=` and the principal, or `!u` (unknown), `!e` (expired), `!r` and the
/// principal (a read token), kept in a setting of the transaction (`plant_store.t<k>`),
/// so that every statement of the group sees the one answer; such a change's principal
/// is NULL unless the token was found valid, and a change applies only for a principal.
/// Then one statement takes the `event_logs` row of every principal of the group, in the
/// principals' byte order, and holds their locks to the commit: the principal's events
/// take their seqs in commit order, on every instance, and groups of several instances
/// never deadlock (a plant's row is written only under its principal's lock, and the
/// webhook endpoints' rows are taken after, in `order`, by id). A change that applies
/// appends its event (`ids[i]` for `batch[i]`). The group ends with a notification naming
/// each principal.
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
    /// Appends the change's row count (0 or 1) to the group's outcomes (answering with
    /// its length only, so that the answer does not grow with the group).
    const RECORD: &str = " SELECT length(set_config('plant_store.outcomes', \
        current_setting('plant_store.outcomes') || count(*), true)) FROM r;\n";
    let tokens = tokens(batch, order);
    // The principal of a change, as an expression: its text, or its token's setting.
    let owner = |owner: &Owner| {
        let mut p = String::new();
        match owner {
            Owner::Principal(name) => text(&mut p, name),
            Owner::Token { hash, now } => {
                let k = tokens.iter().position(|t| *t == (hash, *now));
                let k = k.unwrap_or(0);
                let _ = write!(
                    p,
                    "(CASE WHEN left(current_setting('plant_store.t{k}'), 1) = '=' \
                     THEN substr(current_setting('plant_store.t{k}'), 2) END)"
                );
            }
        }
        p
    };
    let mut sql = String::with_capacity(512 + 640 * batch.len());
    sql.push_str("BEGIN;\nSELECT set_config('plant_store.outcomes', '', true);\n");
    for (k, (hash, now)) in tokens.iter().enumerate() {
        let _ = write!(
            sql,
            "SELECT set_config('plant_store.t{k}', coalesce((SELECT CASE \
             WHEN scope NOT IN ('read', 'read-write') THEN '!u' WHEN expires_at <= {now} THEN '!e' \
             WHEN scope = 'read' THEN '!r' || principal ELSE '=' || principal END FROM tokens WHERE hash = "
        );
        hex(&mut sql, &hash[..]);
        sql.push_str("), '!u'), true);\n");
    }
    // Every principal of the group, as expressions; a refused token's is skipped by SQL.
    let mut principals: Vec<String> = Vec::new();
    for &i in order {
        if let Some(o) = batch[i].change.owner() {
            let p = owner(o);
            if !principals.contains(&p) {
                principals.push(p);
            }
        }
    }
    let named = |sql: &mut String, what: &str| {
        sql.push_str(what);
        sql.push_str(" FROM (SELECT DISTINCT p FROM (VALUES (");
        sql.push_str(&principals.join("), ("));
        sql.push_str(")) v (p)) d WHERE p IS NOT NULL");
    };
    if !principals.is_empty() {
        named(
            &mut sql,
            "INSERT INTO event_logs (principal, last_seq, last_at) SELECT p, 0, 0",
        );
        sql.push_str(" ORDER BY p COLLATE \"C\" ON CONFLICT (principal) DO UPDATE SET last_seq = event_logs.last_seq;\n");
    }
    for &i in order {
        let change = &batch[i].change;
        match change {
            Change::Create {
                owner: o,
                id,
                name,
                tag,
            } => {
                let _ = write!(sql, "EXECUTE {CREATE}({}, {id}, ", owner(o));
                hex(&mut sql, name.as_bytes());
                sql.push_str(", ");
                match tag {
                    Some(t) => hex(&mut sql, t.as_bytes()),
                    None => sql.push_str("NULL"),
                }
                let _ = writeln!(sql, ", {}, '{}');", marker.at, ids[i]);
            }
            Change::Delete { owner: o, id } => {
                let _ = writeln!(
                    sql,
                    "EXECUTE {DELETE}({}, {id}, {}, '{}');",
                    owner(o),
                    marker.at,
                    ids[i]
                );
            }
            Change::Probe => sql.push_str(PROBE),
            // Run by `writer::run` alone (and refused by this backend), never grouped.
            Change::Admin(_) => {}
            Change::Sweep {
                before_ms,
                future_ms,
                hold_before_ms,
            } => {
                let _ = writeln!(
                    sql,
                    "{};",
                    sweep_sql(*before_ms, *future_ms, *hold_before_ms)
                );
            }
            Change::Claim {
                endpoint,
                owner,
                delivered,
                failures,
                last_seq,
                lease_ms,
                renew,
            } => {
                sql.push_str("WITH r AS (UPDATE webhooks SET lease_owner = ");
                text(&mut sql, owner);
                let _ = write!(sql, ", lease_until = {NOW_MS} + {lease_ms} WHERE id = ");
                text(&mut sql, endpoint);
                let _ = write!(
                    sql,
                    " AND active = 1 AND delivered = {delivered} AND failures = {failures} \
                     AND coalesce((SELECT l.last_seq FROM event_logs l \
                     WHERE l.principal = webhooks.principal), 0) >= {last_seq} "
                );
                if *renew {
                    // Only the lease the owner holds now (as SQLite's `RENEW`).
                    let _ = write!(sql, "AND lease_until >= {NOW_MS} AND lease_owner = ");
                } else {
                    let _ = write!(
                        sql,
                        "AND due <= {NOW_MS} AND (lease_until < {NOW_MS} OR lease_owner = "
                    );
                }
                text(&mut sql, owner);
                sql.push_str(if *renew {
                    " RETURNING 1)"
                } else {
                    ") RETURNING 1)"
                });
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
    if !principals.is_empty() {
        // A principal longer than `MAX_NOTIFIED` is announced as "any".
        let _ = write!(
            sql,
            "SELECT pg_notify('{EVENTS_CHANNEL}', CASE WHEN length(p) > {MAX_NOTIFIED} THEN '' ELSE p END)"
        );
        named(&mut sql, "");
        sql.push_str(";\n");
    }
    if !tokens.is_empty() {
        // What each token was found to be, after the digits: `;` and each setting in hex
        // (so no principal, whatever it holds, reads as another).
        sql.push_str("SELECT length(set_config('plant_store.outcomes', current_setting('plant_store.outcomes')");
        for k in 0..tokens.len() {
            let _ = write!(
                sql,
                " || ';' || encode(convert_to(current_setting('plant_store.t{k}'), 'UTF8'), 'hex')"
            );
        }
        sql.push_str(", true));\n");
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

/// The tokens of a group's changes given by their token, each (token, time) once, in
/// `order`: setting `plant_store.t<k>` holds what the `k`th was found to be.
fn tokens<'a>(batch: &'a [Job], order: &[usize]) -> Vec<(&'a [u8; 32], i64)> {
    let mut tokens = Vec::new();
    for &i in order {
        if let Some(Owner::Token { hash, now }) = batch[i].change.owner()
            && !tokens.contains(&(hash, *now))
        {
            tokens.push((hash, *now));
        }
    }
    tokens
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
/// `order`, probes aside: 1 applied, 0 not), then, when changes were given by their
/// token, `;` and what each token was found to be (`group_sql`).
pub fn outcomes(batch: &[Job], order: &[usize], answer: &str) -> StoreResult<Vec<Outcome>> {
    let mismatch = || StoreError("the group's outcomes do not match its changes".into());
    let tokens = tokens(batch, order);
    let mut parts = answer.split(';');
    let mut digits = parts.next().unwrap_or("").bytes();
    let found: Vec<String> = parts
        .map(unhex)
        .collect::<Option<_>>()
        .ok_or_else(mismatch)?;
    if found.len() != tokens.len() {
        return Err(mismatch());
    }
    let mut out: Vec<Option<Outcome>> = batch.iter().map(|_| None).collect();
    for &i in order {
        let change = &batch[i].change;
        let applied = match change {
            Change::Probe | Change::Admin(_) => true,
            _ => match digits.next() {
                Some(b'1') => true,
                Some(b'0') => false,
                _ => return Err(mismatch()),
            },
        };
        if let Some(Owner::Token { hash, now }) = change.owner() {
            let k = tokens.iter().position(|t| *t == (hash, *now));
            let found = &found[k.ok_or_else(mismatch)?];
            out[i] = Some(match (found.split_at_checked(1), applied) {
                (Some(("=", principal)), applied) => Outcome::Owned {
                    principal: principal.to_owned(),
                    applied,
                },
                (Some(("!", "u")), false) => Outcome::Refused(Refusal::Unknown),
                (Some(("!", "e")), false) => Outcome::Refused(Refusal::Expired),
                (Some(("!", r)), false) if r.starts_with('r') => {
                    Outcome::Refused(Refusal::ReadOnly(r[1..].to_owned()))
                }
                _ => return Err(mismatch()),
            });
            continue;
        }
        out[i] = Some(match (change, applied) {
            (Change::Sweep { .. }, more) => Outcome::Swept { more },
            (Change::Create { .. }, true) => Outcome::Created,
            (Change::Create { .. }, false) => Outcome::Conflict,
            (Change::Delete { .. }, true) | (Change::Probe | Change::Admin(_), _) => {
                Outcome::Deleted
            }
            (Change::Delete { .. }, false) => Outcome::NotFound,
            (Change::Claim { .. } | Change::Settle { .. } | Change::Release { .. }, applied) => {
                Outcome::Updated(applied)
            }
        });
    }
    if digits.next().is_some() {
        return Err(mismatch());
    }
    Ok(out
        .into_iter()
        .map(|o| o.expect("every change has an outcome"))
        .collect())
}

/// The text whose UTF-8 bytes these hex digits are.
fn unhex(hex: &str) -> Option<String> {
    let digit = |b: u8| (b as char).to_digit(16);
    let bytes = hex.as_bytes();
    if !bytes.len().is_multiple_of(2) {
        return None;
    }
    let raw = bytes
        .chunks_exact(2)
        .map(|p| Some((digit(p[0])? * 16 + digit(p[1])?) as u8))
        .collect::<Option<Vec<u8>>>()?;
    String::from_utf8(raw).ok()
}

/// The retention sweep (`Change::Sweep`; as `sqlite/sweep.rs`, in one statement): the
/// endpoints held too long are disabled first, then per principal, from the first event
/// of its log (by the primary key), the prefix up to the last event stamped before
/// `before_ms` that comes before the first stamped neither before it nor after
/// `future_ms`, among the next `SWEEP_ROWS`, never past the lowest cursor of its active
/// endpoints, at most `SWEEP_ROWS` in all. Adds 1 to the group's outcomes when it removed
/// `SWEEP_ROWS` (more may be due).
fn sweep_sql(before_ms: i64, future_ms: i64, hold_before_ms: i64) -> String {
    let rows = SWEEP_ROWS;
    format!(
        "WITH held AS (UPDATE webhooks w SET active = 0, lease_until = 0, \
         last_error = 'the event at seq ' || (w.delivered + 1) || \
         ' was held past the retention and --webhook-hold: disabled' \
         WHERE w.active = 1 AND EXISTS (SELECT 1 FROM events e WHERE e.principal = w.principal \
         AND e.seq = w.delivered + 1 AND e.at < {hold_before_ms}) RETURNING w.id), \
         p AS (SELECT l.principal, least(l.last_seq, coalesce((SELECT min(w.delivered) \
         FROM webhooks w WHERE w.principal = l.principal AND w.active = 1 \
         AND w.id NOT IN (SELECT id FROM held)), l.last_seq)) AS bound FROM event_logs l), \
         h AS (SELECT p.principal, p.bound, e.seq AS head FROM p CROSS JOIN LATERAL \
         (SELECT seq, at FROM events WHERE principal = p.principal ORDER BY seq LIMIT 1) e \
         WHERE e.seq <= p.bound AND (e.at < {before_ms} OR e.at > {future_ms})), \
         w AS (SELECT h.principal, h.head, least(h.bound, h.head + {rows} - 1) AS stop FROM h), \
         k AS (SELECT w.principal, w.head, coalesce((SELECT min(seq) - 1 FROM events e \
         WHERE e.principal = w.principal AND e.seq BETWEEN w.head AND w.stop \
         AND e.at >= {before_ms} AND e.at <= {future_ms}), w.stop) AS stop FROM w), \
         t AS (SELECT k.principal, k.head, (SELECT max(seq) FROM events e \
         WHERE e.principal = k.principal AND e.seq BETWEEN k.head AND k.stop \
         AND e.at < {before_ms}) AS last FROM k), \
         u AS (SELECT principal, head, last, coalesce(sum(last - head + 1) OVER (ORDER BY principal \
         COLLATE \"C\" ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0) AS before \
         FROM t WHERE last IS NOT NULL), \
         r AS (DELETE FROM events e USING u WHERE u.before < {rows} AND e.principal = u.principal \
         AND e.seq BETWEEN u.head AND least(u.last, u.head + {rows} - 1 - u.before) RETURNING 1) \
         SELECT length(set_config('plant_store.outcomes', \
         current_setting('plant_store.outcomes') || (count(*) >= {rows})::int, true)) FROM r"
    )
}
