//! The store: one interface over two databases. Routes, auth and the HTTP side see only
//! the types of this module; the SQL lives in `sqlite.rs` (the default: a file or
//! `:memory:`) and `postgres.rs` (with the `postgres` feature: `postgres://…`).
//!
//! Writes go through one writer thread per process, which commits concurrent creates and
//! deletes together (group commit): a change's `Done` is called only after the COMMIT that
//! holds it is durable, and no caller waits for it unless it asks to (`Db::write`). Reads
//! (lists, token look-ups, health checks) run on each worker's own `Db`.

mod sqlite;

#[cfg(feature = "postgres")]
mod postgres;

use crate::api::auth::Scope;
use crate::ops::metrics::{DatabaseSize, METRICS};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The schema and its migrations (see the comment at its top).
const SCHEMA: &str = include_str!("../../plants.sql");
/// The same migrations in PostgreSQL's dialect.
#[cfg(feature = "postgres")]
const POSTGRES_SCHEMA: &str = include_str!("postgres.sql");
/// Most writes one transaction commits together.
pub const MAX_GROUP_COMMIT: usize = 512;
/// Writes that may wait for the writer thread before callers block.
const WRITE_QUEUE: usize = 1024;
/// How long a step waits for a lock (SQLite) or a free connection (PostgreSQL) before
/// it fails.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);
/// Read connections shared by the writer threads that stream long lists, on SQLite (a
/// page each at a time); one more waits for a free one.
pub const STREAM_READERS: usize = 2;
/// Connections to PostgreSQL one instance holds at most, by default (`--db-pool`).
pub const DEFAULT_DB_POOL: usize = 8;

/// A failure of the database. The text is for the log only, never for a client.
#[derive(Debug)]
pub struct StoreError(pub String);

impl From<rusqlite::Error> for StoreError {
    fn from(e: rusqlite::Error) -> Self {
        StoreError(e.to_string())
    }
}

/// The message of `StoreError::busy`.
const BUSY: &str = "no free database connection within the wait (--db-pool)";
/// The message of `StoreError::outcome_unknown`.
const OUTCOME_UNKNOWN: &str = "the database did not say whether the write took effect";

impl StoreError {
    /// Every connection of the pool stayed in use for `BUSY_TIMEOUT`: the instance is
    /// overloaded, not broken.
    #[cfg_attr(not(feature = "postgres"), allow(dead_code))]
    fn busy() -> StoreError {
        StoreError(BUSY.into())
    }

    pub fn is_busy(&self) -> bool {
        self.0 == BUSY
    }

    /// The answer to a commit was lost and the database could not be asked again in time:
    /// the write may or may not have taken effect.
    #[cfg_attr(not(feature = "postgres"), allow(dead_code))]
    fn outcome_unknown() -> StoreError {
        StoreError(OUTCOME_UNKNOWN.into())
    }

    pub fn is_outcome_unknown(&self) -> bool {
        self.0 == OUTCOME_UNKNOWN
    }
}

impl std::fmt::Display for StoreError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

pub type StoreResult<T> = Result<T, StoreError>;

/// Where the database lives, from `--db`.
#[derive(Debug, Clone)]
pub enum Location {
    /// A SQLite file.
    File(std::path::PathBuf),
    /// The name of a SQLite `memdb` database shared by this process's connections only.
    Memory(String),
    /// A PostgreSQL connection URL (`postgres://…` or `postgresql://…`).
    Postgres(String),
}

impl Location {
    pub fn parse(db: &str) -> Location {
        if db.starts_with("postgres://") || db.starts_with("postgresql://") {
            Location::Postgres(db.to_owned())
        } else if db == ":memory:" {
            use std::sync::atomic::AtomicU64;
            static NEXT: AtomicU64 = AtomicU64::new(0);
            let n = NEXT.fetch_add(1, Ordering::Relaxed);
            Location::Memory(format!(
                "file:/plant-store-{}-{n}?vfs=memdb",
                std::process::id()
            ))
        } else {
            Location::File(std::path::PathBuf::from(db))
        }
    }

    /// The URL of a PostgreSQL location, for a build that can open it.
    #[cfg(feature = "postgres")]
    fn postgres(&self) -> Option<&str> {
        match self {
            Location::Postgres(url) => Some(url),
            _ => None,
        }
    }

