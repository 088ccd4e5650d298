//! `plant-store backup FILE`: a consistent copy of the database, taken while a server
//! runs and writes on it. SQLite writes the copy (`VACUUM INTO`, one read transaction, so
//! one snapshot) under a temporary name in the same directory; it is fsynced, renamed to
//! FILE, and the directory fsynced, so a half-written backup never has the final name.
//! The live database is only read.
//!
//! Every file it makes is 0600 (the copy holds the webhook signing secrets): the partial
//! file is created by this process with `O_CREAT|O_EXCL|O_NOFOLLOW` before SQLite writes
//! into it, so no file or symlink put at its name beforehand is followed or reused. On
//! every exit but success the partial file and its `-journal` are removed, on SIGINT,
//! SIGTERM and SIGHUP too (the copy is interrupted, then cleaned up).

use crate::store::{self, Location};
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

/// The companions SQLite keeps beside a database file: a backup never takes their names.
const COMPANIONS: [&str; 4] = ["", "-wal", "-shm", "-journal"];

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
    // By name too: `live.db-wal` may not exist now (no server runs), and the next open
    // of the database would delete a backup written there.
    let by_name = |f: &Path| match (by_directory(f), by_directory(&target)) {
        (Some(a), Some(b)) => a == b,
        _ => false,
    };
    if let Some(suffix) = COMPANIONS.iter().find(|s| {
        let f = beside(&source, s);
        same(&f, &target) || by_name(&f)
    }) {
        let what = if suffix.is_empty() {
            "the live database".to_owned()
        } else {
            format!("the live database's {suffix} file")
        };
        return Err(format!("{to} is {what}; back it up elsewhere"));
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
    let stop = Arc::new(AtomicBool::new(false));
    for signal in [
        signal_hook::consts::SIGINT,
        signal_hook::consts::SIGTERM,
        signal_hook::consts::SIGHUP,
    ] {
        signal_hook::flag::register(signal, stop.clone())
            .map_err(|e| format!("cannot handle signals: {e}"))?;
    }
    let mut litter = Litter(vec![beside(&partial, "-journal")]);
    store::create_private(&partial).map_err(|e| format!("cannot create the backup: {e}"))?;
    litter.0.push(partial.clone());
    store::backup_into(db, &partial, &stop).map_err(|e| {
        if stop.load(std::sync::atomic::Ordering::Relaxed) {
            "interrupted by a signal; the partial copy is removed".to_owned()
        } else {
            format!("cannot copy the database: {e}")
        }
    })?;
    sync(&partial)?;
    std::fs::rename(&partial, target).map_err(|e| format!("cannot rename: {e}"))?;
    litter.0.pop();
    sync(dir)?;
    let bytes = std::fs::metadata(target).map_or(0, |m| m.len());
    println!(
        "backup of {db} written to {} ({bytes} bytes)",
        target.display()
    );
    Ok(())
}

/// Files removed when dropped: the backup's partial file and its `-journal`, on every
/// way out of `run` (an error, or a signal, which ends the copy with an error).
struct Litter(Vec<PathBuf>);

impl Drop for Litter {
    fn drop(&mut self) {
        for f in &self.0 {
            let _ = std::fs::remove_file(f);
        }
    }
}

/// A file as its directory's real path and its own name (`None` when the directory
/// cannot be resolved).
fn by_directory(file: &Path) -> Option<(PathBuf, std::ffi::OsString)> {
    let dir = directory_of(file).canonicalize().ok()?;
    Some((dir, file.file_name()?.to_owned()))
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

use store::beside;
