//! The SQLite backend: the only module that holds rusqlite types.
//!
//! One writer connection (WAL, `synchronous=FULL`) on the writer thread; each worker owns
//! a read-only connection; in WAL mode readers and the writer never block each other.

use crate::ops::clock::Clock;
use crate::ops::random::Random;
use crate::ops::random::Stream;
use crate::store::location::Location;
use crate::store::schema::{SCHEMA, due, migrations, schema_version};
use crate::store::seam::{
    BUSY_TIMEOUT, Backend, Opened, Reads, Scope, StoreError, StoreResult, TokenAdmin, TokenRecord,
};
use rusqlite::{Connection, OpenFlags};
use std::path::Path;
use std::sync::{Condvar, Mutex};
use std::time::Duration;

mod admit;
mod control;
mod file;
mod held;
mod reads;
mod settle;
mod sweep;
mod webhooks;
mod writer;

pub use webhooks::admin as webhooks;
pub use webhooks::{DUE_AT_MOST, LEASE_AT_MOST};

use file::FileIdentity;
use held::Held;
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
/// checkpoints, the fewer bytes written (docs/operating.md, "Flash wear").
const CHECKPOINT_WAL_BYTES: i64 = 4 * 1024 * 1024;
/// SQLite's lookaside on the connections that answer no request themselves (those lent
/// to long lists and to webhook deliveries: seven of a server's ten or so): a pool of
/// small blocks that SQLite allocates and touches whole when a connection opens, 48 KiB
/// by default, about half of an idle connection's memory. Here 8 blocks of 1,200 bytes
/// (about 9 KiB); what does not fit goes to malloc. The writer's and the workers'
/// connections keep SQLite's default: there the small pool cost about 4% of the CPU
/// time of a small GET (docs/operating.md, "Memory on a small device").
const LOOKASIDE_SLOTS: i32 = 8;
const LOOKASIDE_SLOT_BYTES: i32 = 1200;
/// What the `-wal` file is cut back to when the log starts over after a checkpoint
/// (`journal_size_limit`), in bytes: twice what the automatic checkpoint lets it grow to
/// (`CHECKPOINT_WAL_BYTES`), so that steady writing never cuts it, while the size a long
/// read (a backup) or a burst left is given back.
const WAL_SIZE_LIMIT: i64 = 2 * CHECKPOINT_WAL_BYTES;
/// The page size of a new database file, in bytes (docs/operating.md, "Flash wear"). Each
/// page a commit changes is one frame of the write-ahead log (the page and 24 bytes): with
/// SQLite's default of 4 KiB a create's few changed pages cost about 24 KB written. A file
/// keeps the page size it was made with (a WAL file's cannot change without a `VACUUM`).
const PAGE_SIZE: i64 = 1024;

impl From<rusqlite::Error> for StoreError {
    fn from(e: rusqlite::Error) -> Self {
        StoreError(e.to_string())
    }
}

/// The events the store has ever appended (its logs' last seqs, summed): mixed into a
/// seeded server's event ids (`Random::vary`), so that a reused file draws none it holds.
const EVENTS_MADE: &str = "SELECT coalesce(sum(last_seq), 0) FROM log_tails";

