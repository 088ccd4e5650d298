//! The database files this process has open, one descriptor each: the one deliberate
//! process-wide thing of the library (docs/embedding.md, "What is process-wide").
//!
//! POSIX record locks belong to a process and a file, not to a descriptor: closing ANY
//! descriptor of a file drops every lock the process holds on it, SQLite's included. A
//! second server on the same file in one process (or an in-process `token …` command)
//! that opened the file to read its header and closed it again would silently drop the
//! locks of the server already running there; another process could then take the
//! exclusive lock and delete its `-wal`. So the kernel's per-process locks are mirrored
//! here, as SQLite's own unix VFS mirrors them (its per-inode table): the file is opened
//! once per process, keyed by (device, inode), and every header read goes through that
//! descriptor (`pread`), never through an open and a close.
//!
//! Whoever owns SQLite connections on a file holds a `Held` (an `Arc`) for at least as
//! long as its last connection: declared after the connection in the owning struct (so
//! dropped after it), or as a local before it. When the last `Arc` goes, no SQLite
//! connection of this process is open on the file, and closing the descriptor is safe.
//! The same goes for the `-shm` file, whose descriptor (`others`' probe) is kept as long.
//!
//! A `Held` also knows who else has the file open (`others`): the servers of this process
//! that serve it (`Serving`), and any other process with a WAL-mode connection on it.

use std::collections::BTreeMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, Weak};

/// (device, inode): the key of the kernel's locks.
type Key = (u64, u64);

/// A database file held open by this process; see the module's comment.
#[derive(Debug)]
pub struct Held {
    /// Always `Some` but while being closed (`drop`).
    file: Option<File>,
    key: Key,
    /// The path it was first held by: where its `-shm` is.
    path: PathBuf,
    /// The servers of this process on the file (`Serving`).
    servers: AtomicUsize,
    /// The `-shm` file, opened by the first `others` that found one, and kept (never
    /// closed while SQLite may hold locks on it: the module's comment).
    shm: Mutex<Option<File>>,
    /// The file guard's findings (`file.rs`): the file was written over in place (for
    /// good: its content is no longer ours); the file's identity has been seen on disk.
    pub(super) overwritten: AtomicBool,
    pub(super) identity_on_disk: AtomicBool,
}

impl Held {
    pub fn file(&self) -> &File {
        self.file
            .as_ref()
            .expect("a held file is open until dropped")
    }

    /// The (device, inode) of the file held.
    pub fn key(&self) -> Key {
        self.key
    }

    /// Counts a server of this process on the file until the `Serving` is dropped;
    /// `alone`: only if no other server of this process, and no other process, has it
    /// open (else who does).
    pub fn serve(self: &Arc<Held>, alone: bool) -> Result<Serving, Holder> {
        // One at a time: two servers starting alone on one file do not both pass.
        static STARTING: Mutex<()> = Mutex::new(());
        let _one = STARTING.lock().unwrap_or_else(|e| e.into_inner());
        if alone && let Some(holder) = self.others(0) {
            return Err(holder);
        }
        self.servers.fetch_add(1, Ordering::SeqCst);
        Ok(Serving(self.clone()))
    }

    /// Who else has the file open beside `mine` servers of this process: another server
    /// of this process, or another process with a WAL-mode connection on it (SQLite's
    /// unix VFS holds a shared lock on the `-shm` file's DMS byte while a connection has
    /// it open: `F_GETLK` names the process, and never reports this process's own
    /// locks). A failed probe counts as another holder: better a refusal than a file
    /// shared unknowingly.
    pub fn others(&self, mine: usize) -> Option<Holder> {
        if self.servers.load(Ordering::SeqCst) > mine {
            return Some(Holder::Server);
        }
        let mut shm = self.shm.lock().unwrap_or_else(|e| e.into_inner());
        let path = beside(&self.path, "-shm");
        // Opened again only when the one kept is no longer the file at the path (SQLite
        // removed it at a clean close and made another): closing the old one drops no
        // lock of SQLite's, whose descriptor is of the new file.
        if shm.as_ref().is_none_or(|f| !same_file(f, &path)) {
            match File::open(&path) {
                Ok(f) => *shm = Some(f),
                // No `-shm`: no connection in WAL mode has the file open.
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
                Err(e) => return Some(Holder::Unknown(e.to_string())),
            }
        }
        match shm.as_ref().map(dms_holder) {
            Some(Ok(pid)) => pid.map(Holder::Process),
            Some(Err(e)) => Some(Holder::Unknown(e.to_string())),
            None => None,
        }
    }
}

/// Who else has a database file open (`Held::others`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Holder {
    /// Another server of this process.
    Server,
    /// Another process, by its id.
    Process(i32),
    /// The probe failed (its error).
    Unknown(String),
}

impl std::fmt::Display for Holder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Holder::Server => f.write_str("another server of this process has it open"),
            Holder::Process(pid) => write!(f, "process {pid} has it open"),
            Holder::Unknown(e) => write!(f, "who has it open cannot be told ({e})"),
        }
    }
}

/// A server of this process on a held file (`Held::serve`): counted until dropped.
#[derive(Debug)]
pub struct Serving(Arc<Held>);

impl Drop for Serving {
    fn drop(&mut self) {
        self.0.servers.fetch_sub(1, Ordering::SeqCst);
    }
}

/// SQLite's unix VFS (os_unix.c): the `-shm` lock bytes start at `UNIX_SHM_BASE`,
/// (22 + `SQLITE_SHM_NLOCK`) * 4 = 120, and after the 8 locks comes the "deadman switch"
/// (`UNIX_SHM_DMS`, 128), on which every connection that has the `-shm` open holds a
/// shared lock (the first takes it exclusive to initialise the file, then shares it).
const SHM_DMS_BYTE: i64 = 128;