    /// Refuses a PostgreSQL URL in a build without the `postgres` feature.
    fn supported(&self) -> StoreResult<()> {
        match self {
            #[cfg(not(feature = "postgres"))]
            Location::Postgres(_) => Err(StoreError(
                "this build has no PostgreSQL support (build it with `--features postgres`)".into(),
            )),
            _ => Ok(()),
        }
    }
}

/// `--db` as it may be shown in a log line or an error: a PostgreSQL URL with its
/// password, and its parameters (which may name one), hidden.
pub fn redacted(db: &str) -> String {
    let Location::Postgres(url) = Location::parse(db) else {
        return db.to_owned();
    };
    // A build without PostgreSQL refuses the URL and shows none of it.
    if cfg!(not(feature = "postgres")) {
        return "a PostgreSQL URL".into();
    }
    // The credentials run from `://` to the last `@`; only the user before the first
    // `:` is shown. What follows the host is cut at the first `?`: parameters may name a
    // password too. A `?` before the last `@` is either in the password or starts
    // parameters that hold an `@`: either way nothing after the scheme is shown.
    let Some(scheme) = url.find("://").map(|i| i + 3) else {
        return "a PostgreSQL URL".into();
    };
    let last_at = url[scheme..].rfind('@');
    if last_at.is_some_and(|at| url[scheme..scheme + at].contains('?')) {
        return format!("{}…", &url[..scheme]);
    }
    let (userinfo, rest) = match last_at {
        Some(at) => (Some(&url[scheme..scheme + at]), &url[scheme + at + 1..]),
        None => (None, &url[scheme..]),
    };
    let mut shown = url[..scheme].to_owned();
    if let Some(userinfo) = userinfo {
        match userinfo.split_once(':') {
            Some((user, _)) => shown.push_str(&format!("{user}:***@")),
            None => shown.push_str(&format!("{userinfo}@")),
        }
    }
    match rest.split_once('?') {
        Some((host, _)) => shown.push_str(&format!("{host}?…")),
        None => shown.push_str(rest),
    }
    shown
}

/// The schema version this binary writes.
pub fn schema_version() -> i64 {
    migrations(SCHEMA).last().map_or(0, |m| m.0)
}

/// The migrations of a schema file: (version, SQL) in file order.
fn migrations(schema: &str) -> Vec<(i64, String)> {
    let mut out: Vec<(i64, String)> = Vec::new();
    for line in schema.lines() {
        if let Some(v) = line.strip_prefix("-- version ") {
            out.push((
                v.trim().parse().expect("bad version line in the schema"),
                String::new(),
            ));
        } else if let Some((_, sql)) = out.last_mut() {
            sql.push_str(line);
            sql.push('\n');
        }
    }
    out
}

/// Refuses a database whose schema is newer than this binary's; `Some(current)` when
/// migrations are due.
fn due(current: i64) -> StoreResult<Option<i64>> {
    let latest = schema_version();
    if current > latest {
        return Err(StoreError(format!(
            "the database has schema version {current}, newer than this binary's {latest}"
        )));
    }
    Ok((current < latest).then_some(current))
}

/// A change the writer thread applies.
pub enum Change {
    Create {
        principal: String,
        id: i64,
        name: String,
        tag: Option<String>,
    },
    Delete {
        principal: String,
        id: i64,
    },
    /// Writes and removes a row: tells whether writing works again after a failure.
    Probe,
}

impl Change {
    /// The row a change touches; the probe's row has the empty principal, which no
    /// caller has.
    #[cfg_attr(not(feature = "postgres"), allow(dead_code))]
    fn key(&self) -> (&str, i64) {
        match self {
            Change::Create { principal, id, .. } | Change::Delete { principal, id } => {
                (principal, *id)
            }
            Change::Probe => ("", 0),
        }
    }
}

/// What a committed change did.
#[derive(Debug, PartialEq, Eq)]
pub enum Outcome {
    Created,
    /// The principal already owns this id; nothing was written.
    Conflict,
    Deleted,
    /// The principal owns no plant with this id; nothing was written.
    NotFound,
}

