//! The SQLite backend: the only module that holds rusqlite types.
//!
//! One writer connection (WAL, `synchronous=FULL`) on the writer thread; each worker owns
//! a read-only connection; in WAL mode readers and the writer never block each other.

use super::{
    BUSY_TIMEOUT, Change, Job, Location, Outcome, SCHEMA, STREAM_READERS, StoreError, StoreResult,
    TokenOwner, TokenRecord, Writer, due, migrations, schema_version,
};
use crate::api::auth::Scope;
use crate::ops::metrics::DatabaseSize;
use rusqlite::{Connection, OpenFlags, OptionalExtension, params};
use std::path::{Path, PathBuf};
use std::sync::{Condvar, Mutex};
use std::time::Duration;

/// Page cache of each read connection, in KiB (one per worker, so it adds up).
const READER_CACHE_KIB: u32 = 256;
/// Page cache of the write connection, in KiB.
const WRITER_CACHE_KIB: u32 = 256;

const LIST_PAGE: &str =
    "SELECT id, name, tag FROM plants WHERE principal = ?1 AND id >= ?2 ORDER BY id LIMIT ?3";

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
pub struct Opened {
    location: Location,
    file: Option<FileIdentity>,
}

impl Opened {
    /// Opens and migrates the database; the writer owns the read-write connection.
    pub(super) fn open(location: Location) -> StoreResult<(Opened, SqliteWriter)> {
        let conn = location.open_writer()?;
        Opened::with_writer(location, conn)
    }

    fn with_writer(location: Location, conn: Connection) -> StoreResult<(Opened, SqliteWriter)> {
        let file = FileIdentity::of(&location)?;
        let writer = SqliteWriter {
            conn,
            file: file.clone(),
        };
        Ok((Opened { location, file }, writer))
    }

    /// A worker's read-only connection.
    pub(super) fn connect(&self) -> StoreResult<Reads> {
        Ok(Reads {
            conn: self.location.open(true)?,
            file: self.file.clone(),
        })
    }

    /// The read connections that every worker's long lists share.
    pub(super) fn streams(&self) -> Streams {
        Streams {
            location: self.location.clone(),
            idle: Mutex::new((Vec::new(), 0)),
            freed: Condvar::new(),
        }
    }
}

pub(super) struct SqliteWriter {
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

    fn close(self) {
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
    conn.execute_batch("BEGIN IMMEDIATE")?;
    let mut outcomes = Vec::with_capacity(batch.len());
    for job in batch {
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
                    _ => Outcome::Created,
                }
            }
            Change::Delete { principal, id } => {
                let mut st =
                    conn.prepare_cached("DELETE FROM plants WHERE principal = ?1 AND id = ?2")?;
                match st.execute(params![principal, id])? {
                    0 => Outcome::NotFound,
                    _ => Outcome::Deleted,
                }
            }
            Change::Probe => {
                conn.execute_batch(
                    "INSERT INTO plants VALUES ('', 0, '', NULL) ON CONFLICT DO NOTHING;
                     DELETE FROM plants WHERE principal = '';",
                )?;
                Outcome::Deleted
            }
        });
    }
    conn.execute_batch("COMMIT")?;
    Ok(outcomes)
}

/// One worker's read-only connection.
pub struct Reads {
    conn: Connection,
    file: Option<FileIdentity>,
}

impl Reads {
    pub(super) fn list_page(
        &self,
        principal: &str,
        from: i64,
        count: u32,
        each: impl FnMut(i64, &str, Option<&str>),
    ) -> StoreResult<u32> {
        list_page(&self.conn, principal, from, count, each)
    }

    /// Runs `f` in one read transaction, so its statements share one snapshot and one
    /// acquisition of SQLite's read lock.
    pub(super) fn read<T, E: From<StoreError>>(
        &self,
        f: impl FnOnce() -> Result<T, E>,
    ) -> Result<T, E> {
        self.conn
            .prepare_cached("BEGIN")
            .and_then(|mut st| st.execute([]))
            .map_err(StoreError::from)?;
        let result = f();
        let end = self
            .conn
            .prepare_cached("COMMIT")
            .and_then(|mut st| st.execute([]));
        match (result, end) {
            (Ok(_), Err(e)) => Err(StoreError::from(e).into()),
            (result, _) => result,
        }
    }

