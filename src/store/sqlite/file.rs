//! The guard on the database file: the file a server opened is the file at its path.

use crate::store::location::Location;
use crate::store::seam::{StoreError, StoreResult};
use std::path::{Path, PathBuf};

/// The database file as it was opened. If the path stops naming that file (deleted,
/// moved, replaced), SQLite would go on writing to the orphaned file and every write
/// acknowledged from then on would be lost at the next start; so writes are refused and
/// /healthz fails instead, until the same file is back at the path.
#[derive(Debug, Clone)]
pub struct FileIdentity {
    pub path: PathBuf,
    dev_ino: (u64, u64),
}

impl FileIdentity {
    pub fn of(location: &Location) -> StoreResult<Option<FileIdentity>> {
        match location {
            Location::File(path) => {
                let dev_ino =
                    dev_ino(path).map_err(|e| StoreError(format!("{}: {e}", path.display())))?;
                Ok(Some(FileIdentity {
                    path: path.clone(),
                    dev_ino,
                }))
            }
            _ => Ok(None),
        }
    }

    pub fn verify(&self) -> StoreResult<()> {
        match dev_ino(&self.path) {
            Ok(now) if now == self.dev_ino => Ok(()),
            _ => Err(StoreError(format!(
                "the database file {} was removed or replaced while in use",
                self.path.display()
            ))),
        }
    }
}

fn dev_ino(path: &Path) -> std::io::Result<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(path)?;
    Ok((m.dev(), m.ino()))
}
