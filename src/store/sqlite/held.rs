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

use std::collections::BTreeMap;
use std::fs::File;
use std::path::Path;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, Weak};

/// (device, inode): the key of the kernel's locks.
type Key = (u64, u64);

/// A database file held open by this process; see the module's comment.
#[derive(Debug)]
pub struct Held {
    /// Always `Some` but while being closed (`drop`).
    file: Option<File>,
    key: Key,
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
