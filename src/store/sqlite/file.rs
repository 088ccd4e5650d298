//! The guard on the database file: the file a server opened is the file at its path.

use crate::store::location::Location;
use crate::store::seam::{StoreError, StoreResult};
use std::path::{Path, PathBuf};

/// The database file as it was opened. If the path stops naming that file (deleted,
/// moved, replaced), SQLite would go on writing to the orphaned file and every write
/// acknowledged from then on would be lost at the next start; so writes are refused and
/// /healthz fails instead, until the same file is back at the path. The file's header is
/// read too (through a descriptor held for the process's life), which catches the same
/// file written over in place (`cp backup.db live.db`) by a file in rollback-journal mode
/// (every backup), by another program's, or by one of another page size: SQLite would
/// checkpoint its WAL into it and corrupt it.
#[derive(Debug, Clone)]
pub struct FileIdentity {
    pub path: PathBuf,
    dev_ino: (u64, u64),
    /// The file, opened once and never closed: closing a descriptor of a file drops the
    /// process's POSIX locks on it, SQLite's included.
    held: &'static std::fs::File,
    /// The page size in the header when opened.
    page_size: u32,
}

impl FileIdentity {
    /// After the writer's connection switched the file to WAL.
    pub fn of(location: &Location) -> StoreResult<Option<FileIdentity>> {
        match location {
            Location::File(path) => {
                let err = |e: std::io::Error| StoreError(format!("{}: {e}", path.display()));
                let dev_ino = dev_ino(path).map_err(err)?;
                // Opened while SQLite holds its own: never closed (see `held`).
                let held: &'static std::fs::File =
                    Box::leak(Box::new(std::fs::File::open(path).map_err(err)?));
                let page_size = header(held)
                    .ok_or_else(|| StoreError(format!("{}: no SQLite header", path.display())))?;
                Ok(Some(FileIdentity {
                    path: path.clone(),
                    dev_ino,
                    held,
                    page_size,
                }))
            }
            _ => Ok(None),
        }
    }

    pub fn verify(&self) -> StoreResult<()> {
        match dev_ino(&self.path) {
            Ok(now) if now == self.dev_ino => {}
            _ => {
                return Err(StoreError(format!(
                    "the database file {} was removed or replaced while in use",
                    self.path.display()
                )));
            }
        }
        match header(self.held) {
            Some(page) if page == self.page_size => Ok(()),
            _ => Err(StoreError(format!(
                "the database file {} was written over by another program while in use (its header is no longer this database's)",
                self.path.display()
            ))),
        }
    }
}

/// The page size in a WAL-mode SQLite header at the start of `file`; `None` when the
/// header is not one (another file, rollback-journal mode, too short).
fn header(file: &std::fs::File) -> Option<u32> {
    use std::os::unix::fs::FileExt;
    let mut h = [0u8; 20];
    file.read_exact_at(&mut h, 0).ok()?;
    if &h[..16] != MAGIC || h[18] != 2 || h[19] != 2 {
        return None;
    }
    Some(match u32::from(u16::from_be_bytes([h[16], h[17]])) {
        1 => 65536,
        p => p,
    })
}

fn dev_ino(path: &Path) -> std::io::Result<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(path)?;
    Ok((m.dev(), m.ino()))
}

/// The mode of every file the program creates: the database (and so its `-wal` and
/// `-shm`, which SQLite creates with the database's mode), and every backup. They hold
/// the webhook signing secrets.
pub const PRIVATE_MODE: u32 = 0o600;

/// Creates `path` empty with `PRIVATE_MODE` unless it exists, before SQLite opens it: a
/// file SQLite created itself would get 0644 under the usual umask, and its `-wal` and
/// `-shm` the same.
pub fn create_private(path: &Path) -> StoreResult<()> {
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    let created = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(PRIVATE_MODE)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path);
    match created {
        // The umask may have taken bits the mode asked for; never more than it gives.
        Ok(f) => f
            .set_permissions(std::fs::Permissions::from_mode(PRIVATE_MODE))
            .map_err(|e| StoreError(format!("{}: {e}", path.display()))),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(StoreError(format!("cannot create {}: {e}", path.display()))),
    }
}

