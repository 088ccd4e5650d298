//! The store: one interface over two databases. Routes, auth and the HTTP side see only
//! the types of this module; the SQL lives in `sqlite/` (the default: a file or
//! `:memory:`) and `postgres/` (with the `postgres` feature: `postgres://…`), behind the
//! traits of `seam.rs`. Which backends this build has is decided here, once.
//!
//! Writes go through one writer thread per process, which commits concurrent creates and
//! deletes together (group commit, `writer.rs`): a change's `Done` is called only after
//! the COMMIT that holds it is durable, and no caller waits for it unless it asks to
//! (`Db::write`). Reads (lists, token look-ups, health checks) run on each worker's own
//! `Db`.

pub mod admin;
mod control;
mod endpoint;
#[cfg(feature = "fault-injection")]
pub mod fault;
pub mod feed;
mod health;
mod ids;
mod location;
mod operator;
pub mod retention;
mod schema;
mod seam;
mod sqlite;
pub mod terms;
mod writer;

// The one choice of backends a build makes: PostgreSQL's, or a stand-in that refuses
// every URL.
#[cfg(feature = "postgres")]
mod postgres;
#[cfg(not(feature = "postgres"))]
#[path = "no_postgres.rs"]
mod postgres;

pub use location::Location;
pub use operator::{Tokens, Webhooks, backup_into};
pub use schema::schema_version;
pub use seam::{
    Attempt, Change, DEFAULT_DB_POOL, Done, Endpoint, EndpointRecord, EventRow, LogBounds, Outcome,
    Owner, Refusal, Scope, StoreError, StoreResult, TokenOwner, TokenRecord, writer_of,
};

use crate::ops::clock::Clock;
use crate::ops::metrics::Metrics;
use feed::Board;
use seam::{Job, Opened, Reads};
use std::sync::Arc;
use std::sync::mpsc::{SyncSender, sync_channel};
use std::thread::JoinHandle;
use writer::Health;

/// The database of a running server: owns the writer thread and the retention sweep.
pub struct Store {
    backend: Box<dyn seam::Backend>,
    /// Shared by every `Db`: where the later pages of long lists are read.
    readers: Arc<dyn seam::Streams>,
    jobs: SyncSender<Job>,
    /// The writer's queue as lent to threads that may outlive the drain (deliveries);
    /// emptied at `close`, so that they cannot keep the writer open.
    lent_jobs: Arc<std::sync::Mutex<Option<SyncSender<Job>>>>,
    writer: JoinHandle<()>,
    healthy: Arc<Health>,
    board: Arc<Board>,
    /// The server's figures: made here, with the store, the first thing a server opens.
    metrics: Arc<Metrics>,
    /// The server's clock (`ops::clock`), handed to all that reads time through the store.
    clock: Arc<Clock>,
    /// Dropped to stop the sweep thread.
    sweep_stop: SyncSender<()>,
    sweep: JoinHandle<()>,
    /// Whether the writer checkpoints the WAL into the file when it closes.
    checkpoint: Arc<std::sync::atomic::AtomicBool>,
}

impl Store {
    /// Opens and migrates the database on a server's `terms` (`terms.rs`); `pool` bounds
    /// the connections to PostgreSQL; events older than `retention` are swept away; times
    /// are read on `clock`, ids drawn from `random`.
    pub fn open(
        location: &Location,
        pool: usize,
        retention: impl Into<retention::Retention>,
        (clock, random): (Arc<Clock>, crate::ops::random::Random),
        terms: terms::Terms,
    ) -> Result<Store, terms::OpenError> {
        let board = Arc::new(Board::default());
        let opened = match location {
            Location::Postgres(_) if terms.seed.is_some() || terms.test_control => {
                return Err(terms::OpenError::Refused(
                    "test control and --seed need SQLite".into(),
                ));
            }
            Location::Postgres(url) => postgres::open(url, pool, board.clone())?,
            _ => sqlite::open(location, clock.clone(), &random, terms)?,
        };
        Ok(Store::start(
            opened,
            board,
            retention.into(),
            clock,
            random,
        )?)
    }

