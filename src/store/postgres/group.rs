//! A group of writes as one simple query, its marker row, and the outcomes it reports.

use crate::store::seam::{Change, Job, Outcome, StoreError, StoreResult};

/// The row a change touches; the probe's row has the empty principal, which no caller
/// has.
pub fn key(change: &Change) -> (&str, i64) {
    match change {
        Change::Create { principal, id, .. } | Change::Delete { principal, id } => (principal, *id),
        Change::Probe => ("", 0),
    }
}

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
/// setting of the server reads differently.
pub fn group_sql(batch: &[Job], order: &[usize], marker: &Marker, prune: Option<i64>) -> String {
    use std::fmt::Write;
    fn hex(out: &mut String, bytes: &[u8]) {
        out.push_str("decode('");
        for b in bytes {
            let _ = write!(out, "{b:02x}");
        }
        out.push_str("', 'hex')");
    }
    fn principal(out: &mut String, text: &str) {
        out.push_str("convert_from(");
        hex(out, text.as_bytes());
        out.push_str(", 'UTF8')");
    }
    /// Appends the change's row count (0 or 1) to the group's outcomes (answering with
    /// its length only, so that the answer does not grow with the group).
    const RECORD: &str = ") SELECT length(set_config('plant_store.outcomes', \
        current_setting('plant_store.outcomes') || count(*), true)) FROM r;\n";
    let mut sql = String::with_capacity(256 + 320 * batch.len());
    sql.push_str("BEGIN;\nSELECT set_config('plant_store.outcomes', '', true);\n");
    for &i in order {
        match &batch[i].change {
            Change::Create {
                principal: p,
                id,
                name,
                tag,
            } => {
                sql.push_str("WITH r AS (INSERT INTO plants (principal, id, name, tag) VALUES (");
                principal(&mut sql, p);
                let _ = write!(sql, ", {id}, ");
                hex(&mut sql, name.as_bytes());
                sql.push_str(", ");
                match tag {
                    Some(t) => hex(&mut sql, t.as_bytes()),
                    None => sql.push_str("NULL"),
                }
                sql.push_str(") ON CONFLICT DO NOTHING RETURNING 1");
                sql.push_str(RECORD);
            }
            Change::Delete { principal: p, id } => {
                sql.push_str("WITH r AS (DELETE FROM plants WHERE principal = ");
                principal(&mut sql, p);
                let _ = write!(sql, " AND id = {id} RETURNING 1");
                sql.push_str(RECORD);
            }
            Change::Probe => sql.push_str(PROBE),
        }
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

/// The probe's two statements: a row written and removed.
const PROBE: &str = "INSERT INTO plants VALUES ('', 0, '', NULL) ON CONFLICT DO NOTHING;
DELETE FROM plants WHERE principal = '';\n";

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
            (Change::Create { .. }, true) => Outcome::Created,
            (Change::Create { .. }, false) => Outcome::Conflict,
            (Change::Delete { .. }, true) | (Change::Probe, _) => Outcome::Deleted,
            (Change::Delete { .. }, false) => Outcome::NotFound,
        });
    }
    Ok(out
        .into_iter()
        .map(|o| o.expect("every change has an outcome"))
        .collect())
}
