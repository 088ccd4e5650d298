//! The SQLite backend: the only module that holds rusqlite types.
//!
//! One writer connection (WAL, `synchronous=FULL`) on the writer thread; each worker owns
//! a read-only connection; in WAL mode readers and the writer never block each other.

use crate::ops::clock::Clock;
use crate::ops::random::Random;
use crate::store::location::Location;
use crate::store::schema::{SCHEMA, due, migrations, schema_version};
use crate::store::seam::{BUSY_TIMEOUT, Backend, Opened, Reads, StoreError, StoreResult};
use rusqlite::{Connection, OpenFlags};
use std::path::Path;
use std::sync::{Condvar, Mutex};
use std::time::Duration;

mod admit;
mod compact;
mod control;
mod file;
mod held;
mod made;
mod reads;
mod settle;
mod sweep;
mod terms;
mod token_admin;
mod webhooks;
mod writer;

pub use token_admin::tokens;
pub use webhooks::admin as webhooks;
pub use webhooks::{DUE_AT_MOST, LEASE_AT_MOST};

use crate::store::terms::{OpenError, Terms};
use file::FileIdentity;
use held::{Held, Serving};
use reads::{StreamReaders, WorkerReads};
use std::sync::Arc;
use writer::SqliteWriter;

/// Page cache of each read connection, in KiB (one per worker, so it adds up).
const READER_CACHE_KIB: u32 = 256;
/// Page cache of the write connection, in KiB.
const WRITER_CACHE_KIB: u32 = 256;
/// How large the write-ahead log grows before the commit that passes it copies its pages
/// into the database (SQLite's automatic checkpoint, `wal_autocheckpoint`, set in pages
/// from this), in bytes: 4 MiB, SQLite's default of 1000 pages of 4 KiB. A checkpoint
/// writes each page changed since the last one once, however often it changed: the fewer
/// checkpoints, the fewer bytes written (docs/device.md, "Flash wear").
const CHECKPOINT_WAL_BYTES: i64 = 4 * 1024 * 1024;
/// SQLite's lookaside on the connections that answer no request themselves (those lent
/// to long lists and to webhook deliveries: seven of a server's ten or so): a pool of
/// small blocks that SQLite allocates and touches whole when a connection opens, 48 KiB
/// by default, about half of an idle connection's memory. Here 8 blocks of 1,200 bytes
/// (about 9 KiB); what does not fit goes to malloc. The writer's and the workers'
/// connections keep SQLite's default: there the small pool cost about 4% of the CPU
/// time of a small GET (docs/device.md, "Memory").
const LOOKASIDE_SLOTS: i32 = 8;
const LOOKASIDE_SLOT_BYTES: i32 = 1200;
/// What the `-wal` file is cut back to when the log starts over after a checkpoint
/// (`journal_size_limit`), in bytes: twice what the automatic checkpoint lets it grow to
/// (`CHECKPOINT_WAL_BYTES`), so that steady writing never cuts it, while the size a long
/// read (a backup) or a burst left is given back.
const WAL_SIZE_LIMIT: i64 = 2 * CHECKPOINT_WAL_BYTES;

impl From<rusqlite::Error> for StoreError {
    fn from(e: rusqlite::Error) -> Self {
        StoreError(e.to_string())
    }
}

/// Opens and migrates the database for a server, on its start's `terms` (checked in the
/// migration's transaction: `terms.rs`): the writer owns the read-write connection, and
/// reads the server's `clock`; a seeded `random` is varied by the events the store holds.
/// A file made with larger pages than `PAGE_SIZE` is rewritten with them first when it
/// may be (`compact.rs`), then opened again.
pub fn open(
    location: &Location,
    clock: Arc<Clock>,
    random: &Random,
    terms: Terms,
) -> Result<Opened, OpenError> {
    let alone = terms.test_control;
    let shown = location.to_string();
    let mut terms = Some(terms);
    let mut compacted = false;
    let (conn, held, serving) = loop {
        let held = location.hold(true)?;
        let serving = match &held {
            Some(h) => Some(h.serve(alone).map_err(|holder| {
                OpenError::Refused(format!(
                    "test control needs the database file to itself, and {holder}: {shown}. Stop the other server, or give this one a file of its own (or :memory:)"
                ))
            })?),
            None => None,
        };
        let conn = location.open_writer_with(|conn| match terms.take() {
            Some(terms) => terms::admit(conn, &shown, terms, &clock, random),
            None => Ok(()),
        })?;
        if let (Location::File(path), Some(h), false) = (location, &held, compacted)
            && compact::at_start(&conn, path, h)?
        {
            // The path names the rewritten file now (its terms' work in it), or the
            // connection's locking mode changed: opened afresh, once.
            compacted = true;
            drop((conn, serving));
            continue;
        }
        break (conn, held, serving);
    };
    if let Location::File(path) = location {
        file::warn_if_readable_by_others(path);
    }
    let (database, mut writer) = Database::with_writer(location.clone(), conn, held, serving)?;
    writer.clock = clock;
    let pulled = webhooks::pull_back(&writer.conn, writer.clock.steady_millis())?;
    if pulled > 0 {
        log::warn!(
            "{pulled} webhook endpoint(s) had a lease or a retry time further ahead than a real clock makes (a test clock's, of a run that did not stop): taken as run out"
        );
    }
    Ok(Opened {
        streams: std::sync::Arc::new(database.streams()),
        backend: Box::new(database),
        writer: Box::new(writer),
    })
}