    fn start(
        opened: Opened,
        board: Arc<Board>,
        retention: retention::Retention,
        clock: Arc<Clock>,
        random: crate::ops::random::Random,
    ) -> StoreResult<Store> {
        let (jobs, queue) = sync_channel(writer::WRITE_QUEUE);
        let healthy = Arc::new(Health::default());
        let flag = healthy.clone();
        let w = opened.writer;
        let b = board.clone();
        let metrics = Arc::new(Metrics::new());
        let m = metrics.clone();
        // The store's commit times, for its sweep's monotonic guard (its own: servers
        // in one process keep theirs apart).
        let commits = Arc::new(retention::Commits::new(retention.keep, clock.clone()));
        let c = commits.clone();
        let checkpoint = Arc::new(std::sync::atomic::AtomicBool::new(true));
        let at_close = checkpoint.clone();
        let writer = std::thread::Builder::new()
            .name("commit".into())
            .spawn(move || writer::run(w, queue, (flag, at_close), b, &m, &c, &random))
            .map_err(|e| StoreError(format!("cannot start the writer thread: {e}")))?;
        let (sweep_stop, stopped) = sync_channel(0);
        let sweep_jobs = jobs.clone();
        let sweep = std::thread::Builder::new()
            .name("sweep".into())
            .stack_size(64 * 1024)
            .spawn(move || retention::sweep(&sweep_jobs, &stopped, retention, &commits))
            .map_err(|e| StoreError(format!("cannot start the sweep thread: {e}")))?;
        Ok(Store {
            backend: opened.backend,
            readers: opened.streams,
            lent_jobs: Arc::new(std::sync::Mutex::new(Some(jobs.clone()))),
            jobs,
            writer,
            healthy,
            board,
            metrics,
            clock,
            sweep_stop,
            sweep,
            checkpoint,
        })
    }

    /// Where committed events are announced.
    pub fn board(&self) -> Arc<Board> {
        self.board.clone()
    }

    /// The figures of the server this store belongs to (`GET /metrics`).
    pub fn metrics(&self) -> Arc<Metrics> {
        self.metrics.clone()
    }

    /// A handle for one worker: its own reads, and the writer's queue.
    pub fn connect(&self) -> StoreResult<Db> {
        Ok(Db {
            reads: self.backend.connect()?,
            readers: Readers(self.readers.clone(), self.board.clone(), self.clock.clone()),
            jobs: self.jobs.clone(),
            healthy: self.healthy.clone(),
        })
    }

    /// For a thread that is not a worker and may outlive the drain (a webhook delivery):
    /// reads of its own (on SQLite, a connection of its own, so that it never waits for
    /// the workers' or the streams'), and the writer's queue, which `close` cuts.
    pub fn lend(&self) -> StoreResult<(Reader, Writes)> {
        Ok((
            Reader(self.backend.lend()?, self.clock.clone()),
            Writes(self.lent_jobs.clone()),
        ))
    }

    /// As `close`, without the final checkpoint (SQLite's on close included): the stop's
    /// time is up, and every write committed is durable in the WAL already, which the
    /// next start applies.
    pub fn close_in_haste(self) {
        self.checkpoint
            .store(false, std::sync::atomic::Ordering::SeqCst);
        self.close();
    }

    /// Lets the writer commit what is queued, then closes (on SQLite, after a checkpoint
    /// of the WAL into the main file, unless the file is no longer this database's).
    /// Call after every `Db` is dropped.
    pub fn close(self) {
        self.board.stop();
        drop(self.sweep_stop);
        let _ = self.sweep.join();
        self.lent_jobs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        drop(self.jobs);
        if self.writer.join().is_err() {
            log::error!("the writer thread panicked");
        }
    }
}

/// One worker's view of the store.
pub struct Db {
    reads: Box<dyn Reads>,
    readers: Readers,
    jobs: SyncSender<Job>,
    healthy: Arc<Health>,
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

    /// Applies a change and waits until it is durable (the unit tests' way; a worker
    /// never waits for a commit).
    #[cfg(test)]
    pub fn write(&self, change: Change) -> StoreResult<Outcome> {
        durably(|done| self.submit(change, done))
    }