/// What is called with a change's outcome once its transaction has committed (or
/// failed). It runs on the writer thread, so it must hand the outcome on and return.
pub type Done = Box<dyn FnOnce(StoreResult<Outcome>) + Send>;

pub(crate) struct Job {
    change: Change,
    done: Done,
}

/// The writer thread's side of a backend.
trait Writer: Send + 'static {
    /// Applies a batch in one transaction. A change that finds a conflict or nothing to
    /// delete writes nothing and does not disturb its neighbours; any other failure fails
    /// the batch, and nothing of it is committed. A writer that cannot know the outcome
    /// yet (PostgreSQL: the answer to COMMIT was lost) takes the batch's jobs, answers
    /// them from another thread once it knows, and returns `Ok` with no outcomes.
    fn commit(&mut self, batch: &mut Vec<Job>) -> StoreResult<Vec<Outcome>>;
    /// After the last batch.
    fn close(self);
}

/// The database of a running server: owns the writer thread.
pub struct Store {
    backend: Backend,
    /// Shared by every `Db`: where the later pages of long lists are read.
    readers: Arc<Readers>,
    jobs: SyncSender<Job>,
    writer: JoinHandle<()>,
    healthy: Arc<Health>,
}

/// What a `Store` opens workers' connections from.
enum Backend {
    Sqlite(sqlite::Opened),
    #[cfg(feature = "postgres")]
    Postgres(Arc<postgres::Pool>),
}

impl Store {
    /// Opens the database and migrates it; `pool` bounds the connections to PostgreSQL.
    pub fn open(location: Location, pool: usize) -> StoreResult<Store> {
        location.supported()?;
        #[cfg(feature = "postgres")]
        if let Some(url) = location.postgres() {
            let pool = Arc::new(postgres::Pool::open(url, pool)?);
            let writer = postgres::PgWriter::new(pool.clone());
            let readers = Readers::Postgres(pool.clone());
            return Store::start(Backend::Postgres(pool), readers, writer);
        }
        let _ = pool;
        let (opened, writer) = sqlite::Opened::open(location)?;
        let readers = Readers::Sqlite(opened.streams());
        Store::start(Backend::Sqlite(opened), readers, writer)
    }

    fn start(backend: Backend, readers: Readers, writer: impl Writer) -> StoreResult<Store> {
        let (jobs, queue) = sync_channel(WRITE_QUEUE);
        let healthy = Arc::new(Health::default());
        let flag = healthy.clone();
        let writer = std::thread::Builder::new()
            .name("writer".into())
            .spawn(move || run_writer(writer, queue, flag))
            .map_err(|e| StoreError(format!("cannot start the writer thread: {e}")))?;
        Ok(Store {
            backend,
            readers: Arc::new(readers),
            jobs,
            writer,
            healthy,
        })
    }

    /// A handle for one worker: its own reads, and the writer's queue.
    pub fn connect(&self) -> StoreResult<Db> {
        let reads = match &self.backend {
            Backend::Sqlite(opened) => Reads::Sqlite(opened.connect()?),
            #[cfg(feature = "postgres")]
            Backend::Postgres(pool) => Reads::Postgres(postgres::Reads::new(pool.clone())),
        };
        Ok(Db {
            reads,
            readers: self.readers.clone(),
            jobs: self.jobs.clone(),
            healthy: self.healthy.clone(),
        })
    }

    /// Lets the writer commit what is queued, then closes (on SQLite, after a checkpoint
    /// of the WAL into the main file). Call after every `Db` is dropped.
    pub fn close(self) {
        drop(self.jobs);
        if self.writer.join().is_err() {
            log::error!("the writer thread panicked");
        }
    }
}

/// What `/healthz` learns of the writer: whether the last commit went well, and since
/// when the one under way has waited for the database.
struct Health {
    ok: AtomicBool,
    /// Unix milliseconds when the commit under way was sent; 0 when none is.
    committing_since: std::sync::atomic::AtomicI64,
}

impl Default for Health {
    fn default() -> Health {
        Health {
            ok: AtomicBool::new(true),
            committing_since: std::sync::atomic::AtomicI64::new(0),
        }
    }
}

/// A commit that has waited this long for the database makes `/healthz` fail (503).
const COMMIT_STALL_MS: i64 = 20_000;

