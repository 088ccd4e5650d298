//! The guard on the database file: the file a server opened is the file at its path.

use crate::store::location::Location;
use crate::store::seam::{StoreError, StoreResult};
use crate::store::sqlite::held::{self, Held, beside};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The database file as it was opened. If the path stops naming that file (deleted,
/// moved, replaced), SQLite would go on writing to the orphaned file and every write
/// acknowledged from then on would be lost at the next start; so writes are refused and
/// /healthz fails instead, until the same file is back at the path. The file's header is
/// read too (through the process's held descriptor, `held.rs`), which catches the same
/// file written over in place (`cp other.db live.db`) by a file in rollback-journal mode
/// (every backup), by another program's, by one of another page size, or by another
/// plant-store file (its identity differs: `IDENTITY`): SQLite would checkpoint its WAL
/// into it and corrupt it. Written over is for good (`Held::overwritten`): nothing of
/// this server's is written into that file again, not even at its close (`writer.rs`).
#[derive(Debug, Clone)]
pub struct FileIdentity {
    pub path: PathBuf,
    /// The file, held open while this server's connections are: never opened and closed
    /// beside them, which would drop the process's POSIX locks on it, SQLite's included.
    held: Arc<Held>,
    /// The page size in the header when opened.
    page_size: u32,
    /// The file's identity (`IDENTITY`), as the writer's connection read it when opened.
    identity: u32,
}

/// Where a database file keeps its identity: SQLite's `application_id` (the header's 4
/// bytes at offset 68), a random number other than 0 set by the first writer of this
/// version that opens the file (`migrate`), and kept by every copy of it (`backup`,
/// snapshots, compaction). A file written over in place by another plant-store file has
/// another one. Read through SQLite with `PRAGMA application_id`.
pub const IDENTITY: &str = "application_id";

/// What `FileIdentity::verify` found wrong.
#[derive(Debug, PartialEq, Eq)]
pub enum Lost {
    /// The path names another file, or none: ours may be back at it later.
    Replaced,
    /// The file was written over in place: its content is no longer ours, for good.
    Overwritten,
}

impl FileIdentity {
    /// After the writer's connection switched the file to WAL and gave it its identity.
    pub fn of(
        location: &Location,
        held: Option<&Arc<Held>>,
        identity: u32,
    ) -> StoreResult<Option<FileIdentity>> {
        match (location, held) {
            (Location::File(path), Some(held)) => {
                let page_size = header(held.file())
                    .ok_or_else(|| StoreError(format!("{}: no SQLite header", path.display())))?
                    .0;
                let file = FileIdentity {
                    path: path.clone(),
                    held: held.clone(),
                    page_size,
                    identity,
                };
                // The path still names the file opened (not renamed over while it was).
                file.verify()?;
                Ok(Some(file))
            }
            _ => Ok(None),
        }
    }

    /// The held file, to keep it open as long as a connection of this server.
    pub fn held(&self) -> Arc<Held> {
        self.held.clone()
    }

    pub fn verify(&self) -> StoreResult<()> {
        self.lost().map_err(|lost| {
            StoreError(match lost {
                Lost::Replaced => format!(
                    "the database file {} was removed or replaced while in use",
                    self.path.display()
                ),
                Lost::Overwritten => format!(
                    "the database file {} was written over by another program while in use (its header is no longer this database's)",
                    self.path.display()
                ),
            })
        })
    }

    /// Once this server's writer has closed on a file written over in place: its `-wal`,
    /// which belongs to what was there before, moved to `FILE-wal.not-applied-SECONDS`
    /// (seconds since the Unix epoch), so that the next start does not apply it to the new
    /// content; left where it is while another process or server has the file open.
    pub fn set_wal_aside(&self) {
        let wal = beside(&self.path, "-wal");
        if !wal.exists() {
            return;
        }
        if let Some(holder) = self.held.others(1) {
            log::warn!(
                "{} was not moved aside ({holder}): move it (and the -shm) before the next start",
                wal.display()
            );
            return;
        }
        let secs = crate::ops::clock::system_now();
        let aside = beside(&self.path, &format!("-wal.not-applied-{secs}"));
        match std::fs::rename(&wal, &aside) {
            Ok(()) => log::warn!(
                "{} held this database's last writes, for the file that was written over: moved aside to {}, so that the next start does not apply it to the new content",
                wal.display(),
                aside.display()
            ),
            Err(e) => log::warn!("cannot move {} aside: {e}", wal.display()),
        }
    }

    /// Whether the path names the file opened, and its header is still this database's
    /// (page size, WAL mode, identity: 0 only until the identity first reached the disk).
    pub fn lost(&self) -> Result<(), Lost> {
        use std::sync::atomic::Ordering::SeqCst;
        if self.held.overwritten.load(SeqCst) {
            return Err(Lost::Overwritten);
        }
        if dev_ino(&self.path).ok() != Some(self.held.key()) {
            return Err(Lost::Replaced);
        }
        let on_disk = &self.held.identity_on_disk;
        match header(self.held.file()) {
            Some((page, id)) if page == self.page_size && id == self.identity => {
                on_disk.store(true, SeqCst);
                Ok(())
            }
            Some((page, 0)) if page == self.page_size && !on_disk.load(SeqCst) => Ok(()),
            _ => {
                self.held.overwritten.store(true, SeqCst);
                Err(Lost::Overwritten)
            }
        }
    }
}

/// The held descriptor of a database file (`held.rs`), opened if this process holds none;
/// `create`: the file is created (`PRIVATE_MODE`) if missing. Taken before the first
/// SQLite connection on the file, and kept until after the last.
pub fn hold(path: &Path, create: bool) -> StoreResult<Arc<Held>> {
    let open = |p: &Path| {
        if create {
            let created = create_private_file(p)
                .map_err(|e| std::io::Error::new(e.kind(), format!("cannot create it: {e}")))?;
            if let Some(f) = created {
                return Ok(f);
            }
        }
        std::fs::File::open(p)
    };
    held::hold(path, open).map_err(|e| StoreError(format!("{}: {e}", path.display())))
}

/// The page size and the identity (`IDENTITY`) in a WAL-mode SQLite header at the start
/// of `file`; `None` when the header is not one (another file, rollback-journal mode, too
/// short).
fn header(file: &std::fs::File) -> Option<(u32, u32)> {
    use std::os::unix::fs::FileExt;
    let mut h = [0u8; 72];
    file.read_exact_at(&mut h, 0).ok()?;
    if &h[..16] != MAGIC || h[18] != 2 || h[19] != 2 {
        return None;
    }
    let page = match u32::from(u16::from_be_bytes([h[16], h[17]])) {
        1 => 65536,
        p => p,
    };
    Some((page, u32::from_be_bytes([h[68], h[69], h[70], h[71]])))
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
    create_private_file(path)
        .map(drop)
        .map_err(|e| StoreError(format!("cannot create {}: {e}", path.display())))
}

/// As `create_private`: the file created, `None` when it existed.
fn create_private_file(path: &Path) -> std::io::Result<Option<std::fs::File>> {
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    let created = std::fs::OpenOptions::new()
        // Read too: the file created may become the held one, whose header is read.
        .read(true)
        .write(true)
        .create_new(true)
        .mode(PRIVATE_MODE)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path);
    match created {
        // The umask may have taken bits the mode asked for; never more than it gives.
        Ok(f) => {
            f.set_permissions(std::fs::Permissions::from_mode(PRIVATE_MODE))?;
            Ok(Some(f))
        }
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(None),
        Err(e) => Err(e),
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
/// database of the same page size (docs/design.md, "What the guard cannot see").
///
/// The database's header is read through the held descriptor: this process may have
/// SQLite connections on the file (another server), and closing a descriptor of a file
/// drops every POSIX lock the process holds on it, SQLite's too. The `-wal` is opened and
/// closed: SQLite takes no lock on it (WAL mode locks the database file and the `-shm`).
pub fn check_wal(path: &Path, held: &Held) -> StoreResult<()> {
    use std::io::Read;
    use std::os::unix::fs::FileExt;
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
    match held.file().read_exact_at(&mut db, 0) {
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