    /// Calls `each(id, name, tag)` for up to `count` of the principal's plants with
    /// `id >= from`, in id order, in one short read. Returns how many it saw.
    pub fn list_page(
        &self,
        principal: &str,
        from: i64,
        count: u32,
        mut each: impl FnMut(i64, &str, Option<&str>),
    ) -> StoreResult<u32> {
        self.reads.list_page(principal, from, count, &mut each)
    }

    /// Runs `f`, whose reads share one snapshot on SQLite and one lent connection on
    /// PostgreSQL.
    pub fn read<T, E: From<StoreError>>(&self, f: impl FnOnce() -> Result<T, E>) -> Result<T, E> {
        let mut f = Some(f);
        let mut result = None;
        let ended = self.reads.read(&mut || {
            if let Some(f) = f.take() {
                result = Some(f());
            }
        });
        match (result, ended) {
            (Some(Ok(_)), Err(e)) | (None, Err(e)) => Err(e.into()),
            (Some(result), _) => result,
            (None, Ok(())) => Err(StoreError("a read ended without running".into()).into()),
        }
    }

    /// The server's clock.
    pub fn clock(&self) -> &Arc<Clock> {
        self.readers.clock()
    }

    /// The read connections for streaming a long list from another thread.
    pub fn readers(&self) -> Readers {
        self.readers.clone()
    }

    /// The store's generation now (`Readers::generation`).
    pub fn generation(&self) -> u64 {
        self.readers.generation()
    }

    /// Inside `read`: the next `token_owner` will be followed by `list_page` of its
    /// principal from `from` for `count` rows, which the backend may fetch with it.
    pub fn expect_page(&self, from: i64, count: u32) {
        self.reads.expect_page(from, count);
    }

    /// Whether writes go better with their token looked up by the commit
    /// (`Owner::Token`): one round trip fewer on PostgreSQL.
    pub fn folds_tokens(&self) -> bool {
        self.reads.folds_tokens()
    }

    /// The principal and scope of the token with this SHA-256, if it exists.
    pub fn token_owner(&self, hash: &[u8; 32]) -> StoreResult<Option<TokenOwner>> {
        self.reads.token_owner(hash)
    }

    /// Calls `each` for up to `count` of the principal's events with `seq > after`, in
    /// seq order. Returns how many it saw.
    pub fn events_page(
        &self,
        principal: &str,
        after: i64,
        count: u32,
        mut each: impl FnMut(&EventRow),
    ) -> StoreResult<u32> {
        self.reads.events_page(principal, after, count, &mut each)
    }

    /// The principal's log (last seq 0 when it has never had an event).
    pub fn log_bounds(&self, principal: &str) -> StoreResult<LogBounds> {
        Ok(self.reads.log_bounds(principal)?.unwrap_or_default())
    }

    /// `/healthz`'s check (`Health::check`): on failure, its cause and whether to log it.
    /// The probe write is queued without waiting (a full queue fails it) and answered
    /// by the writer; the check waits for it `health::PROBE_WAIT` at most.
    pub fn check(&self) -> Result<(), (StoreError, bool)> {
        self.healthy.check(&*self.reads, |done| {
            let job = Job {
                change: Change::Probe,
                done: Box::new(move |outcome| done.finish(outcome.map(drop))),
            };
            if let Err(e) = self.jobs.try_send(job) {
                let (std::sync::mpsc::TrySendError::Full(job)
                | std::sync::mpsc::TrySendError::Disconnected(job)) = e;
                (job.done)(Err(StoreError(
                    "the writer's queue is full or stopped".into(),
                )));
            }
        })
    }

    /// Who else has the database open beside this server (another server of this
    /// process, another process with the SQLite file open), as a sentence.
    pub fn others(&self) -> Option<String> {
        self.reads.others()
    }

    /// The sizes of the database file and its write-ahead log; `None` unless a file.
    pub fn size(&self) -> Option<crate::ops::metrics::DatabaseSize> {
        self.reads.size()
    }
}