/// Sets a connection's lookaside to `LOOKASIDE_SLOTS`, before it is used. Where SQLite
/// refuses (lookaside in use), the connection keeps its default: more memory, no harm.
fn small_lookaside(conn: &Connection) {
    // SAFETY: the handle is this open connection's, used on this thread only; the null
    // buffer asks SQLite to allocate the slots itself.
    let rc = unsafe {
        rusqlite::ffi::sqlite3_db_config(
            conn.handle(),
            rusqlite::ffi::SQLITE_DBCONFIG_LOOKASIDE,
            std::ptr::null_mut::<std::ffi::c_void>(),
            LOOKASIDE_SLOT_BYTES,
            LOOKASIDE_SLOTS,
        )
    };
    if rc != rusqlite::ffi::SQLITE_OK {
        log::debug!("SQLite kept its default lookaside (code {rc})");
    }
}

impl Location {
    fn open(&self, read_only: bool) -> StoreResult<Connection> {
        self.open_with(read_only, false)
    }

    /// A read-only connection with the small lookaside (`LOOKASIDE_SLOTS`), for a thread
    /// that answers no request itself.
    fn open_lent(&self) -> StoreResult<Connection> {
        self.open_with(true, true)
    }

    fn open_with(&self, read_only: bool, small: bool) -> StoreResult<Connection> {
        let mode = if read_only {
            OpenFlags::SQLITE_OPEN_READ_ONLY
        } else {
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_CREATE
        };
        let flags = mode | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn = match self {
            // Created (0600) by `hold`, which every opening of a file takes first; its name
            // is a path, never a URI (`file:` is refused by `--db`).
            Location::File(path) => Connection::open_with_flags(path, flags)?,
            // `file:/plant-store-…?vfs=memdb`: this process's memory only.
            Location::Memory(uri) => {
                Connection::open_with_flags(uri, flags | OpenFlags::SQLITE_OPEN_URI)?
            }
            Location::Postgres(_) => return Err(StoreError("not a SQLite database".into())),
        };
        if small {
            small_lookaside(&conn);
        }
        conn.busy_timeout(BUSY_TIMEOUT)?;
        // Plans never depend on bound values. Without this, `id >= ?` is recompiled on
        // every execution (measured: a tenth of the CPU time of GET /plants?limit=10).
        conn.set_db_config(
            rusqlite::config::DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG,
            true,
        )?;
        let cache = if read_only {
            READER_CACHE_KIB
        } else {
            WRITER_CACHE_KIB
        };
        conn.pragma_update(None, "cache_size", -i64::from(cache))?;
        // Sorts, temporary tables and statement journals stay in memory: SQLite never
        // writes a temporary file (in TMPDIR, /var/tmp, /tmp or the working directory),
        // so the database's directory is the only one written (docs/device.md, "A
        // read-only root"). Every ORDER BY here follows an index, so nothing large is
        // sorted.
        conn.pragma_update(None, "temp_store", "MEMORY")?;
        Ok(conn)
    }

    /// The held descriptor of the file (`held.rs`), taken before a connection is opened
    /// on it and kept until after it is closed; `None` for `:memory:`.
    fn hold(&self, create: bool) -> StoreResult<Option<Arc<Held>>> {
        match self {
            Location::File(path) => {
                let held = file::hold(path, create)?;
                file::check_wal(path, &held)?;
                Ok(Some(held))
            }
            _ => Ok(None),
        }
    }

    /// Opens the read-write connection: WAL, `synchronous=FULL`, schema migrated. A file
    /// that is not ours, or a `-wal` beside it that is not its own, is refused before
    /// anything is written. The held file is to be kept until the connection is closed.
    fn open_writer(&self) -> StoreResult<(Connection, Option<Arc<Held>>)> {
        let held = self.hold(true)?;
        let conn = self
            .open_writer_with(|_| Ok(()))
            .map_err(|e| StoreError(e.to_string()))?;
        Ok((conn, held))
    }

