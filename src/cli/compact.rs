//! `plant-store compact`: a database file made with larger pages (an older version's
//! 4 KiB) written again with the small ones, atomically; refused while a server has the
//! file open (docs/device.md, "Flash wear"). A server rewrites a file under 64 MiB by
//! itself at its start; this is for the larger ones.

use crate::cli::failure::Failure;
use crate::store::{self, Compacted, Location};

pub fn run(db: &Location) -> Result<(), Failure> {
    match db {
        Location::File(_) => {}
        Location::Memory(_) => {
            return Err(Failure::Usage(
                "`compact` needs a database file, not :memory:".into(),
            ));
        }
        Location::Postgres(_) => {
            return Err(Failure::Usage(
                "`compact` rewrites SQLite files; PostgreSQL keeps its own pages".into(),
            ));
        }
    }
    match store::compact(db).map_err(|e| Failure::Failed(format!("cannot compact {db}: {e}")))? {
        Compacted::Done {
            page,
            before,
            after,
        } => println!(
            "{db}: rewritten with {}-byte pages (was {page}): {before} bytes before, {after} after",
            store::PAGE_SIZE
        ),
        Compacted::Already => println!(
            "{db}: its pages are no larger than {} bytes already; nothing to do",
            store::PAGE_SIZE
        ),
    }
    Ok(())
}