/// Opens and migrates the database: the writer owns the read-write connection, and
/// reads the server's `clock`; a seeded `random` is varied by the events the store holds.
pub fn open(location: &Location, clock: Arc<Clock>, random: &Random) -> StoreResult<Opened> {
    let (conn, held) = location.open_writer()?;
    if let Location::File(path) = location {
        file::warn_if_readable_by_others(path);
    }
    let (database, mut writer) = Database::with_writer(location.clone(), conn, held)?;
    writer.clock = clock;
    let made: i64 = writer.conn.query_row(EVENTS_MADE, [], |r| r.get(0))?;
    random.vary(Stream::Events, u64::try_from(made).unwrap_or(0));
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

/// Token administration on a SQLite file; `read_only` (for `token list`): opened
/// read-only, never migrated.
pub fn tokens(location: &Location, read_only: bool) -> StoreResult<Box<dyn TokenAdmin>> {
    if let Location::Memory(_) = location {
        return Err(StoreError(
            "tokens need a database file, not :memory:".into(),
        ));
    }
    let (conn, held) = location.open_admin(read_only)?;
    Ok(Box::new(Tokens { conn, _held: held }))
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
        let flags = mode | OpenFlags::SQLITE_OPEN_URI | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn = match self {
            // Created (0600) by `hold`, which every opening of a file takes first.
            Location::File(path) => Connection::open_with_flags(path, flags)?,
            Location::Memory(uri) => Connection::open_with_flags(uri, flags)?,
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
        // so the database's directory is the only one written (docs/operating.md, "A
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
        let conn = self.open(false)?;
        // Only a file without a page yet takes it.
        conn.pragma_update(None, "page_size", PAGE_SIZE)?;
        if let Location::File(_) = self {
            inspect(&conn, &self.to_string())?;
            let mode: String =
                retry_busy(|| conn.query_row("PRAGMA journal_mode=WAL", [], |r| r.get(0)))?;
            if !mode.eq_ignore_ascii_case("wal") {
                return Err(StoreError(format!(
                    "cannot switch the database to WAL (got {mode})"
                )));
            }
        }
        conn.execute_batch("PRAGMA synchronous=FULL; PRAGMA foreign_keys=ON;")?;
        conn.pragma_update(None, "journal_size_limit", WAL_SIZE_LIMIT)?;
        let page: i64 = conn.query_row("PRAGMA page_size", [], |r| r.get(0))?;
        conn.pragma_update(
            None,
            "wal_autocheckpoint",
            CHECKPOINT_WAL_BYTES / page.max(512),
        )?;
        migrate(&conn)?;
        Ok((conn, held))
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

pub use file::{beside, create_private};

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

/// Brings the schema to `schema_version()` in one transaction: a database is at its old
/// version or the new one, never between. The version is read inside the transaction, so
/// two processes starting on one new file do not both migrate it.
fn migrate(conn: &Connection) -> StoreResult<()> {
    retry_busy(|| conn.execute_batch("BEGIN IMMEDIATE"))?;
    let migrated = apply_migrations(conn);
    let end = if migrated.as_ref().is_ok_and(Option::is_some) {
        "COMMIT"
    } else {
        "ROLLBACK"
    };
    conn.execute_batch(end)?;
    if let Some(current) = migrated? {
        log::info!(
            "database migrated from schema version {current} to {}",
            schema_version()
        );
    }
    Ok(())
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
}

impl Database {
    fn with_writer(
        location: Location,
        conn: Connection,
        held: Option<Arc<Held>>,
    ) -> StoreResult<(Database, SqliteWriter)> {
        let file = match FileIdentity::of(&location, held.as_ref()) {
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
        Ok((Database { location, file }, writer))
    }

    /// The read connections that every worker's long lists share.
    fn streams(&self) -> StreamReaders {
        StreamReaders {
            location: self.location.clone(),
            idle: Mutex::new((Vec::new(), 0)),
            freed: Condvar::new(),
            _held: self.file.as_ref().map(FileIdentity::held),
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

/// Token administration on a SQLite file.
struct Tokens {
    conn: Connection,
    /// Kept until after `conn` is closed (declared after it): `held.rs`.
    _held: Option<Arc<Held>>,
}

impl TokenAdmin for Tokens {
    fn add(&mut self, record: &TokenRecord, hash: &[u8; 32]) -> StoreResult<()> {
        let token = crate::store::admin::NewToken {
            public_id: record.public_id.clone(),
            hash: *hash,
            principal: record.principal.clone(),
            scope: record.scope.as_str(),
            created_at: record.created_at,
            expires_at: record.expires_at,
            place: String::new(),
        };
        Ok(control::insert_token(&self.conn, &token)?)
    }

    fn list(&mut self) -> StoreResult<Vec<TokenRecord>> {
        let mut st = self.conn.prepare(
            "SELECT public_id, principal, scope, created_at, expires_at FROM tokens
             ORDER BY created_at, public_id",
        )?;
        let rows = st.query_map([], |r| {
            Ok(TokenRecord {
                public_id: r.get(0)?,
                principal: r.get(1)?,
                scope: Scope::parse(&r.get::<_, String>(2)?).unwrap_or(Scope::Read),
                created_at: r.get(3)?,
                expires_at: r.get(4)?,
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    fn revoke(&mut self, public_id: &str) -> StoreResult<bool> {
        Ok(self
            .conn
            .execute("DELETE FROM tokens WHERE public_id = ?1", [public_id])?
            > 0)
    }
}

#[cfg(test)]
mod tests;