/// The SQLite file header's first bytes.
const MAGIC: &[u8; 16] = b"SQLite format 3\0";
/// The WAL file header's magic numbers (big- or little-endian checksums).
const WAL_MAGIC: [u32; 2] = [0x377f_0682, 0x377f_0683];

/// Refuses to open a database beside a `-wal` that cannot be its own, before SQLite
/// replays it: SQLite checks a WAL's frames against the WAL's own header only, never
/// against the database, so a log left by the file that used to be at this path would be
/// applied to the one there now. Detected: a database in rollback-journal mode (a backup,
/// a `VACUUM INTO` copy, another program's file: none of these was written through a
/// WAL), or one whose page size is not the WAL's. Not detected: a copy of a WAL-mode
/// database of the same page size (docs/operating.md, "Known limits").
///
/// Called before this process opens its first SQLite connection on the file: closing a
/// descriptor of a file drops every POSIX lock the process holds on it, SQLite's too.
pub fn check_wal(path: &Path) -> StoreResult<()> {
    use std::io::Read;
    let wal = beside(path, "-wal");
    let mut head = [0u8; 32];
    match std::fs::File::open(&wal).and_then(|mut f| f.read_exact(&mut head)) {
        Ok(()) => {}
        // No WAL, or one without a whole header: SQLite ignores (and resets) it.
        Err(_) => return Ok(()),
    }
    let be = |o: usize| u32::from_be_bytes(head[o..o + 4].try_into().unwrap());
    if !WAL_MAGIC.contains(&be(0)) {
        return Ok(());
    }
    let wal_page = be(8);
    let mut db = [0u8; 100];
    match std::fs::File::open(path).and_then(|mut f| f.read_exact(&mut db)) {
        Ok(()) => {}
        // An empty (new) or short file: a WAL beside it belongs to no database of ours.
        Err(_) => return Err(foreign_wal(path, &wal, "the database file has no header")),
    }
    if &db[..16] != MAGIC {
        return Err(foreign_wal(path, &wal, "the database file is not SQLite's"));
    }
    if db[18] != 2 || db[19] != 2 {
        return Err(foreign_wal(
            path,
            &wal,
            "the database file is in rollback-journal mode, so no WAL was written for it",
        ));
    }
    let page = match u32::from(u16::from_be_bytes([db[16], db[17]])) {
        1 => 65536,
        p => p,
    };
    if page != wal_page {
        return Err(foreign_wal(
            path,
            &wal,
            &format!("its page size is {page}, the WAL's {wal_page}"),
        ));
    }
    Ok(())
}

fn foreign_wal(path: &Path, wal: &Path, why: &str) -> StoreError {
    StoreError(format!(
        "{} is not the write-ahead log of {} ({why}): it was left by another file at this path, and SQLite would apply it to this one. Move it aside (and {}-shm) if this file is the one to open",
        wal.display(),
        path.display(),
        path.display()
    ))
}

/// The file whose name is `path`'s with `suffix` added (SQLite's `-wal`, `-shm` and
/// `-journal`).
pub fn beside(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

/// Says, once at start, that a database file made before files were 0600 (or by hand)
/// can be read by others: it holds the webhook signing secrets.
pub fn warn_if_readable_by_others(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    if let Ok(m) = std::fs::metadata(path) {
        let mode = m.permissions().mode() & 0o777;
        if mode & 0o077 != 0 {
            log::warn!(
                "the database file {} has mode {mode:03o}: others may read it, and it holds the webhook signing secrets; `chmod 600` it (and its -wal and -shm)",
                path.display()
            );
        }
    }
}