    pub(super) fn token_owner(&self, hash: &[u8; 32]) -> StoreResult<Option<TokenOwner>> {
        let mut st = self
            .conn
            .prepare_cached("SELECT principal, scope, expires_at FROM tokens WHERE hash = ?1")?;
        let row = st
            .query_row([&hash[..]], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, Option<i64>>(2)?,
                ))
            })
            .optional()?;
        Ok(row.and_then(|(principal, scope, expires)| {
            TokenOwner::from_row(principal, &scope, expires)
        }))
    }

    /// Fails when the path no longer names the file opened.
    pub(super) fn check_file(&self) -> StoreResult<()> {
        self.file.as_ref().map_or(Ok(()), FileIdentity::verify)
    }

    pub(super) fn ping(&self) -> StoreResult<()> {
        self.conn
            .query_row("SELECT count(*) FROM sqlite_schema", [], |_| Ok(()))?;
        Ok(())
    }

    pub(super) fn size(&self) -> Option<DatabaseSize> {
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
    mut each: impl FnMut(i64, &str, Option<&str>),
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

/// At most `STREAM_READERS` read-only connections, opened when first needed, lent for one
/// list page at a time.
pub struct Streams {
    location: Location,
    /// Idle connections, and how many exist.
    idle: Mutex<(Vec<Connection>, usize)>,
    freed: Condvar,
}

impl Streams {
    pub(super) fn list_page(
        &self,
        principal: &str,
        from: i64,
        count: u32,
        each: impl FnMut(i64, &str, Option<&str>),
    ) -> StoreResult<u32> {
        let conn = self.lend()?;
        let result = list_page(&conn, principal, from, count, each);
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
pub struct Tokens {
    conn: Connection,
}

impl Tokens {
    pub(super) fn open(location: &Location) -> StoreResult<Tokens> {
        if let Location::Memory(_) = location {
            return Err(StoreError(
                "tokens need a database file, not :memory:".into(),
            ));
        }
        Ok(Tokens {
            conn: location.open_writer()?,
        })
    }

    pub(super) fn add(&self, record: &TokenRecord, hash: &[u8; 32]) -> StoreResult<()> {
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

    pub(super) fn list(&self) -> StoreResult<Vec<TokenRecord>> {
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

    pub(super) fn revoke(&self, public_id: &str) -> StoreResult<bool> {
        Ok(self
            .conn
            .execute("DELETE FROM tokens WHERE public_id = ?1", [public_id])?
            > 0)
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Db, Store};
    use super::*;

    fn create(
        db: &Db,
        principal: &str,
        id: i64,
        name: String,
        tag: Option<String>,
    ) -> StoreResult<Outcome> {
        let principal = principal.to_owned();
        db.write(Change::Create {
            principal,
            id,
            name,
            tag,
        })
    }

    fn delete(db: &Db, principal: &str, id: i64) -> StoreResult<Outcome> {
        db.write(Change::Delete {
            principal: principal.to_owned(),
            id,
        })
    }

    #[test]
    fn group_commit_answers_each_change_and_isolates_principals() {
        let store = Store::open(Location::parse(":memory:"), 1).unwrap();
        let db = store.connect().unwrap();
        assert_eq!(
            create(&db, "a", 7, "x".into(), None).unwrap(),
            Outcome::Created
        );
        assert_eq!(
            create(&db, "a", 7, "y".into(), None).unwrap(),
            Outcome::Conflict
        );
        assert_eq!(
            create(&db, "b", 7, "z".into(), Some("t".into())).unwrap(),
            Outcome::Created
        );
        let mut seen = Vec::new();
        db.list_page("a", i64::MIN, 10, |id, name, tag| {
            seen.push((id, name.to_owned(), tag.map(str::to_owned)))
        })
        .unwrap();
        assert_eq!(seen, vec![(7, "x".to_owned(), None)]);
        assert_eq!(delete(&db, "b", 7).unwrap(), Outcome::Deleted);
        assert_eq!(delete(&db, "b", 7).unwrap(), Outcome::NotFound);
        assert_eq!(delete(&db, "a", 8).unwrap(), Outcome::NotFound);
        drop(db);
        store.close();
    }

    #[test]
    fn the_list_statement_is_compiled_once() {
        let store = Store::open(Location::parse(":memory:"), 1).unwrap();
        let db = store.connect().unwrap();
        create(&db, "a", 1, "x".into(), None).unwrap();
        for from in 0..50 {
            db.list_page("a", from, 10, |_, _, _| {}).unwrap();
        }
        #[allow(unreachable_patterns)] // the PostgreSQL variant exists with its feature only
        let reads = match &db.reads {
            super::super::Reads::Sqlite(reads) => reads,
            _ => unreachable!(),
        };
        let st = reads.conn.prepare_cached(LIST_PAGE).unwrap();
        assert_eq!(st.get_status(rusqlite::StatementStatus::RePrepare), 0);
        assert_eq!(st.get_status(rusqlite::StatementStatus::Run), 50);
    }

    #[test]
    fn a_full_disk_fails_writes_and_health_until_space_is_freed() {
        let dir = std::env::temp_dir().join(format!("plant-store-full-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let location = Location::File(dir.join("full.db"));
        let conn = location.open_writer().unwrap();
        // A database that may not grow past a few pages: a disk that fills up.
        let pages: i64 = conn
            .query_row("PRAGMA page_count", [], |r| r.get(0))
            .unwrap();
        conn.query_row(
            &format!("PRAGMA max_page_count = {}", pages + 3),
            [],
            |_| Ok(()),
        )
        .unwrap();
        let (opened, writer) = Opened::with_writer(location, conn).unwrap();
        let readers = super::super::Readers::Sqlite(opened.streams());
        let store = Store::start(super::super::Backend::Sqlite(opened), readers, writer).unwrap();
        let db = store.connect().unwrap();
        // Fill it with ever smaller rows until not even a one-byte name fits.
        let mut created = 0;
        for size in [1000, 100, 10, 1] {
            let err = loop {
                match create(&db, "a", created, "x".repeat(size), None) {
                    Ok(Outcome::Created) => created += 1,
                    Ok(other) => panic!("{other:?}"),
                    Err(e) => break e,
                }
                assert!(created < 100_000, "the database never filled up");
            };
            assert!(err.0.contains("full"), "{err}");
        }
        assert!(
            db.check().is_err(),
            "health must fail while nothing can be written"
        );
        let mut listed = 0;
        db.list_page("a", i64::MIN, 1000, |_, _, _| listed += 1)
            .unwrap();
        assert_eq!(listed, created, "the refused write left nothing behind");
        // Space comes back: health recovers by itself, and writes work again.
        for id in 0..created {
            assert_eq!(delete(&db, "a", id).unwrap(), Outcome::Deleted);
        }
        db.check().unwrap();
        assert_eq!(
            create(&db, "a", 0, "y".into(), None).unwrap(),
            Outcome::Created
        );
        drop(db);
        store.close();
        let _ = std::fs::remove_dir_all(dir);
    }
}
