//! `plant-store backup FILE`: a consistent copy of the database, taken while a server
//! runs and writes on it. SQLite writes the copy (`VACUUM INTO`, one read transaction, so
//! one snapshot) under a temporary name in the same directory; it is fsynced, renamed to
//! FILE, and the directory fsynced, so a half-written backup never has the final name.
//! The live database is only read.

use crate::store::{self, Location};
use std::fs::File;
use std::path::{Path, PathBuf};

/// Checks the command before anything is written: the source is a database file, the
/// target's directory exists, the target is not the live database, and an existing
/// target is replaced only with `--force`. Errors here are usage errors (exit status 2).
pub fn check(db: &Location, to: &str, force: bool) -> Result<PathBuf, String> {
    let source = match db {
        Location::File(source) => source.clone(),
        Location::Memory(_) => return Err("`backup` needs a database file, not :memory:".into()),
        Location::Postgres(_) => {
            return Err(
                "`backup` copies SQLite files; for PostgreSQL use its own tools (pg_dump, or a base backup)"
                    .into(),
            );
        }
    };
    let target = PathBuf::from(to);
    let dir = directory_of(&target);
    if !dir.is_dir() {
        return Err(format!("no directory {} for the backup", dir.display()));
    }
    if target.is_dir() {
        return Err(format!("{to} is a directory; name the backup file"));
    }
    let same = |a: &Path, b: &Path| match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    };
    let live = [
        source.clone(),
        beside(&source, "-wal"),
        beside(&source, "-shm"),
    ];
    if live.iter().any(|f| same(f, &target)) {
        return Err(format!("{to} is the live database; back it up elsewhere"));
    }
    if target.exists() && !force {
        return Err(format!("{to} exists; add --force to replace it"));
    }
    Ok(target)
}

/// Writes the backup (after `check`).
pub fn run(db: &Location, target: &Path) -> Result<(), String> {
    let dir = directory_of(target);
    let name = target
        .file_name()
        .map_or("backup".into(), |n| n.to_string_lossy());
    let partial = dir.join(format!(".{name}.partial-{}", std::process::id()));
    let _ = std::fs::remove_file(&partial);
    let written = store::backup_into(db, &partial)
        .map_err(|e| format!("cannot copy the database: {e}"))
        .and_then(|()| sync(&partial))
        .and_then(|()| std::fs::rename(&partial, target).map_err(|e| format!("cannot rename: {e}")))
        .and_then(|()| sync(dir));
    if written.is_err() {
        let _ = std::fs::remove_file(&partial);
    }
    written?;
    let bytes = std::fs::metadata(target).map_or(0, |m| m.len());
    println!(
        "backup of {db} written to {} ({bytes} bytes)",
        target.display()
    );
    Ok(())
}

/// The directory a file is in (`.` for a bare name).
fn directory_of(file: &Path) -> &Path {
    match file.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

/// Flushes a file (or a directory's entries) to disk.
fn sync(path: &Path) -> Result<(), String> {
    File::open(path)
        .and_then(|f| f.sync_all())
        .map_err(|e| format!("cannot sync {}: {e}", path.display()))
}

/// The file whose name is `path`'s with `suffix` added (SQLite's `-wal` and `-shm`).
fn beside(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}