fn run_writer(mut writer: impl Writer, queue: Receiver<Job>, healthy: Arc<Health>) {
    let mut batch = Vec::with_capacity(MAX_GROUP_COMMIT);
    while let Ok(first) = queue.recv() {
        batch.push(first);
        while batch.len() < MAX_GROUP_COMMIT {
            match queue.try_recv() {
                Ok(job) => batch.push(job),
                Err(_) => break,
            }
        }
        let started = Instant::now();
        healthy
            .committing_since
            .store(crate::ops::clock::unix_now_millis(), Ordering::Relaxed);
        let committed = writer.commit(&mut batch);
        healthy.committing_since.store(0, Ordering::Relaxed);
        match committed {
            Ok(_) if batch.is_empty() => {
                // Taken, to be answered once the outcome is known.
                healthy.ok.store(false, Ordering::Relaxed);
            }
            Ok(outcomes) => {
                METRICS
                    .commit_seconds
                    .observe(started.elapsed().as_micros() as u64);
                METRICS.commit_groups.observe(batch.len() as u64);
                healthy.ok.store(true, Ordering::Relaxed);
                for (job, outcome) in batch.drain(..).zip(outcomes) {
                    (job.done)(Ok(outcome));
                }
            }
            Err(e) => {
                healthy.ok.store(false, Ordering::Relaxed);
                METRICS.commit_failures.fetch_add(1, Ordering::Relaxed);
                log::error!(
                    "database write failed, {} change(s) refused: {e}",
                    batch.len()
                );
                for job in batch.drain(..) {
                    (job.done)(Err(StoreError(e.0.clone())));
                }
            }
        }
    }
    writer.close();
}

/// One worker's view of the store.
pub struct Db {
    reads: Reads,
    readers: Arc<Readers>,
    jobs: SyncSender<Job>,
    healthy: Arc<Health>,
}

enum Reads {
    Sqlite(sqlite::Reads),
    #[cfg(feature = "postgres")]
    Postgres(postgres::Reads),
}

impl Db {
    /// Queues a change for the writer thread, which calls `done` with its outcome once
    /// the transaction holding it is durable (or has failed). Waits only while the
    /// writer's queue is full.
    pub fn submit(&self, change: Change, done: Done) {
        if let Err(std::sync::mpsc::SendError(job)) = self.jobs.send(Job { change, done }) {
            (job.done)(Err(StoreError("the writer thread has stopped".into())));
        }
    }

    /// Applies a change and waits until it is durable.
    pub fn write(&self, change: Change) -> StoreResult<Outcome> {
        let (reply, answer) = sync_channel(1);
        self.submit(
            change,
            Box::new(move |outcome| {
                let _ = reply.send(outcome);
            }),
        );
        answer
            .recv()
            .map_err(|_| StoreError("the writer thread has stopped".into()))?
    }

    /// Calls `each(id, name, tag)` for up to `count` of the principal's plants with
    /// `id >= from`, in id order, in one short read. Returns how many it saw.
    pub fn list_page(
        &self,
        principal: &str,
        from: i64,
        count: u32,
        each: impl FnMut(i64, &str, Option<&str>),
    ) -> StoreResult<u32> {
        match &self.reads {
            Reads::Sqlite(r) => r.list_page(principal, from, count, each),
            #[cfg(feature = "postgres")]
            Reads::Postgres(r) => r.list_page(principal, from, count, each),
        }
    }

    /// Runs `f`, whose reads share one snapshot on SQLite and one lent connection on
    /// PostgreSQL.
    pub fn read<T, E: From<StoreError>>(&self, f: impl FnOnce() -> Result<T, E>) -> Result<T, E> {
        match &self.reads {
            Reads::Sqlite(r) => r.read(f),
            #[cfg(feature = "postgres")]
            Reads::Postgres(r) => r.read(f),
        }
    }

    /// The read connections for streaming a long list from another thread.
    pub fn readers(&self) -> Arc<Readers> {
        self.readers.clone()
    }

    /// The principal and scope of the token with this SHA-256, if it exists.
    pub fn token_owner(&self, hash: &[u8; 32]) -> StoreResult<Option<TokenOwner>> {
        match &self.reads {
            Reads::Sqlite(r) => r.token_owner(hash),
            #[cfg(feature = "postgres")]
            Reads::Postgres(r) => r.token_owner(hash),
        }
    }