    /// `open_writer` (the file held already), with `then` run in the migration's transaction,
    /// at this binary's schema (its error rolls all of it back).
    fn open_writer_with(
        &self,
        then: impl FnOnce(&Connection) -> Result<(), OpenError>,
    ) -> Result<Connection, OpenError> {
        let conn = self.open(false)?;
        // Only a file without a page yet takes it.
        conn.pragma_update(None, "page_size", PAGE_SIZE)
            .map_err(StoreError::from)?;
        if let Location::File(_) = self {
            inspect(&conn, &self.to_string())?;
            let mode: String =
                retry_busy(|| conn.query_row("PRAGMA journal_mode=WAL", [], |r| r.get(0)))
                    .map_err(StoreError::from)?;
            if !mode.eq_ignore_ascii_case("wal") {
                return Err(
                    StoreError(format!("cannot switch the database to WAL (got {mode})")).into(),
                );
            }
        }
        let set = || -> rusqlite::Result<()> {
            conn.execute_batch("PRAGMA synchronous=FULL; PRAGMA foreign_keys=ON;")?;
            conn.pragma_update(None, "journal_size_limit", WAL_SIZE_LIMIT)?;
            let page: i64 = conn.query_row("PRAGMA page_size", [], |r| r.get(0))?;
            conn.pragma_update(
                None,
                "wal_autocheckpoint",
                CHECKPOINT_WAL_BYTES / page.max(512),
            )
        };
        set().map_err(StoreError::from)?;
        if migrate(&conn, then)? {
            // The new identity into the file itself, where the guard reads it (`file.rs`).
            let _ = conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(()));
        }
        Ok(conn)
    }
}

impl Location {
    /// The connection of a `token` or `webhook` command: the writer's, or for a list a
    /// read-only one on a file that must be ours and at this binary's schema version.
    fn open_admin(&self, read_only: bool) -> StoreResult<(Connection, Option<Arc<Held>>)> {
        if !read_only {
            return self.open_writer();
        }
        let held = self.hold(false)?;
        let conn = self.open(true)?;
        let shown = self.to_string();
        admit::require_current(inspect(&conn, &shown)?, &shown)?;
        Ok((conn, held))
    }
}

pub use compact::{Compacted, PAGE_SIZE, compact};
pub use file::create_private;
pub use held::beside;
pub use made::NewFiles;

/// How often a backup looks at its stop flag.
const BACKUP_STOP_POLL: Duration = Duration::from_millis(20);

/// Writes a consistent copy of the database to `target` (an empty file: `VACUUM INTO`
/// takes one, and keeps its mode), from one read transaction on a read-only connection:
/// writers go on meanwhile. The copy is interrupted soon after `stop` is set.
pub fn backup_into(
    location: &Location,
    target: &Path,
    stop: &std::sync::atomic::AtomicBool,
) -> StoreResult<()> {
    use std::sync::atomic::{AtomicBool, Ordering};
    // Dropped after `conn` (declared before it).
    let _held = location.hold(false)?;
    let conn = location.open(true)?;
    let shown = location.to_string();
    inspect(&conn, &shown)?;
    let target = target
        .to_str()
        .ok_or_else(|| StoreError("the backup path is not UTF-8".into()))?;
    let interrupt = conn.get_interrupt_handle();
    let done = AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| {
            while !done.load(Ordering::Relaxed) {
                // Again at each look: an interrupt before the copy's statement started
                // would be lost.
                if stop.load(Ordering::Relaxed) {
                    interrupt.interrupt();
                }
                std::thread::sleep(BACKUP_STOP_POLL);
            }
        });
        let copied = retry_busy(|| conn.execute("VACUUM INTO ?1", [target]).map(|_| ()));
        done.store(true, Ordering::Relaxed);
        copied
    })?;
    Ok(())
}

/// Whether the file is ours (`admit.rs`); read again while another process switches a
/// new file to WAL.
fn inspect(conn: &Connection, shown: &str) -> StoreResult<admit::Found> {
    admit::judge(retry_busy(|| admit::shape(conn))?, shown)
}

/// Runs `f` again while SQLite answers "database is locked", for up to `BUSY_TIMEOUT`.
/// SQLite gives up at once, without its busy handler, where waiting could deadlock: when
/// two processes open a new file together, one's switch to WAL or its write transaction
/// meets the other's lock. Retrying from the start of the step is then safe.
fn retry_busy<T>(mut f: impl FnMut() -> rusqlite::Result<T>) -> rusqlite::Result<T> {
    let started = std::time::Instant::now();
    let mut pause = Duration::from_millis(1);
    loop {
        match f() {
            Err(rusqlite::Error::SqliteFailure(e, _))
                if matches!(
                    e.code,
                    rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked
                ) && started.elapsed() < BUSY_TIMEOUT =>
            {
                std::thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_millis(50));
            }
            other => return other,
        }
    }
}

