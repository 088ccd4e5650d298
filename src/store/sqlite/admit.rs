//! Which SQLite files are ours: checked before anything is written to a file, by every
//! command and by `serve`. A file of another application is refused untouched (not
//! switched to WAL, no table added, its `user_version` kept).

use crate::store::schema::{SCHEMA, migrations, schema_version};
use crate::store::seam::{StoreError, StoreResult};
use rusqlite::Connection;
use std::collections::BTreeSet;

/// A file's `user_version`, its tables, and how many schema objects it has.
pub type Shape = (i64, BTreeSet<String>, i64);

/// What a database file is to this binary.
#[derive(Debug, PartialEq, Eq)]
pub enum Found {
    /// Empty: no table, `user_version` 0. Ours to make.
    New,
    /// Ours, at this schema version (maybe older, or newer, than this binary's).
    Ours(i64),
}

/// What a file's `shape` says: ours when its tables are exactly those our schema has at
/// its `user_version`; `New` when it has none.
pub fn judge(shape: Shape, shown: &str) -> StoreResult<Found> {
    let (version, tables, objects) = shape;
    if version == 0 && objects == 0 {
        return Ok(Found::New);
    }
    let ours = tables_at(version.min(schema_version()));
    let matches = if version > schema_version() {
        // A newer release's file: it has at least today's tables.
        ours.is_subset(&tables)
    } else {
        version > 0 && tables == ours
    };
    if matches {
        return Ok(Found::Ours(version));
    }
    let names: Vec<&str> = tables.iter().map(String::as_str).collect();
    Err(StoreError(format!(
        "{shown} is not a plant-store database (user_version {version}, tables: {}); it was left untouched",
        if names.is_empty() {
            "none".to_owned()
        } else {
            names.join(", ")
        }
    )))
}

/// The file's `user_version`, its tables, and how many schema objects it has, read in
/// one transaction: one snapshot, whatever another process migrates meanwhile.
pub fn shape(conn: &Connection) -> rusqlite::Result<Shape> {
    conn.execute_batch("BEGIN")?;
    let read = read_shape(conn);
    // Only read: ending it either way is the same.
    let ended = conn.execute_batch("ROLLBACK");
    let read = read?;
    ended?;
    Ok(read)
}

fn read_shape(conn: &Connection) -> rusqlite::Result<Shape> {
    let version: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    let mut st = conn.prepare(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\'",
    )?;
    let tables: BTreeSet<String> = st.query_map([], |r| r.get(0))?.collect::<Result<_, _>>()?;
    let objects: i64 = conn.query_row("SELECT count(*) FROM sqlite_master", [], |r| r.get(0))?;
    Ok((version, tables, objects))
}

/// The tables our schema has at `version`.
fn tables_at(version: i64) -> BTreeSet<String> {
    migrations(SCHEMA)
        .into_iter()
        .filter(|m| m.0 <= version)
        .flat_map(|(_, sql)| {
            sql.lines()
                .filter_map(|l| l.trim().strip_prefix("CREATE TABLE "))
                .filter_map(|rest| rest.split_whitespace().next().map(str::to_owned))
                .collect::<Vec<_>>()
        })
        .collect()
}

/// For a command that only reads: the file must be ours and at this binary's version,
/// never migrated by it.
pub fn require_current(found: Found, shown: &str) -> StoreResult<()> {
    let latest = schema_version();
    match found {
        Found::Ours(v) if v == latest => Ok(()),
        Found::Ours(v) if v > latest => Err(StoreError(format!(
            "{shown} has schema version {v}, newer than this binary's {latest}"
        ))),
        Found::Ours(v) => Err(StoreError(format!(
            "{shown} has schema version {v}, older than this binary's {latest}, and a list does not migrate it: start `plant-store serve` on it (or run `token add`, `token revoke`, `webhook add`…), which migrates it, or use the release that wrote it"
        ))),
        Found::New => Err(StoreError(format!(
            "{shown} is an empty file, not a plant-store database"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn our_tables_by_version() {
        assert_eq!(tables_at(1), BTreeSet::from(["plants".to_owned()]));
        assert_eq!(tables_at(4).len(), 2);
        assert!(tables_at(schema_version()).contains("webhooks"));
    }

    #[test]
    fn a_foreign_file_is_refused_and_ours_is_known() {
        let conn = Connection::open_in_memory().unwrap();
        let inspect = |c: &Connection, shown: &str| judge(shape(c).unwrap(), shown);
        assert_eq!(inspect(&conn, "x").unwrap(), Found::New);
        conn.execute_batch(
            "CREATE TABLE plants (x); CREATE TABLE notes (y); PRAGMA user_version = 3",
        )
        .unwrap();
        let e = inspect(&conn, "x").unwrap_err().0;
        assert!(e.contains("not a plant-store database"), "{e}");
        conn.execute_batch("DROP TABLE notes; PRAGMA user_version = 1")
            .unwrap();
        assert_eq!(inspect(&conn, "x").unwrap(), Found::Ours(1));
        assert!(require_current(Found::Ours(1), "x").is_err());
        assert!(require_current(Found::Ours(schema_version()), "x").is_ok());
    }
}
