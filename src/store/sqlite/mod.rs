//! The SQLite backend: the only module that holds rusqlite types.
//!
//! One writer connection (WAL, `synchronous=FULL`) on the writer thread; each worker owns
//! a read-only connection; in WAL mode readers and the writer never block each other.

use crate::ops::metrics::DatabaseSize;
use crate::store::location::Location;
use crate::store::schema::{SCHEMA, due, migrations, schema_version};
use crate::store::seam::{
    BUSY_TIMEOUT, Backend, CREATED, Change, DELETED, EventRow, EventRows, Job, LogBounds, Opened,
    Outcome, Reads, Rows, STREAM_READERS, SWEEP_ROWS, Scope, StoreError, StoreResult, Streams,
    TokenAdmin, TokenOwner, TokenRecord, Writer, event_ids,
};
use rusqlite::{Connection, OpenFlags, OptionalExtension, params};
use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::path::{Path, PathBuf};
use std::sync::{Condvar, Mutex};
use std::time::Duration;

/// Page cache of each read connection, in KiB (one per worker, so it adds up).
const READER_CACHE_KIB: u32 = 256;
/// Page cache of the write connection, in KiB.
const WRITER_CACHE_KIB: u32 = 256;

const LIST_PAGE: &str =
    "SELECT id, name, tag FROM plants WHERE principal = ?1 AND id >= ?2 ORDER BY id LIMIT ?3";
const EVENTS_PAGE: &str = "SELECT seq, id, kind, at, plant, name, tag FROM events \
     WHERE principal = ?1 AND seq > ?2 ORDER BY seq LIMIT ?3";
const LOG_BOUNDS: &str = "SELECT last_seq, (SELECT min(seq) FROM events WHERE principal = ?1) \
     FROM event_logs WHERE principal = ?1";
const TOKEN_OWNER: &str = "SELECT principal, scope, expires_at FROM tokens WHERE hash = ?1";
/// Takes the principal's next seq; the time never goes back within its log.
/// A principal's log as a group finds it.
const LOG_TAIL: &str = "SELECT last_seq, last_at FROM event_logs WHERE principal = ?1";
/// A principal's log as a group leaves it.
const SAVE_LOG: &str = "INSERT INTO event_logs (principal, last_seq, last_at) VALUES (?1, ?2, ?3) \
     ON CONFLICT (principal) DO UPDATE SET last_seq = excluded.last_seq, last_at = excluded.last_at";
const APPEND_EVENT: &str = "INSERT INTO events (principal, seq, id, kind, at, plant, name, tag) \
     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)";
const SWEEP: &str = "DELETE FROM events WHERE (principal, seq) IN \
     (SELECT principal, seq FROM events WHERE at < ?1 ORDER BY at, principal, seq LIMIT ?2)";

impl From<rusqlite::Error> for StoreError {
    fn from(e: rusqlite::Error) -> Self {
        StoreError(e.to_string())
    }
}

/// Opens and migrates the database: the writer owns the read-write connection.
pub fn open(location: &Location) -> StoreResult<Opened> {
    let conn = location.open_writer()?;
    let (database, writer) = Database::with_writer(location.clone(), conn)?;
    Ok(Opened {
        streams: std::sync::Arc::new(database.streams()),
        backend: Box::new(database),
        writer: Box::new(writer),
    })
}

/// Token administration on a SQLite file.
pub fn tokens(location: &Location) -> StoreResult<Box<dyn TokenAdmin>> {
    if let Location::Memory(_) = location {
        return Err(StoreError(
            "tokens need a database file, not :memory:".into(),
        ));
    }
    Ok(Box::new(Tokens {
        conn: location.open_writer()?,
    }))
}

impl Location {
    fn open(&self, read_only: bool) -> StoreResult<Connection> {
        let mode = if read_only {
            OpenFlags::SQLITE_OPEN_READ_ONLY
        } else {
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_CREATE
        };
        let flags = mode | OpenFlags::SQLITE_OPEN_URI | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn = match self {
            Location::File(path) => Connection::open_with_flags(path, flags)?,
            Location::Memory(uri) => Connection::open_with_flags(uri, flags)?,
            Location::Postgres(_) => return Err(StoreError("not a SQLite database".into())),
        };
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
        Ok(conn)
    }

    /// Opens the read-write connection: WAL, `synchronous=FULL`, schema migrated.
    fn open_writer(&self) -> StoreResult<Connection> {
        let conn = self.open(false)?;
        if let Location::File(_) = self {
            let mode: String =
                retry_busy(|| conn.query_row("PRAGMA journal_mode=WAL", [], |r| r.get(0)))?;
            if !mode.eq_ignore_ascii_case("wal") {
                return Err(StoreError(format!(
                    "cannot switch the database to WAL (got {mode})"
                )));
            }
        }
        conn.execute_batch("PRAGMA synchronous=FULL; PRAGMA foreign_keys=ON;")?;
        migrate(&conn)?;
        Ok(conn)
    }
}