/// The id of another process that holds a lock on the `-shm`'s DMS byte, if any.
fn dms_holder(shm: &File) -> std::io::Result<Option<i32>> {
    use std::os::unix::io::AsRawFd;
    // SAFETY: a zeroed `flock` is a valid value; `fcntl(F_GETLK)` only reads and writes it.
    let mut lock: libc::flock = unsafe { std::mem::zeroed() };
    lock.l_type = libc::F_WRLCK as _;
    lock.l_whence = libc::SEEK_SET as _;
    lock.l_start = SHM_DMS_BYTE as _;
    lock.l_len = 1;
    // SAFETY: the descriptor is open for the call; `lock` outlives it.
    if unsafe { libc::fcntl(shm.as_raw_fd(), libc::F_GETLK, &mut lock) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok((i32::from(lock.l_type) != libc::F_UNLCK).then_some(lock.l_pid))
}

/// Whether `file` is the file at `path` now.
fn same_file(file: &File, path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (file.metadata(), std::fs::metadata(path)) {
        (Ok(a), Ok(b)) => (a.dev(), a.ino()) == (b.dev(), b.ino()),
        _ => false,
    }
}

/// The file whose name is `path`'s with `suffix` added (SQLite's `-wal`, `-shm` and
/// `-journal`).
pub fn beside(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

/// Who has the file at `path` open, for a command of this process that holds none of it
/// (`compact`, the clean-up of a refused start): a server of this process, or another
/// process. Opens and closes the `-shm` only when this process holds nothing of the file
/// (so has no lock on it to lose).
pub fn holder_of(path: &Path) -> std::io::Result<Option<Holder>> {
    use std::os::unix::fs::MetadataExt;
    let open = registry();
    let m = match std::fs::metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    if open.contains_key(&(m.dev(), m.ino())) {
        return Ok(Some(Holder::Server));
    }
    match File::open(beside(path, "-shm")) {
        Ok(shm) => Ok(dms_holder(&shm)?.map(Holder::Process)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// The files held, and the signal that one was closed.
static OPEN: Mutex<BTreeMap<Key, Weak<Held>>> = Mutex::new(BTreeMap::new());
static CLOSED: Condvar = Condvar::new();

fn registry() -> MutexGuard<'static, BTreeMap<Key, Weak<Held>>> {
    OPEN.lock().unwrap_or_else(|e| e.into_inner())
}

impl Drop for Held {
    /// Closed under the registry's lock: a file found gone is opened anew only after the
    /// old descriptor is closed, so that this close cannot drop the new one's locks.
    fn drop(&mut self) {
        let mut open = registry();
        drop(self.file.take());
        drop(self.shm.get_mut().unwrap_or_else(|e| e.into_inner()).take());
        if open.get(&self.key).is_some_and(|w| w.strong_count() == 0) {
            open.remove(&self.key);
        }
        CLOSED.notify_all();
    }
}

/// The held file at `path`: this process's descriptor of it when it has one, else one
/// opened now, by `open` (which may create the file).
pub fn hold(
    path: &Path,
    open: impl Fn(&Path) -> std::io::Result<File>,
) -> std::io::Result<Arc<Held>> {
    use std::os::unix::fs::MetadataExt;
    let mut held = registry();
    loop {
        if let Ok(m) = std::fs::metadata(path) {
            match held.get(&(m.dev(), m.ino())).map(Weak::upgrade) {
                Some(Some(h)) => return Ok(h),
                // Being closed: wait until it is.
                Some(None) => {
                    held = CLOSED.wait(held).unwrap_or_else(|e| e.into_inner());
                    continue;
                }
                None => {}
            }
        }
        let file = open(path)?;
        let m = file.metadata()?;
        let key = (m.dev(), m.ino());
        match held.get(&key).map(Weak::upgrade) {
            None => {
                let h = Arc::new(Held {
                    file: Some(file),
                    key,
                    path: path.to_owned(),
                    servers: AtomicUsize::new(0),
                    shm: Mutex::new(None),
                    overwritten: AtomicBool::new(false),
                    identity_on_disk: AtomicBool::new(false),
                });
                held.insert(key, Arc::downgrade(&h));
                return Ok(h);
            }
            // The path named another file a moment ago, and now one this process holds
            // (replaced in between): this second descriptor is never closed, since closing
            // it would drop the locks. A race of renames, so a rare descriptor.
            Some(Some(h)) => {
                std::mem::forget(file);
                return Ok(h);
            }
            Some(None) => {
                std::mem::forget(file);
                held = CLOSED.wait(held).unwrap_or_else(|e| e.into_inner());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_descriptor_per_file_closed_with_the_last_holder() {
        let dir = std::env::temp_dir().join(format!("plant-store-held-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("a.db");
        std::fs::write(&path, b"x").unwrap();
        let link = dir.join("b.db");
        let _ = std::fs::remove_file(&link);
        std::fs::hard_link(&path, &link).unwrap();
        let a = hold(&path, |p| File::open(p)).unwrap();
        // Another name of the same file, and the same name again: the same descriptor.
        let b = hold(&link, |_| panic!("opened a file already held")).unwrap();
        let c = hold(&path, |_| panic!("opened a file already held")).unwrap();
        assert!(Arc::ptr_eq(&a, &b) && Arc::ptr_eq(&a, &c));
        drop((a, b));
        assert!(registry().contains_key(&c.key()));
        let key = c.key();
        drop(c);
        assert!(!registry().contains_key(&key), "the last holder closed it");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