/// Brings the schema to `schema_version()` in one transaction, gives the file its identity
/// if it has none (`file::IDENTITY`), and runs `then` in it: a database is at its old
/// version or the new one, never between, and an error of `then` leaves it as it was. The
/// version is read inside the transaction, so two processes starting on one new file do
/// not both migrate it. True when the identity was given now.
fn migrate(
    conn: &Connection,
    then: impl FnOnce(&Connection) -> Result<(), OpenError>,
) -> Result<bool, OpenError> {
    retry_busy(|| conn.execute_batch("BEGIN IMMEDIATE")).map_err(StoreError::from)?;
    let done = (|| {
        let migrated = apply_migrations(conn)?;
        let named = name_file(conn)?;
        then(conn)?;
        Ok::<_, OpenError>((migrated, named))
    })();
    let end = if done.is_ok() { "COMMIT" } else { "ROLLBACK" };
    let ended = conn.execute_batch(end);
    let (migrated, named) = done?;
    ended.map_err(StoreError::from)?;
    if let Some(current) = migrated {
        log::info!(
            "database migrated from schema version {current} to {}",
            schema_version()
        );
    }
    Ok(named)
}

/// Inside `migrate`'s transaction: a random identity for a file that has none.
fn name_file(conn: &Connection) -> StoreResult<bool> {
    let id: i64 = conn.query_row(&format!("PRAGMA {}", file::IDENTITY), [], |r| r.get(0))?;
    if id != 0 {
        return Ok(false);
    }
    let mut bytes = [0u8; 4];
    getrandom::fill(&mut bytes).map_err(|e| StoreError(format!("no randomness: {e}")))?;
    // Any 32 bits but 0, which means none.
    let id = i32::from_be_bytes(bytes) | 1;
    conn.pragma_update(None, file::IDENTITY, id)?;
    Ok(true)
}

/// Inside `migrate`'s transaction: the version it found, when it migrated.
fn apply_migrations(conn: &Connection) -> StoreResult<Option<i64>> {
    let current: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    let Some(current) = due(current)? else {
        return Ok(None);
    };
    for (_, sql) in migrations(SCHEMA).into_iter().filter(|m| m.0 > current) {
        conn.execute_batch(&sql)?;
    }
    conn.pragma_update(None, "user_version", schema_version())?;
    Ok(Some(current))
}

/// An opened SQLite database: what workers' connections are opened from.
struct Database {
    location: Location,
    file: Option<FileIdentity>,
    /// This server, counted on the held file (`held.rs`) until dropped.
    _serving: Option<Serving>,
}

impl Database {
    fn with_writer(
        location: Location,
        conn: Connection,
        held: Option<Arc<Held>>,
        serving: Option<Serving>,
    ) -> StoreResult<(Database, SqliteWriter)> {
        let identity = conn.query_row(&format!("PRAGMA {}", file::IDENTITY), [], |r| {
            r.get::<_, i32>(0)
        });
        let file = match identity
            .map_err(StoreError::from)
            .and_then(|id| FileIdentity::of(&location, held.as_ref(), id as u32))
        {
            Ok(file) => file,
            Err(e) => {
                // Closed before the held file (`held.rs`).
                drop(conn);
                return Err(e);
            }
        };
        let writer = SqliteWriter {
            conn,
            file: file.clone(),
            clock: Arc::default(),
        };
        Ok((
            Database {
                location,
                file,
                _serving: serving,
            },
            writer,
        ))
    }

    /// The read connections that every worker's long lists share.
    fn streams(&self) -> StreamReaders {
        StreamReaders {
            location: self.location.clone(),
            idle: Mutex::new((Vec::new(), 0)),
            freed: Condvar::new(),
            file: self.file.clone(),
        }
    }
}

impl Backend for Database {
    /// A worker's read-only connection.
    fn connect(&self) -> StoreResult<Box<dyn Reads>> {
        Ok(Box::new(WorkerReads {
            conn: self.location.open(true)?,
            file: self.file.clone(),
        }))
    }

    /// A webhook delivery's: as a worker's, with the small lookaside.
    fn lend(&self) -> StoreResult<Box<dyn Reads>> {
        Ok(Box::new(WorkerReads {
            conn: self.location.open_lent()?,
            file: self.file.clone(),
        }))
    }
}

#[cfg(test)]
mod tests;