    /// Ok when the database answers a read now, and the last write committed (or, after
    /// a failed one, a probe write commits now). On SQLite the file must also still be
    /// the one opened.
    pub fn check(&self) -> StoreResult<()> {
        match &self.reads {
            Reads::Sqlite(r) => r.check_file()?,
            #[cfg(feature = "postgres")]
            Reads::Postgres(_) => {}
        }
        let since = self.healthy.committing_since.load(Ordering::Relaxed);
        if since != 0 && crate::ops::clock::unix_now_millis() - since > COMMIT_STALL_MS {
            return Err(StoreError(format!(
                "a commit has waited {} s for the database",
                (crate::ops::clock::unix_now_millis() - since) / 1000
            )));
        }
        if !self.healthy.ok.load(Ordering::Relaxed) {
            self.write(Change::Probe)?;
        }
        match &self.reads {
            Reads::Sqlite(r) => r.ping(),
            #[cfg(feature = "postgres")]
            Reads::Postgres(r) => r.ping(),
        }
    }

    /// The sizes of the database file and its write-ahead log; `None` unless a file.
    pub fn size(&self) -> Option<DatabaseSize> {
        match &self.reads {
            Reads::Sqlite(r) => r.size(),
            #[cfg(feature = "postgres")]
            Reads::Postgres(_) => None,
        }
    }
}

/// Where the pages of a long list after the first are read, from any thread.
pub enum Readers {
    Sqlite(sqlite::Streams),
    #[cfg(feature = "postgres")]
    Postgres(Arc<postgres::Pool>),
}

impl Readers {
    /// `Db::list_page` on a lent connection.
    pub fn list_page(
        &self,
        principal: &str,
        from: i64,
        count: u32,
        each: impl FnMut(i64, &str, Option<&str>),
    ) -> StoreResult<u32> {
        match self {
            Readers::Sqlite(s) => s.list_page(principal, from, count, each),
            #[cfg(feature = "postgres")]
            Readers::Postgres(pool) => pool.list_page(principal, from, count, each),
        }
    }
}

/// A token as `token list` shows it: never the token, never its hash.
#[derive(Debug)]
pub struct TokenRecord {
    pub public_id: String,
    pub principal: String,
    pub scope: Scope,
    /// Seconds since the Unix epoch.
    pub created_at: i64,
    /// Seconds since the Unix epoch; `None`: never.
    pub expires_at: Option<i64>,
}

/// Who a stored token speaks for.
pub struct TokenOwner {
    pub principal: String,
    pub scope: Scope,
    /// Seconds since the Unix epoch; `None`: never.
    pub expires_at: Option<i64>,
}

impl TokenOwner {
    /// A stored row; `None` when its scope is not one this binary knows.
    fn from_row(principal: String, scope: &str, expires_at: Option<i64>) -> Option<TokenOwner> {
        Some(TokenOwner {
            principal,
            scope: Scope::parse(scope)?,
            expires_at,
        })
    }
}

/// Token administration, for the `token` subcommands. Safe while servers run on the
/// same database: each call is one short transaction.
pub enum Tokens {
    Sqlite(sqlite::Tokens),
    #[cfg(feature = "postgres")]
    Postgres(postgres::Tokens),
}

impl Tokens {
    pub fn open(location: &Location) -> StoreResult<Tokens> {
        location.supported()?;
        #[cfg(feature = "postgres")]
        if let Some(url) = location.postgres() {
            return Ok(Tokens::Postgres(postgres::Tokens::open(url)?));
        }
        Ok(Tokens::Sqlite(sqlite::Tokens::open(location)?))
    }

    pub fn add(&mut self, record: &TokenRecord, hash: &[u8; 32]) -> StoreResult<()> {
        match self {
            Tokens::Sqlite(t) => t.add(record, hash),
            #[cfg(feature = "postgres")]
            Tokens::Postgres(t) => t.add(record, hash),
        }
    }

    /// Every token, oldest first (ties by identifier, byte order).
    pub fn list(&mut self) -> StoreResult<Vec<TokenRecord>> {
        match self {
            Tokens::Sqlite(t) => t.list(),
            #[cfg(feature = "postgres")]
            Tokens::Postgres(t) => t.list(),
        }
    }