/// Writes a consistent copy of the database to `target` (which must not exist), from one
/// read transaction on a read-only connection: writers go on meanwhile.
pub fn backup_into(location: &Location, target: &Path) -> StoreResult<()> {
    let conn = location.open(true)?;
    let target = target
        .to_str()
        .ok_or_else(|| StoreError("the backup path is not UTF-8".into()))?;
    retry_busy(|| conn.execute("VACUUM INTO ?1", [target]).map(|_| ()))?;
    Ok(())
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

/// The database file as it was opened. If the path stops naming that file (deleted,
/// moved, replaced), SQLite would go on writing to the orphaned file and every write
/// acknowledged from then on would be lost at the next start; so writes are refused and
/// /healthz fails instead, until the same file is back at the path.
#[derive(Debug, Clone)]
struct FileIdentity {
    path: PathBuf,
    dev_ino: (u64, u64),
}

impl FileIdentity {
    fn of(location: &Location) -> StoreResult<Option<FileIdentity>> {
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

    fn verify(&self) -> StoreResult<()> {
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

/// An opened SQLite database: what workers' connections are opened from.
struct Database {
    location: Location,
    file: Option<FileIdentity>,
}

impl Database {
    fn with_writer(location: Location, conn: Connection) -> StoreResult<(Database, SqliteWriter)> {
        let file = FileIdentity::of(&location)?;
        let writer = SqliteWriter {
            conn,
            file: file.clone(),
        };
        Ok((Database { location, file }, writer))
    }

    /// The read connections that every worker's long lists share.
    fn streams(&self) -> StreamReaders {
        StreamReaders {
            location: self.location.clone(),
            idle: Mutex::new((Vec::new(), 0)),
            freed: Condvar::new(),
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
}

struct SqliteWriter {
    conn: Connection,
    file: Option<FileIdentity>,
}

impl Writer for SqliteWriter {
    fn commit(&mut self, batch: &mut Vec<Job>) -> StoreResult<Vec<Outcome>> {
        if let Some(f) = &self.file {
            f.verify()?;
        }
        let committed = commit(&self.conn, batch);
        if committed.is_err() {
            let _ = self.conn.execute_batch("ROLLBACK");
        }
        committed
    }

    fn close(self: Box<Self>) {
        match self
            .conn
            .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
        {
            Ok(()) => log::info!("database checkpointed and closed"),
            Err(e) => log::warn!("final checkpoint failed: {e}"),
        }
    }
}

fn commit(conn: &Connection, batch: &[Job]) -> StoreResult<Vec<Outcome>> {
    let ids = event_ids(batch)?;
    conn.execute_batch("BEGIN IMMEDIATE")?;
    let mut logs = Logs {
        now: crate::ops::clock::unix_now_millis(),
        tails: HashMap::new(),
    };
    let mut append = conn.prepare_cached(APPEND_EVENT)?;
    let mut outcomes = Vec::with_capacity(batch.len());
    for (job, event_id) in batch.iter().zip(&ids) {
        outcomes.push(match &job.change {
            Change::Create {
                principal,
                id,
                name,
                tag,
            } => {
                let mut st = conn.prepare_cached(
                    "INSERT INTO plants (principal, id, name, tag) VALUES (?1, ?2, ?3, ?4)
                     ON CONFLICT DO NOTHING",
                )?;
                match st.execute(params![principal, id, name, tag])? {
                    0 => Outcome::Conflict,
                    _ => {
                        let (seq, at) = logs.next(conn, principal)?;
                        let event = (seq, event_id.as_str(), CREATED, at, *id);
                        append_event(&mut append, principal, event, Some(name), tag.as_deref())?;
                        Outcome::Created
                    }
                }
            }
            Change::Delete { principal, id } => {
                let mut st =
                    conn.prepare_cached("DELETE FROM plants WHERE principal = ?1 AND id = ?2")?;
                match st.execute(params![principal, id])? {
                    0 => Outcome::NotFound,
                    _ => {
                        let (seq, at) = logs.next(conn, principal)?;
                        let event = (seq, event_id.as_str(), DELETED, at, *id);
                        append_event(&mut append, principal, event, None, None)?;
                        Outcome::Deleted
                    }
                }
            }
            Change::Probe => {
                // A row written and removed where a change writes: its plant and its event.
                conn.execute_batch(
                    "INSERT INTO plants VALUES ('', 0, '', NULL) ON CONFLICT DO NOTHING;
                     INSERT INTO events VALUES ('', 0, 'evt_probe', 'plant.deleted', 0, 0, NULL, NULL)
                         ON CONFLICT DO NOTHING;
                     DELETE FROM plants WHERE principal = '';
                     DELETE FROM events WHERE principal = '';",
                )?;
                Outcome::Deleted
            }
            Change::Sweep { before_ms } => {
                let removed = conn
                    .prepare_cached(SWEEP)?
                    .execute(params![before_ms, SWEEP_ROWS])?;
                Outcome::Swept {
                    more: removed >= SWEEP_ROWS as usize,
                }
            }
        });
    }
    logs.save(conn)?;
    conn.execute_batch("COMMIT")?;
    Ok(outcomes)
}

/// The logs a group appends to: each principal's last seq and time, read once when the
/// group first appends to it and written back once before the commit. The transaction
/// holds the database's write lock throughout, so no other writer takes a seq between.
struct Logs<'a> {
    now: i64,
    tails: HashMap<&'a str, (i64, i64)>,
}

impl<'a> Logs<'a> {
    /// The seq and time of the principal's next event: one more than its last, and never
    /// before the last event's time.
    fn next(&mut self, conn: &Connection, principal: &'a str) -> StoreResult<(i64, i64)> {
        let tail = match self.tails.entry(principal) {
            Entry::Occupied(e) => e.into_mut(),
            Entry::Vacant(e) => e.insert(
                conn.prepare_cached(LOG_TAIL)?
                    .query_row([principal], |r| Ok((r.get(0)?, r.get(1)?)))
                    .optional()?
                    .unwrap_or((0, 0)),
            ),
        };
        *tail = (tail.0 + 1, tail.1.max(self.now));
        Ok(*tail)
    }

    fn save(&self, conn: &Connection) -> StoreResult<()> {
        let mut st = conn.prepare_cached(SAVE_LOG)?;
        for (principal, (seq, at)) in &self.tails {
            st.execute(params![principal, seq, at])?;
        }
        Ok(())
    }
}

/// Appends an event, (seq, id, kind, at, plant), to the principal's log, in the
/// transaction of its change; `name` and `tag` are a created plant's.
fn append_event(
    append: &mut rusqlite::CachedStatement<'_>,
    principal: &str,
    (seq, id, kind, at, plant): (i64, &str, &str, i64, i64),
    name: Option<&str>,
    tag: Option<&str>,
) -> StoreResult<()> {
    append.execute(params![principal, seq, id, kind, at, plant, name, tag])?;
    Ok(())
}

/// One worker's read-only connection.
struct WorkerReads {
    conn: Connection,
    file: Option<FileIdentity>,
}

impl Reads for WorkerReads {
    fn list_page(&self, principal: &str, from: i64, count: u32, each: Rows) -> StoreResult<u32> {
        list_page(&self.conn, principal, from, count, each)
    }

    /// Runs `f` in one read transaction, so its statements share one snapshot and one
    /// acquisition of SQLite's read lock.
    fn read(&self, f: &mut dyn FnMut()) -> StoreResult<()> {
        self.conn
            .prepare_cached("BEGIN")
            .and_then(|mut st| st.execute([]))?;
        f();
        self.conn
            .prepare_cached("COMMIT")
            .and_then(|mut st| st.execute([]))?;
        Ok(())
    }

    fn token_owner(&self, hash: &[u8; 32]) -> StoreResult<Option<TokenOwner>> {
        token_owner(&self.conn, hash)
    }

    fn events_page(
        &self,
        principal: &str,
        after: i64,
        count: u32,
        each: EventRows,
    ) -> StoreResult<u32> {
        events_page(&self.conn, principal, after, count, each)
    }

    fn log_bounds(&self, principal: &str) -> StoreResult<Option<LogBounds>> {
        Ok(self
            .conn
            .prepare_cached(LOG_BOUNDS)?
            .query_row([principal], |r| {
                Ok(LogBounds {
                    last_seq: r.get(0)?,
                    oldest_kept: r.get(1)?,
                })
            })
            .optional()?)
    }

    /// Fails when the path no longer names the file opened.
    fn check_file(&self) -> StoreResult<()> {
        self.file.as_ref().map_or(Ok(()), FileIdentity::verify)
    }

    fn ping(&self) -> StoreResult<()> {
        self.conn
            .query_row("SELECT count(*) FROM sqlite_schema", [], |_| Ok(()))?;
        Ok(())
    }

    fn size(&self) -> Option<DatabaseSize> {
        let path = &self.file.as_ref()?.path;
        let len = |p: &Path| std::fs::metadata(p).map_or(0, |m| m.len());
        let mut wal = path.clone().into_os_string();
        wal.push("-wal");
        Some(DatabaseSize {
            main: len(path),
            wal: len(Path::new(&wal)),
        })
    }
}

fn list_page(
    conn: &Connection,
    principal: &str,
    from: i64,
    count: u32,
    each: Rows,
) -> StoreResult<u32> {
    let mut st = conn.prepare_cached(LIST_PAGE)?;
    let mut rows = st.query(params![principal, from, count])?;
    let mut seen = 0;
    while let Some(row) = rows.next()? {
        let tag = row
            .get_ref(2)?
            .as_str_or_null()
            .map_err(rusqlite::Error::from)?;
        each(
            row.get(0)?,
            row.get_ref(1)?.as_str().map_err(rusqlite::Error::from)?,
            tag,
        );
        seen += 1;
    }
    Ok(seen)
}

fn token_owner(conn: &Connection, hash: &[u8; 32]) -> StoreResult<Option<TokenOwner>> {
    let mut st = conn.prepare_cached(TOKEN_OWNER)?;
    let row = st
        .query_row([&hash[..]], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, Option<i64>>(2)?,
            ))
        })
        .optional()?;
    Ok(
        row.and_then(|(principal, scope, expires)| {
            TokenOwner::from_row(principal, &scope, expires)
        }),
    )
}

fn events_page(
    conn: &Connection,
    principal: &str,
    after: i64,
    count: u32,
    each: EventRows,
) -> StoreResult<u32> {
    let mut st = conn.prepare_cached(EVENTS_PAGE)?;
    let mut rows = st.query(params![principal, after, count])?;
    let mut seen = 0;
    while let Some(row) = rows.next()? {
        each(&EventRow {
            seq: row.get(0)?,
            id: row.get_ref(1)?.as_str().map_err(rusqlite::Error::from)?,
            kind: row.get_ref(2)?.as_str().map_err(rusqlite::Error::from)?,
            at_ms: row.get(3)?,
            plant: row.get(4)?,
            name: row
                .get_ref(5)?
                .as_str_or_null()
                .map_err(rusqlite::Error::from)?,
            tag: row
                .get_ref(6)?
                .as_str_or_null()
                .map_err(rusqlite::Error::from)?,
        });
        seen += 1;
    }
    Ok(seen)
}

/// At most `STREAM_READERS` read-only connections, opened when first needed, lent for one
/// list page at a time.
struct StreamReaders {
    location: Location,
    /// Idle connections, and how many exist.
    idle: Mutex<(Vec<Connection>, usize)>,
    freed: Condvar,
}

impl Streams for StreamReaders {
    fn list_page(&self, principal: &str, from: i64, count: u32, each: Rows) -> StoreResult<u32> {
        self.lent(|conn| list_page(conn, principal, from, count, each))
    }

    fn events_page(
        &self,
        principal: &str,
        after: i64,
        count: u32,
        each: EventRows,
    ) -> StoreResult<u32> {
        self.lent(|conn| events_page(conn, principal, after, count, each))
    }

    fn token_owner(&self, hash: &[u8; 32]) -> StoreResult<Option<TokenOwner>> {
        self.lent(|conn| token_owner(conn, hash))
    }
}

impl StreamReaders {
    /// Runs `f` on a lent connection.
    fn lent<T>(&self, f: impl FnOnce(&Connection) -> StoreResult<T>) -> StoreResult<T> {
        let conn = self.lend()?;
        let result = f(&conn);
        let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
        idle.0.push(conn);
        drop(idle);
        self.freed.notify_one();
        result
    }

    fn lend(&self) -> StoreResult<Connection> {
        let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if let Some(conn) = idle.0.pop() {
                return Ok(conn);
            }
            if idle.1 < STREAM_READERS {
                idle.1 += 1;
                drop(idle);
                return self.location.open(true).inspect_err(|_| {
                    self.idle.lock().unwrap_or_else(|e| e.into_inner()).1 -= 1;
                });
            }
            idle = self.freed.wait(idle).unwrap_or_else(|e| e.into_inner());
        }
    }
}

/// Token administration on a SQLite file.
struct Tokens {
    conn: Connection,
}

impl TokenAdmin for Tokens {
    fn add(&mut self, record: &TokenRecord, hash: &[u8; 32]) -> StoreResult<()> {
        self.conn.execute(
            "INSERT INTO tokens (public_id, hash, principal, scope, created_at, expires_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            params![
                record.public_id,
                &hash[..],
                record.principal,
                record.scope.as_str(),
                record.created_at,
                record.expires_at
            ],
        )?;
        Ok(())
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
