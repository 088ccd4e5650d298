//! The files a server's start makes, removed again when the start is refused: nothing of
//! a refused start stays behind (docs/reference.md, "Start refusals").

use crate::store::location::Location;
use crate::store::sqlite::held::{self, beside};
use std::path::PathBuf;

/// The files of a database that did not exist when noted (the file, its `-wal`, its
/// `-shm`).
#[derive(Debug)]
pub struct NewFiles {
    /// The database file, when it is one.
    path: Option<PathBuf>,
    missing: Vec<PathBuf>,
}

impl NewFiles {
    /// Notes which of the database's files do not exist now.
    pub fn note(location: &Location) -> NewFiles {
        let Location::File(path) = location else {
            return NewFiles {
                path: None,
                missing: Vec::new(),
            };
        };
        let missing = [path.clone(), beside(path, "-wal"), beside(path, "-shm")]
            .into_iter()
            .filter(|f| std::fs::symlink_metadata(f).is_err())
            .collect();
        NewFiles {
            path: Some(path.clone()),
            missing,
        }
    }

    /// Removes the files noted missing that exist now, once the start's store is closed:
    /// unless another process or server has the database open (then they are its too).
    pub fn remove(self) {
        let Some(path) = self.path else { return };
        match held::holder_of(&path) {
            Ok(None) => {}
            Ok(Some(holder)) => {
                log::warn!("{} is left as it is: {holder}", path.display());
                return;
            }
            Err(e) => {
                log::warn!("{} is left as it is: {e}", path.display());
                return;
            }
        }
        for file in self.missing {
            match std::fs::remove_file(&file) {
                Ok(()) => log::debug!("removed {}, made by this refused start", file.display()),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => log::warn!("cannot remove {}: {e}", file.display()),
            }
        }
    }
}