/// Submits a change with `submit` and waits for its outcome, once durable.
fn durably(submit: impl FnOnce(Done)) -> StoreResult<Outcome> {
    let (reply, answer) = sync_channel(1);
    submit(Box::new(move |outcome| {
        let _ = reply.send(outcome);
    }));
    answer
        .recv()
        .map_err(|_| StoreError("the writer thread has stopped".into()))?
}

/// The writer's queue as lent by `Store::lend`: gone once the store closes.
#[derive(Clone)]
pub struct Writes(Arc<std::sync::Mutex<Option<SyncSender<Job>>>>);

impl Writes {
    /// Applies a change and waits until it is durable; fails once the store has closed.
    pub fn write(&self, change: Change) -> StoreResult<Outcome> {
        durably(|done| self.submit(change, done))
    }

    /// Queues a change without waiting for it, and only when the writer's queue has room
    /// (nothing, once the store has closed).
    pub fn try_send(&self, change: Change) {
        let jobs = self.0.lock().unwrap_or_else(|e| e.into_inner()).clone();
        if let Some(jobs) = jobs {
            let _ = jobs.try_send(Job {
                change,
                done: Box::new(|_| {}),
            });
        }
    }

    fn submit(&self, change: Change, done: Done) {
        let jobs = self.0.lock().unwrap_or_else(|e| e.into_inner()).clone();
        match jobs {
            Some(jobs) => {
                if let Err(std::sync::mpsc::SendError(job)) = jobs.send(Job { change, done }) {
                    (job.done)(Err(StoreError("the writer thread has stopped".into())));
                }
            }
            None => done(Err(StoreError("the writer thread has stopped".into()))),
        }
    }
}

/// Where the pages of a long list after the first are read, from any thread; and the
/// store's generation (`Board::replacements`), which tells whether they are all of one
/// store.
#[derive(Clone)]
pub struct Readers(Arc<dyn seam::Streams>, Arc<Board>, Arc<Clock>);

impl Readers {
    /// The server's clock.
    pub fn clock(&self) -> &Arc<Clock> {
        &self.2
    }

    /// The store's generation now: take it before a read, and ask `same_store` after.
    pub fn generation(&self) -> u64 {
        self.1.replacements()
    }

    /// Whether reads made since `generation` returned `since` were all of the current
    /// store (no restore started since, nor was under way then).
    pub fn same_store(&self, since: u64) -> bool {
        self.1.same_store(since)
    }

    /// `Db::list_page` on a lent connection.
    pub fn list_page(
        &self,
        principal: &str,
        from: i64,
        count: u32,
        mut each: impl FnMut(i64, &str, Option<&str>),
    ) -> StoreResult<u32> {
        self.0.list_page(principal, from, count, &mut each)
    }

    /// `Db::events_page` on a lent connection.
    pub fn events_page(
        &self,
        principal: &str,
        after: i64,
        count: u32,
        mut each: impl FnMut(&EventRow),
    ) -> StoreResult<u32> {
        self.0.events_page(principal, after, count, &mut each)
    }

    /// `Db::token_owner` on a lent connection.
    pub fn token_owner(&self, hash: &[u8; 32]) -> StoreResult<Option<TokenOwner>> {
        self.0.token_owner(hash)
    }
}

/// Reads of their own for threads other than workers (`Store::lend`).
pub struct Reader(Box<dyn Reads>, Arc<Clock>);

impl Reader {
    /// Every webhook endpoint, by id, with its principal's last seq (SQLite's now: steady).
    pub fn endpoints(&self) -> StoreResult<Vec<Endpoint>> {
        self.0.endpoints(self.1.steady_millis())
    }

    /// `Db::events_page`.
    pub fn events_page(
        &self,
        principal: &str,
        after: i64,
        count: u32,
        mut each: impl FnMut(&EventRow),
    ) -> StoreResult<u32> {
        self.0.events_page(principal, after, count, &mut each)
    }
}

pub use sqlite::{
    Compacted, DUE_AT_MOST, LEASE_AT_MOST, NewFiles, PAGE_SIZE, beside, compact, create_private,
};

#[cfg(test)]
mod tests;
