//! The schema's migrations: `plants.sql` (SQLite's, embedded) and each backend's
//! dialect, split at their `-- version N` lines.

use crate::store::seam::{StoreError, StoreResult};

/// The schema and its migrations (see the comment at its top).
pub const SCHEMA: &str = include_str!("../../plants.sql");

/// The schema version this binary writes.
pub fn schema_version() -> i64 {
    migrations(SCHEMA).last().map_or(0, |m| m.0)
}

/// The migrations of a schema file: (version, SQL) in file order.
pub fn migrations(schema: &str) -> Vec<(i64, String)> {
    let mut out: Vec<(i64, String)> = Vec::new();
    for line in schema.lines() {
        if let Some(v) = line.strip_prefix("-- version ") {
            out.push((
                v.trim().parse().expect("bad version line in the schema"),
                String::new(),
            ));
        } else if let Some((_, sql)) = out.last_mut() {
            sql.push_str(line);
            sql.push('\n');
        }
    }
    out
}

/// Refuses a database whose schema is newer than this binary's; `Some(current)` when
/// migrations are due.
pub fn due(current: i64) -> StoreResult<Option<i64>> {
    let latest = schema_version();
    if current > latest {
        return Err(StoreError(format!(
            "the database has schema version {current}, newer than this binary's {latest}"
        )));
    }
    Ok((current < latest).then_some(current))
}

/// Asserts that a schema's migrations are numbered 1, 2, … up to `schema_version()`, and
/// that each has a statement besides its comments, or says why this dialect has none.
#[cfg(test)]
pub fn assert_numbered(schema: &str) {
    let versions: Vec<i64> = migrations(schema).iter().map(|m| m.0).collect();
    assert_eq!(versions, (1..=schema_version()).collect::<Vec<_>>());
    assert!(migrations(schema).iter().all(|m| {
        m.1.contains("-- Nothing on SQLite")
            || m.1.contains("-- Nothing on PostgreSQL")
            || m.1
                .lines()
                .any(|l| !l.trim().is_empty() && !l.trim_start().starts_with("--"))
    }));
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_newer_schema_is_refused_and_an_older_one_is_due() {
        use super::*;
        assert!(due(schema_version() + 1).is_err());
        assert_eq!(due(schema_version()).unwrap(), None);
        assert_eq!(due(1).unwrap(), Some(1));
    }
}