    /// Removes a token; false when no token has this identifier.
    pub fn revoke(&mut self, public_id: &str) -> StoreResult<bool> {
        match self {
            Tokens::Sqlite(t) => t.revoke(public_id),
            #[cfg(feature = "postgres")]
            Tokens::Postgres(t) => t.revoke(public_id),
        }
    }
}

/// Writes a consistent copy of a SQLite database to `target` (which must not exist).
pub fn backup_into(location: &Location, target: &std::path::Path) -> StoreResult<()> {
    sqlite::backup_into(location, target)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn migrations_are_numbered_in_order_from_one_in_both_dialects() {
        #[cfg(feature = "postgres")]
        let schemas = [SCHEMA, POSTGRES_SCHEMA];
        #[cfg(not(feature = "postgres"))]
        let schemas = [SCHEMA];
        for schema in schemas {
            let versions: Vec<i64> = migrations(schema).iter().map(|m| m.0).collect();
            assert_eq!(versions, (1..=schema_version()).collect::<Vec<_>>());
            // Each has a statement besides its comments, or says why this dialect has none.
            assert!(migrations(schema).iter().all(|m| {
                m.1.contains("-- Nothing on SQLite")
                    || m.1
                        .lines()
                        .any(|l| !l.trim().is_empty() && !l.trim_start().starts_with("--"))
            }));
        }
    }

    #[test]
    fn every_worker_shares_one_set_of_stream_readers() {
        let store = Store::open(Location::parse(":memory:"), 2).unwrap();
        let (a, b) = (store.connect().unwrap(), store.connect().unwrap());
        assert!(Arc::ptr_eq(&a.readers(), &b.readers()));
        drop((a, b));
        store.close();
    }

    #[test]
    fn a_newer_schema_is_refused_and_an_older_one_is_due() {
        assert!(due(schema_version() + 1).is_err());
        assert_eq!(due(schema_version()).unwrap(), None);
        assert_eq!(due(1).unwrap(), Some(1));
    }

    #[test]
    #[cfg(feature = "postgres")]
    fn a_password_never_reaches_a_log_line() {
        assert_eq!(
            redacted("postgres://app:s3cret@db.example:5432/plants?sslmode=disable"),
            "postgres://app:***@db.example:5432/plants?…"
        );
        assert_eq!(
            redacted("postgresql://h/db?user=app&password=s3cret"),
            "postgresql://h/db?…"
        );
        assert_eq!(redacted("postgres://app@h"), "postgres://app@h");
        assert_eq!(redacted("plants:x@y.db"), "plants:x@y.db");
        for url in [
            "postgres://app:pa?ss@h/db",
            "postgres://app:a?b@c?d@h:5432/db?x=1",
            "postgres://h/db?user=a@b&password=s3cret",
        ] {
            assert_eq!(redacted(url), "postgres://…", "{url}");
        }
        assert_eq!(
            redacted("postgres://app:p@ss/w:rd@h/db"),
            "postgres://app:***@h/db"
        );
    }

    #[test]
    #[cfg(not(feature = "postgres"))]
    fn a_build_without_postgres_shows_no_part_of_its_url() {
        assert_eq!(redacted("postgres://app:s3cret@h/db"), "a PostgreSQL URL");
        assert_eq!(redacted("plants.db"), "plants.db");
        let refused = Store::open(Location::parse("postgres://app:s3cret@h/db"), 2);
        let err = refused.err().unwrap().0;
        assert!(err.contains("--features postgres"), "{err}");
        let err = Tokens::open(&Location::parse("postgres://h/db"))
            .err()
            .unwrap()
            .0;
        assert!(err.contains("--features postgres"), "{err}");
    }

    #[test]
    fn urls_name_postgres_and_anything_else_is_sqlite() {
        assert!(matches!(
            Location::parse("postgres://u@h/db"),
            Location::Postgres(_)
        ));
        assert!(matches!(
            Location::parse("postgresql://h/db"),
            Location::Postgres(_)
        ));
        assert!(matches!(Location::parse("postgres.db"), Location::File(_)));
        assert!(matches!(Location::parse(":memory:"), Location::Memory(_)));
    }
}
