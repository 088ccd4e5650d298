//! Compaction: a database file made with pages larger than `PAGE_SIZE` (an older
//! version's 4 KiB) written again with `PAGE_SIZE` pages, so that each commit writes a
//! quarter of the bytes (docs/device.md, "Flash wear"). At a server's start for a file
//! under `COMPACT_AT_START_BYTES` with room for it, by `plant-store compact` for any; never
//! while another process or server has the file open.
//!
//! Atomic: the copy is made beside the file and renamed over it, so a crash at any step
//! leaves the old file or the new one, each whole with every acknowledged write:
//! 1. an exclusive lock on the file (no other connection, in any process, may open it
//!    until it is released), and the WAL checkpointed into it and emptied;
//! 2. the copy (`VACUUM INTO`, with the small pages) into `FILE-compact`, created 0600,
//!    then given the file's owner and mode (a `compact` run as root leaves the service's
//!    file its own);
//! 3. the copy synced;
//! 4. renamed over the file, the directory synced. The old file's `-wal` is empty by then,
//!    so it is nothing to the new one (which is switched to WAL when next opened).
//!
//! A `FILE-compact` left by a crash is removed by the next compaction.

use crate::store::location::Location;
use crate::store::seam::{StoreError, StoreResult};
use crate::store::sqlite::file::create_private;
use crate::store::sqlite::held::{Held, beside};
use rusqlite::Connection;
use std::path::Path;
use std::sync::Arc;

/// The page size of a new database file, in bytes (docs/device.md, "Flash wear"). Each
/// page a commit changes is one frame of the write-ahead log (the page and 24 bytes): with
/// SQLite's default of 4 KiB a create's few changed pages cost about 24 KB written. A file
/// keeps the page size it was made with (a WAL file's cannot change without a `VACUUM`)
/// until it is compacted.
pub const PAGE_SIZE: i64 = 1024;

/// A file larger than this (with its `-wal`) is not rewritten at a server's start, which
/// would hold the start for a while: `plant-store compact` rewrites it.
pub const COMPACT_AT_START_BYTES: u64 = 64 * 1024 * 1024;

/// What a compaction found to do.
#[derive(Debug, PartialEq, Eq)]
pub enum Compacted {
    /// Written again with `PAGE_SIZE` pages: the page size it had, and its bytes before and after.
    Done { page: i64, before: u64, after: u64 },
    /// Its pages were no larger than `PAGE_SIZE` already.
    Already,
}

/// At a server's start, on the writer's connection `conn` to `path` (held by `held`, and
/// by this server only): rewrites the file when its pages are larger than `PAGE_SIZE`, it
/// is smaller than `COMPACT_AT_START_BYTES`, its file system has twice its size free, and
/// no other process or server has it open. True when it tried (rewritten or not, `conn`
/// may have changed its locking mode): the caller closes `conn` and opens the file again.
pub(super) fn at_start(conn: &Connection, path: &Path, held: &Arc<Held>) -> StoreResult<bool> {
    let page: i64 = conn.query_row("PRAGMA page_size", [], |r| r.get(0))?;
    if page <= PAGE_SIZE {
        return Ok(false);
    }
    let size = bytes(path);
    let keep = |why: String| {
        log::info!(
            "{} keeps its {page}-byte pages ({why}); `plant-store compact` rewrites it with {PAGE_SIZE}-byte pages, which cost less flash per write",
            path.display()
        );
        Ok(false)
    };
    if size >= COMPACT_AT_START_BYTES {
        return keep(format!(
            "{size} bytes, and only files under {COMPACT_AT_START_BYTES} are rewritten at start"
        ));
    }
    if let Err(e) = room(path, size) {
        return keep(e.0);
    }
    // This server's own hold on it (its `Serving` and the caller's) and nothing else of
    // this process's; no other process.
    if Arc::strong_count(held) > 2 {
        return keep("something else in this process has it open".into());
    }
    if let Some(holder) = held.others(1) {
        return keep(holder.to_string());
    }
    match rewrite(conn, path) {
        Ok(Compacted::Done { before, after, .. }) => log::info!(
            "{} rewritten with {PAGE_SIZE}-byte pages (was {page}): {before} bytes before, {after} after",
            path.display()
        ),
        Ok(Compacted::Already) => {}
        // Another connection came first (its lock): served as it is.
        Err(e) => {
            let _ = keep(format!("not rewritten now: {e}"));
        }
    }
    Ok(true)
}

/// `plant-store compact`: the file at `location` rewritten with `PAGE_SIZE` pages (and
/// migrated to this binary's schema first, as every command that writes does), whatever
/// its size, when its file system has room; refused while another process or server has
/// it open.
pub fn compact(location: &Location) -> StoreResult<Compacted> {
    let Location::File(path) = location else {
        return Err(StoreError("compact rewrites a SQLite file".into()));
    };
    // Held (and so checked) before this process opens a connection on it.
    let held = location
        .hold(false)?
        .ok_or_else(|| StoreError("compact rewrites a SQLite file".into()))?;
    if let Some(holder) = held.others(0) {
        return Err(StoreError(format!(
            "{} is in use ({holder}): stop the server first",
            path.display()
        )));
    }
    let conn = location
        .open_writer_with(|_| Ok(()))
        .map_err(|e| StoreError(e.to_string()))?;
    let page: i64 = conn.query_row("PRAGMA page_size", [], |r| r.get(0))?;
    if page > PAGE_SIZE {
        room(path, bytes(path))?;
    }
    let done = rewrite(&conn, path);
    // Closed before the held file (`held.rs`).
    drop(conn);
    drop(held);
    done
}

/// The file's bytes, its `-wal`'s included.
pub fn bytes(path: &Path) -> u64 {
    let len = |p: &Path| std::fs::metadata(p).map_or(0, |m| m.len());
    len(path) + len(&beside(path, "-wal"))
}

/// Fails unless the file system of `path` has twice `size` free (the copy, and room to
/// spare while both exist).
pub fn room(path: &Path, size: u64) -> StoreResult<()> {
    use std::os::unix::ffi::OsStrExt;
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let c = std::ffi::CString::new(dir.as_os_str().as_bytes())
        .map_err(|_| StoreError("the path holds a NUL byte".into()))?;
    // SAFETY: a zeroed `statvfs` is a valid value for the call to fill; `c` is a C string.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
        return Err(StoreError(format!(
            "cannot tell the free space of {}: {}",
            dir.display(),
            std::io::Error::last_os_error()
        )));
    }
    // `u64` here; `u32` on some 32-bit targets (armv7).
    #[allow(clippy::useless_conversion)]
    let free = u64::from(st.f_bavail).saturating_mul(u64::from(st.f_frsize));
    if free < size.saturating_mul(2) {
        return Err(StoreError(format!(
            "{free} bytes free beside it, and it needs twice its {size} bytes"
        )));
    }
    Ok(())
}

/// Rewrites the file at `path`, opened by `conn` (this process's only connection to it),
/// with `PAGE_SIZE` pages, in the module's steps. Fails, leaving the file as it was, when
/// another connection has the file open.
pub fn rewrite(conn: &Connection, path: &Path) -> StoreResult<Compacted> {
    let page: i64 = conn.query_row("PRAGMA page_size", [], |r| r.get(0))?;
    if page <= PAGE_SIZE {
        return Ok(Compacted::Already);
    }
    let before = bytes(path);
    let copy = beside(path, "-compact");
    for leftover in [beside(&copy, "-journal"), copy.clone()] {
        match std::fs::remove_file(&leftover) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(StoreError(format!("{}: {e}", leftover.display())));
            }
            _ => {}
        }
    }
    // 1. No other connection from here on (SQLite's exclusive lock, kept until `conn`
    // closes), and the whole database in the file.
    conn.pragma_update(None, "locking_mode", "EXCLUSIVE")?;
    conn.execute_batch("BEGIN EXCLUSIVE; COMMIT;")?;
    conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))?;
    pause("checkpointed");
    // 2. The copy, with the small pages.
    create_private(&copy)?;
    let copied = (|| -> StoreResult<()> {
        like(&copy, path)?;
        conn.pragma_update(None, "page_size", PAGE_SIZE)?;
        let name = copy
            .to_str()
            .ok_or_else(|| StoreError("the database's path is not UTF-8".into()))?;
        conn.execute("VACUUM INTO ?1", [name])?;
        pause("copied");
        // 3. Synced before it takes the name.
        sync(&copy)?;
        pause("synced");
        Ok(())
    })();
    if let Err(e) = copied {
        let _ = std::fs::remove_file(&copy);
        return Err(e);
    }
    // 4. In place of the old file.
    std::fs::rename(&copy, path).map_err(|e| StoreError(format!("cannot rename: {e}")))?;
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    sync(dir)?;
    pause("renamed");
    Ok(Compacted::Done {
        page,
        before,
        after: bytes(path),
    })
}

/// Gives `copy` the owner and the permission bits of the file at `path`, which it is to
/// replace.
fn like(copy: &Path, path: &Path) -> StoreResult<()> {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let meta =
        |p: &Path| std::fs::metadata(p).map_err(|e| StoreError(format!("{}: {e}", p.display())));
    let (was, now) = (meta(path)?, meta(copy)?);
    if (now.uid(), now.gid()) != (was.uid(), was.gid()) {
        std::os::unix::fs::chown(copy, Some(was.uid()), Some(was.gid())).map_err(|e| {
            StoreError(format!(
                "cannot give the copy the owner of {}: {e}",
                path.display()
            ))
        })?;
    }
    std::fs::set_permissions(copy, std::fs::Permissions::from_mode(was.mode() & 0o7777)).map_err(
        |e| {
            StoreError(format!(
                "cannot give the copy the mode of {}: {e}",
                path.display()
            ))
        },
    )
}

fn sync(path: &Path) -> StoreResult<()> {
    std::fs::File::open(path)
        .and_then(|f| f.sync_all())
        .map_err(|e| StoreError(format!("cannot sync {}: {e}", path.display())))
}

/// With the `fault-injection` feature: stops at `step` while `PLANT_STORE_FAULT_COMPACT`
/// names it, so that a test can kill the process there.
fn pause(step: &str) {
    #[cfg(feature = "fault-injection")]
    crate::store::fault::pause_compaction(step);
    #[cfg(not(feature = "fault-injection"))]
    let _ = step;
}
