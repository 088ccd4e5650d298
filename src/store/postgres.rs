//! The PostgreSQL backend (the `postgres` feature): the only module that holds the
//! `postgres` crate's types.
//!
//! One instance holds at most `--db-pool` connections: the writer thread's own, and the
//! rest in a `Pool` that workers and list streams borrow from for one request or one page.
//! Connections open when first needed. One that breaks (the server restarted or went
//! away) is dropped with every idle one, and a read is tried once more on a new
//! connection. A group of writes is one round trip (`group_sql`) and is never sent twice;
//! the write connection is checked before a group when it has been idle. Each connection
//! runs with `synchronous_commit=on`.
//!
//! The `postgres` client drives tokio-postgres on a current-thread tokio runtime inside
//! each connection: no threads of its own (README, "Scaling out").

use super::{
    BUSY_TIMEOUT, Change, Job, Outcome, POSTGRES_SCHEMA, StoreError, StoreResult, TokenOwner,
    TokenRecord, Writer, due, migrations, schema_version,
};
use crate::api::auth::Scope;
use postgres::{Client, Config, NoTls, Row, Statement};
use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

/// How long connecting may take, unless the URL says (`connect_timeout`).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Data sent and not acknowledged for this long breaks the connection (a host that
/// vanished without closing it), unless the URL says (`tcp_user_timeout`).
const TCP_USER_TIMEOUT: Duration = Duration::from_secs(10);
/// Set on every connection around the URL's own `options` (the last setting of a name
/// wins): the URL may change the statement timeout, never turn synchronous commit off.
const SESSION_DEFAULTS: &str = "-c statement_timeout=10s";
const SESSION_REQUIRED: &str = "-c synchronous_commit=on";
/// The advisory lock the migrations run under ("plants" in ASCII).
const MIGRATION_LOCK: i64 = 0x0000_706c_616e_7473;

const LIST_PAGE: &str =
    "SELECT id, name, tag FROM plants WHERE principal = $1 AND id >= $2 ORDER BY id LIMIT $3";
const TOKEN_OWNER: &str = "SELECT principal, scope, expires_at FROM tokens WHERE hash = $1";
/// A write connection idle this long is checked before a group is sent on it.
const WRITER_IDLE_CHECK: Duration = Duration::from_secs(1);
/// TCP keepalive on every connection (unless the URL sets it): idle time before the
/// first probe, between probes, and unanswered probes before the connection breaks.
const KEEPALIVE_IDLE: Duration = Duration::from_secs(5);
const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(2);
const KEEPALIVE_RETRIES: u32 = 3;

impl From<postgres::Error> for StoreError {
    fn from(e: postgres::Error) -> Self {
        StoreError(match e.as_db_error() {
            Some(db) => format!("PostgreSQL: {} ({})", db.message(), db.code().code()),
            None => format!("PostgreSQL: {e}"),
        })
    }
}

type PgResult<T> = Result<T, postgres::Error>;

/// A connection and its prepared statements.
struct Conn {
    client: Client,
    statements: HashMap<&'static str, Statement>,
}

impl Conn {
    fn statement(&mut self, sql: &'static str) -> PgResult<Statement> {
        if let Some(st) = self.statements.get(sql) {
            return Ok(st.clone());
        }
        let st = self.client.prepare(sql)?;
        self.statements.insert(sql, st.clone());
        Ok(st)
    }

    fn query(
        &mut self,
        sql: &'static str,
        params: &[&(dyn postgres::types::ToSql + Sync)],
    ) -> PgResult<Vec<Row>> {
        let st = self.statement(sql)?;
        self.client.query(&st, params)
    }
}

/// The connection settings from the URL, with this service's defaults.
fn config(url: &str) -> StoreResult<Config> {
    let mut config: Config = url
        .parse()
        .map_err(|e| StoreError(format!("not a PostgreSQL URL: {e}")))?;
    if config.get_connect_timeout().is_none() {
        config.connect_timeout(CONNECT_TIMEOUT);
    }
    if config.get_tcp_user_timeout().is_none() {
        config.tcp_user_timeout(TCP_USER_TIMEOUT);
    }
    // A peer that went away while a query waits for its answer is noticed by keepalive
    // probes, within about 5 + 3 × 2 s, unless the URL says otherwise (tokio-postgres's
    // own idle default is 2 hours).
    if config.get_keepalives_idle() == Duration::from_secs(2 * 60 * 60) {
        config.keepalives_idle(KEEPALIVE_IDLE);
    }
    if config.get_keepalives_interval().is_none() {
        config.keepalives_interval(KEEPALIVE_INTERVAL);
    }
    if config.get_keepalives_retries().is_none() {
        config.keepalives_retries(KEEPALIVE_RETRIES);
    }
    if config.get_application_name().is_none() {
        config.application_name("plant-store");
    }
    let theirs = config.get_options().unwrap_or_default();
    let options = format!("{SESSION_DEFAULTS} {theirs} {SESSION_REQUIRED}");
    config.options(&options);
    Ok(config)
}

/// Brings the schema to `schema_version()` in one transaction that holds an advisory
/// lock: of instances starting together, one migrates and the others then find nothing
/// to do.
fn migrate(client: &mut Client) -> StoreResult<()> {
    let mut tx = client.transaction()?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])?;
    tx.batch_execute("CREATE TABLE IF NOT EXISTS plant_store_schema (version bigint NOT NULL)")?;
    let current: i64 = tx
        .query_one(
            "SELECT coalesce(max(version), 0) FROM plant_store_schema",
            &[],
        )?
        .get(0);
    let Some(current) = due(current)? else {
        return Ok(());
    };
    for (_, sql) in migrations(POSTGRES_SCHEMA)
        .into_iter()
        .filter(|m| m.0 > current)
    {
        tx.batch_execute(&sql)?;
    }
    tx.execute("DELETE FROM plant_store_schema", &[])?;
    tx.execute(
        "INSERT INTO plant_store_schema (version) VALUES ($1)",
        &[&schema_version()],
    )?;
    tx.commit()?;
    log::info!(
        "database migrated from schema version {current} to {}",
        schema_version()
    );
    Ok(())
}

/// The read connections of one instance: at most `--db-pool` − 1, the writer's being the
/// last one.
pub struct Pool {
    config: Config,
    max: usize,
    /// Idle connections, and how many exist (idle and lent).
    state: Mutex<(Vec<Conn>, usize)>,
    freed: Condvar,
}

impl Pool {
    /// Connects once, migrates, and keeps the connection as the first idle one.
    pub fn open(url: &str, pool: usize) -> StoreResult<Pool> {
        let config = config(url)?;
        let mut client = config.connect(NoTls)?;
        migrate(&mut client)?;
        let first = Conn {
            client,
            statements: HashMap::new(),
        };
        Ok(Pool {
            config,
            max: pool.saturating_sub(1).max(1),
            state: Mutex::new((vec![first], 1)),
            freed: Condvar::new(),
        })
    }

    fn connect(&self) -> StoreResult<Conn> {
        Ok(Conn {
            client: self.config.connect(NoTls)?,
            statements: HashMap::new(),
        })
    }

    /// An idle connection, or a new one while fewer than `max` exist; waits up to
    /// `BUSY_TIMEOUT` for one to be given back.
    fn take(&self) -> StoreResult<Conn> {
        let deadline = Instant::now() + BUSY_TIMEOUT;
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if let Some(conn) = state.0.pop() {
                return Ok(conn);
            }
            if state.1 < self.max {
                state.1 += 1;
                drop(state);
                return self.connect().inspect_err(|_| self.gone(1));
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(StoreError::busy());
            }
            state = self
                .freed
                .wait_timeout(state, left)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }

    /// Takes back a lent connection; a broken one is dropped.
    fn give(&self, conn: Conn) {
        if conn.client.is_closed() {
            drop(conn);
            self.gone(1);
            return;
        }
        self.state
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .0
            .push(conn);
        self.freed.notify_one();
    }

    /// Counts `n` connections as closed, so new ones may open.
    fn gone(&self, n: usize) {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).1 -= n;
        self.freed.notify_all();
    }

    /// Drops every idle connection: after one broke, the others most likely did too.
    fn forget_idle(&self) {
        let idle = std::mem::take(&mut self.state.lock().unwrap_or_else(|e| e.into_inner()).0);
        let n = idle.len();
        drop(idle);
        self.gone(n);
    }

    /// Runs the read `f` on `conn`. When the connection turns out broken, drops the idle
    /// ones, replaces `conn` with a new connection and runs `f` once more.
    fn read<T>(
        &self,
        conn: &mut Conn,
        mut f: impl FnMut(&mut Conn) -> PgResult<T>,
    ) -> StoreResult<T> {
        match f(conn) {
            Err(e) if conn.client.is_closed() => {
                log::warn!("a PostgreSQL connection broke ({e}); reconnecting");
                self.forget_idle();
                *conn = self.connect()?;
                Ok(f(conn)?)
            }
            other => Ok(other?),
        }
    }

    /// `read` on a connection lent for this call only.
    fn lent<T>(&self, f: impl FnMut(&mut Conn) -> PgResult<T>) -> StoreResult<T> {
        let mut conn = self.take()?;
        let result = self.read(&mut conn, f);
        self.give(conn);
        result
    }

    /// `Db::list_page` on a lent connection.
    pub fn list_page(
        &self,
        principal: &str,
        from: i64,
        count: u32,
        mut each: impl FnMut(i64, &str, Option<&str>),
    ) -> StoreResult<u32> {
        let rows = self.lent(|c| list_rows(c, principal, from, count))?;
        visit(&rows, &mut each)
    }
}

fn list_rows(conn: &mut Conn, principal: &str, from: i64, count: u32) -> PgResult<Vec<Row>> {
    conn.query(LIST_PAGE, &[&principal, &from, &i64::from(count)])
}

/// Names and tags are bytea holding UTF-8 (`plants.sql`); they were written from `str`.
fn visit(rows: &[Row], each: &mut impl FnMut(i64, &str, Option<&str>)) -> StoreResult<u32> {
    fn text(b: &[u8]) -> StoreResult<&str> {
        std::str::from_utf8(b).map_err(|_| StoreError("a stored name or tag is not UTF-8".into()))
    }
    for row in rows {
        let name: &[u8] = row.try_get(1)?;
        let tag: Option<&[u8]> = row.try_get(2)?;
        each(row.try_get(0)?, text(name)?, tag.map(text).transpose()?);
    }
    Ok(rows.len() as u32)
}

/// One worker's reads: a connection lent per call, or for the whole of `read` from its
/// first query on (so a request refused before it queries, such as one without a token,
/// never takes a connection from the pool).
pub struct Reads {
    pool: std::sync::Arc<Pool>,
    /// `None` outside `read`; inside it, the connection its first query took.
    held: RefCell<Option<Option<Conn>>>,
}

impl Reads {
    pub(super) fn new(pool: std::sync::Arc<Pool>) -> Reads {
        Reads {
            pool,
            held: RefCell::new(None),
        }
    }

    /// Runs `f` on the held connection, or on a lent one when none is held.
    fn with<T>(&self, f: impl FnMut(&mut Conn) -> PgResult<T>) -> StoreResult<T> {
        let mut held = self.held.borrow_mut();
        if let Some(slot @ None) = held.as_mut() {
            *slot = Some(self.pool.take()?);
        }
        match held.as_mut().and_then(Option::as_mut) {
            Some(conn) => self.pool.read(conn, f),
            None => self.pool.lent(f),
        }
    }

    /// Holds one connection while `f` runs, for all its reads.
    pub(super) fn read<T, E: From<StoreError>>(
        &self,
        f: impl FnOnce() -> Result<T, E>,
    ) -> Result<T, E> {
        *self.held.borrow_mut() = Some(None);
        let result = f();
        if let Some(Some(conn)) = self.held.borrow_mut().take() {
            self.pool.give(conn);
        }
        result
    }

    pub(super) fn list_page(
        &self,
        principal: &str,
        from: i64,
        count: u32,
        mut each: impl FnMut(i64, &str, Option<&str>),
    ) -> StoreResult<u32> {
        let rows = self.with(|c| list_rows(c, principal, from, count))?;
        visit(&rows, &mut each)
    }

    pub(super) fn token_owner(&self, hash: &[u8; 32]) -> StoreResult<Option<TokenOwner>> {
        let rows = self.with(|c| c.query(TOKEN_OWNER, &[&&hash[..]]))?;
        let Some(row) = rows.first() else {
            return Ok(None);
        };
        let scope: &str = row.try_get(1)?;
        Ok(TokenOwner::from_row(
            row.try_get(0)?,
            scope,
            row.try_get(2)?,
        ))
    }

    pub(super) fn ping(&self) -> StoreResult<()> {
        self.with(|c| c.client.simple_query("SELECT 1").map(|_| ()))
    }
}

/// The writer thread's connection, outside the pool.
pub struct PgWriter {
    pool: std::sync::Arc<Pool>,
    conn: Option<Conn>,
    /// The server session behind `conn`: its process id and start time (µs since the
    /// Unix epoch).
    session: Option<(i32, i64)>,
    /// When the connection last answered.
    last_used: Instant,
    /// When this writer last removed old markers.
    pruned: Option<Instant>,
    /// Threads settling lost commits (joined at close).
    settlers: Vec<std::thread::JoinHandle<()>>,
}

/// How long a writer whose answer to a COMMIT was lost keeps trying to learn the outcome
/// (reconnecting, as the database may be restarting) before it answers 500 "unknown".
const SETTLE_WITHIN: Duration = Duration::from_secs(30);
/// The pause between two such tries.
const SETTLE_RETRY: Duration = Duration::from_millis(250);
/// A writer's first group, and then one a minute at most, removes markers older than
/// `MARKER_RETENTION_MS`, at most `PRUNE_ROWS` of them.
const PRUNE_EVERY: Duration = Duration::from_secs(60);
const MARKER_RETENTION_MS: i64 = 3_600_000;
const PRUNE_ROWS: u32 = 1000;

/// A group's marker: its row in `plant_store_groups`.
struct Marker {
    at: i64,
    nonce: [u8; 16],
}

impl Marker {
    fn new() -> StoreResult<Marker> {
        let mut nonce = [0u8; 16];
        getrandom::fill(&mut nonce).map_err(|e| StoreError(format!("no randomness: {e}")))?;
        Ok(Marker {
            at: crate::ops::clock::unix_now_millis(),
            nonce,
        })
    }
}

impl PgWriter {
    pub(super) fn new(pool: std::sync::Arc<Pool>) -> PgWriter {
        PgWriter {
            pool,
            conn: None,
            session: None,
            last_used: Instant::now(),
            pruned: None,
            settlers: Vec::new(),
        }
    }

    /// The connection to commit on. One idle for `WRITER_IDLE_CHECK` is checked first
    /// (an empty query), because a group is sent in one piece and cannot be sent again
    /// if the connection breaks under it: the database may have restarted meanwhile.
    fn conn(&mut self) -> StoreResult<&mut Conn> {
        let stale = match &mut self.conn {
            None => true,
            Some(c) if c.client.is_closed() => true,
            Some(c) if self.last_used.elapsed() > WRITER_IDLE_CHECK => {
                c.client.is_valid(CONNECT_TIMEOUT).is_err()
            }
            Some(_) => false,
        };
        if stale {
            if self.conn.is_some() {
                log::warn!("the PostgreSQL write connection broke; reconnecting");
                self.pool.forget_idle();
            }
            self.conn = None;
            let mut conn = self.pool.connect()?;
            let row = conn.client.query_one(
                "SELECT pg_backend_pid(), (extract(epoch FROM backend_start) * 1000000)::bigint FROM pg_stat_activity \
                 WHERE pid = pg_backend_pid()",
                &[],
            )?;
            self.session = Some((row.try_get(0)?, row.try_get(1)?));
            self.conn = Some(conn);
        }
        Ok(self.conn.as_mut().expect("just connected"))
    }
}

impl Writer for PgWriter {
    fn commit(&mut self, batch: &mut Vec<Job>) -> StoreResult<Vec<Outcome>> {
        // Every transaction takes its rows' locks in one order, (principal, id), so two
        // instances committing overlapping groups wait for each other but never
        // deadlock. The sort is stable: two changes of one row keep their order.
        let mut order: Vec<usize> = (0..batch.len()).collect();
        order.sort_by_key(|&i| batch[i].change.key());
        let marker = Marker::new()?;
        let prune = self
            .pruned
            .is_none_or(|t| t.elapsed() > PRUNE_EVERY)
            .then_some(marker.at - MARKER_RETENTION_MS);
        if prune.is_some() {
            self.pruned = Some(Instant::now());
        }
        let sql = group_sql(batch, &order, &marker, prune);
        let conn = self.conn()?;
        let result = conn.client.simple_query(&sql);
        let error = match result {
            Ok(messages) => {
                self.last_used = Instant::now();
                return outcomes(batch, &order, group_outcomes(&messages)?);
            }
            Err(e) => e,
        };
        if error.as_db_error().is_some() && !conn.client.is_closed() {
            // The server refused a statement: the transaction did not commit. End it.
            let _ = conn.client.batch_execute("ROLLBACK");
            self.last_used = Instant::now();
            return Err(error.into());
        }
        // The answer was lost with the connection: the group may have committed. Only a
        // group that did not take effect is answered with an error. Finding out may take
        // until the database is back, so it is done beside the writer, which goes on
        // (new groups fail at once while the database is away).
        log::warn!(
            "the PostgreSQL write connection broke during a commit ({error}); asking whether it took effect"
        );
        self.conn = None;
        self.pool.forget_idle();
        let lost = Lost {
            pool: self.pool.clone(),
            session: self.session.take(),
            marker,
            order,
            error: StoreError::from(error),
            jobs: std::mem::take(batch),
        };
        self.settlers.retain(|h| !h.is_finished());
        match std::thread::Builder::new()
            .name("settler".into())
            .spawn(move || lost.settle())
        {
            Ok(handle) => self.settlers.push(handle),
            Err(e) => {
                log::error!("cannot start a thread to settle a lost commit: {e}");
                return Err(StoreError::outcome_unknown());
            }
        }
        Ok(Vec::new())
    }

    fn close(self) {
        // Writes whose commit is being settled get their answer first (at most
        // `SETTLE_WITHIN`).
        for settler in self.settlers {
            let _ = settler.join();
        }
        log::info!("database connections closed");
    }
}

/// A group whose COMMIT was sent and whose answer was lost, with the jobs waiting for it.
struct Lost {
    pool: std::sync::Arc<Pool>,
    /// The server session that sent it: its process id and start time.
    session: Option<(i32, i64)>,
    marker: Marker,
    order: Vec<usize>,
    /// The error that broke the connection: the answer when the group did not commit.
    error: StoreError,
    jobs: Vec<Job>,
}

impl Lost {
    /// Waits until the session that sent the group has ended (ending it if it still
    /// runs, so that nothing it does comes later), then looks the group's marker up, and
    /// answers every job: by its outcome when the group committed, with the error when
    /// it did not, "unknown" when the database cannot be asked within `SETTLE_WITHIN`.
    fn settle(self) {
        let deadline = Instant::now() + SETTLE_WITHIN;
        let found = loop {
            match self.look_up(deadline) {
                Ok(found) => break Ok(found),
                Err(e) if Instant::now() + SETTLE_RETRY < deadline => {
                    log::debug!(
                        "cannot learn yet whether a group of writes committed ({e}); retrying"
                    );
                    std::thread::sleep(SETTLE_RETRY);
                }
                Err(e) => {
                    log::error!("cannot learn whether a group of writes committed: {e}");
                    break Err(StoreError::outcome_unknown());
                }
            }
        };
        let outcomes = match found {
            Ok(Some(digits)) => {
                log::info!("the group of {} writes had committed", self.jobs.len());
                outcomes(&self.jobs, &self.order, &digits)
            }
            Ok(None) => {
                log::info!("the group of {} writes had not committed", self.jobs.len());
                Err(self.error)
            }
            Err(e) => Err(e),
        };
        match outcomes {
            Ok(outcomes) => {
                for (job, outcome) in self.jobs.into_iter().zip(outcomes) {
                    (job.done)(Ok(outcome));
                }
            }
            Err(e) => {
                for job in self.jobs {
                    (job.done)(Err(StoreError(e.0.clone())));
                }
            }
        }
    }

    fn look_up(&self, deadline: Instant) -> StoreResult<Option<String>> {
        let mut conn = self.pool.connect()?;
        if let Some((pid, started)) = &self.session {
            let this = "FROM pg_stat_activity WHERE pid = $1 \
                AND (extract(epoch FROM backend_start) * 1000000)::bigint = $2";
            let alive = format!("SELECT count(*) {this}");
            let end = format!("SELECT pg_terminate_backend(pid) {this}");
            conn.client.execute(&end, &[pid, started])?;
            while conn
                .client
                .query_one(&alive, &[pid, started])?
                .get::<_, i64>(0)
                > 0
            {
                if Instant::now() > deadline {
                    return Err(StoreError(
                        "the session that sent the group is still there".into(),
                    ));
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        let row = conn.client.query_opt(
            "SELECT outcomes FROM plant_store_groups WHERE at = $1 AND nonce = $2",
            &[&self.marker.at, &&self.marker.nonce[..]],
        )?;
        Ok(row.map(|r| r.get(0)))
    }
}

/// A group of changes as one simple query, one round trip: `BEGIN`, a statement per
/// change in `order`, `COMMIT`. Values are never spliced in as text: ids are integers,
/// and every string goes in as the hex of its bytes (`decode('…', 'hex')`), which no
/// setting of the server reads differently.
fn group_sql(batch: &[Job], order: &[usize], marker: &Marker, prune: Option<i64>) -> String {
    use std::fmt::Write;
    fn hex(out: &mut String, bytes: &[u8]) {
        out.push_str("decode('");
        for b in bytes {
            let _ = write!(out, "{b:02x}");
        }
        out.push_str("', 'hex')");
    }
    fn principal(out: &mut String, text: &str) {
        out.push_str("convert_from(");
        hex(out, text.as_bytes());
        out.push_str(", 'UTF8')");
    }
    /// Appends the change's row count (0 or 1) to the group's outcomes (answering with
    /// its length only, so that the answer does not grow with the group).
    const RECORD: &str = ") SELECT length(set_config('plant_store.outcomes', \
        current_setting('plant_store.outcomes') || count(*), true)) FROM r;\n";
    let mut sql = String::with_capacity(256 + 320 * batch.len());
    sql.push_str("BEGIN;\nSELECT set_config('plant_store.outcomes', '', true);\n");
    for &i in order {
        match &batch[i].change {
            Change::Create {
                principal: p,
                id,
                name,
                tag,
            } => {
                sql.push_str("WITH r AS (INSERT INTO plants (principal, id, name, tag) VALUES (");
                principal(&mut sql, p);
                let _ = write!(sql, ", {id}, ");
                hex(&mut sql, name.as_bytes());
                sql.push_str(", ");
                match tag {
                    Some(t) => hex(&mut sql, t.as_bytes()),
                    None => sql.push_str("NULL"),
                }
                sql.push_str(") ON CONFLICT DO NOTHING RETURNING 1");
                sql.push_str(RECORD);
            }
            Change::Delete { principal: p, id } => {
                sql.push_str("WITH r AS (DELETE FROM plants WHERE principal = ");
                principal(&mut sql, p);
                let _ = write!(sql, " AND id = {id} RETURNING 1");
                sql.push_str(RECORD);
            }
            Change::Probe => sql.push_str(PROBE),
        }
    }
    if let Some(before) = prune {
        let _ = writeln!(
            sql,
            "DELETE FROM plant_store_groups WHERE (at, nonce) IN (SELECT at, nonce \
             FROM plant_store_groups WHERE at < {before} ORDER BY at LIMIT {PRUNE_ROWS});"
        );
    }
    let _ = write!(
        sql,
        "INSERT INTO plant_store_groups (at, nonce, outcomes) VALUES ({}, ",
        marker.at
    );
    hex(&mut sql, &marker.nonce);
    sql.push_str(", current_setting('plant_store.outcomes')) RETURNING outcomes;\nCOMMIT;");
    sql
}

/// The probe's two statements: a row written and removed.
const PROBE: &str = "INSERT INTO plants VALUES ('', 0, '', NULL) ON CONFLICT DO NOTHING;
DELETE FROM plants WHERE principal = '';\n";

/// The group's outcomes as its marker row holds them: the last row of the answer.
fn group_outcomes(messages: &[postgres::SimpleQueryMessage]) -> StoreResult<&str> {
    messages
        .iter()
        .rev()
        .find_map(|m| match m {
            postgres::SimpleQueryMessage::Row(row) => row.get(0),
            _ => None,
        })
        .ok_or_else(|| StoreError("PostgreSQL did not answer with the group's outcomes".into()))
}

/// The outcomes, in the batch's order, from the group's digits (one per change in
/// `order`, probes aside): 1 applied, 0 not.
fn outcomes(batch: &[Job], order: &[usize], digits: &str) -> StoreResult<Vec<Outcome>> {
    let mut digits = digits.bytes();
    let mut out: Vec<Option<Outcome>> = batch.iter().map(|_| None).collect();
    for &i in order {
        let change = &batch[i].change;
        let applied = match change {
            Change::Probe => true,
            _ => match digits.next() {
                Some(b'1') => true,
                Some(b'0') => false,
                _ => {
                    return Err(StoreError(
                        "the group's outcomes do not match its changes".into(),
                    ));
                }
            },
        };
        out[i] = Some(match (change, applied) {
            (Change::Create { .. }, true) => Outcome::Created,
            (Change::Create { .. }, false) => Outcome::Conflict,
            (Change::Delete { .. }, true) | (Change::Probe, _) => Outcome::Deleted,
            (Change::Delete { .. }, false) => Outcome::NotFound,
        });
    }
    Ok(out
        .into_iter()
        .map(|o| o.expect("every change has an outcome"))
        .collect())
}

/// Token administration on PostgreSQL: one connection, each call its own transaction.
pub struct Tokens {
    client: Client,
}

impl Tokens {
    pub(super) fn open(url: &str) -> StoreResult<Tokens> {
        let mut client = config(url)?.connect(NoTls)?;
        migrate(&mut client)?;
        Ok(Tokens { client })
    }

    pub(super) fn add(&mut self, record: &TokenRecord, hash: &[u8; 32]) -> StoreResult<()> {
        self.client.execute(
            "INSERT INTO tokens (public_id, hash, principal, scope, created_at, expires_at)
             VALUES ($1, $2, $3, $4, $5, $6)",
            &[
                &record.public_id,
                &&hash[..],
                &record.principal,
                &record.scope.as_str(),
                &record.created_at,
                &record.expires_at,
            ],
        )?;
        Ok(())
    }

    /// Ordered as on SQLite: identifiers by their bytes (`COLLATE "C"`), not by the
    /// database's locale.
    pub(super) fn list(&mut self) -> StoreResult<Vec<TokenRecord>> {
        let rows = self.client.query(
            r#"SELECT public_id, principal, scope, created_at, expires_at FROM tokens
               ORDER BY created_at, public_id COLLATE "C""#,
            &[],
        )?;
        rows.iter()
            .map(|r| {
                let scope: &str = r.try_get(2)?;
                Ok(TokenRecord {
                    public_id: r.try_get(0)?,
                    principal: r.try_get(1)?,
                    scope: Scope::parse(scope).unwrap_or(Scope::Read),
                    created_at: r.try_get(3)?,
                    expires_at: r.try_get(4)?,
                })
            })
            .collect()
    }

    pub(super) fn revoke(&mut self, public_id: &str) -> StoreResult<bool> {
        Ok(self
            .client
            .execute("DELETE FROM tokens WHERE public_id = $1", &[&public_id])?
            > 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_url_may_set_the_statement_timeout_but_not_turn_synchronous_commit_off() {
        let c = config("postgres://u:p@h/db?options=-c%20statement_timeout%3D2s%20-c%20synchronous_commit%3Doff").unwrap();
        assert_eq!(
            c.get_options(),
            Some(
                "-c statement_timeout=10s -c statement_timeout=2s -c synchronous_commit=off -c synchronous_commit=on"
            )
        );
        assert_eq!(c.get_connect_timeout(), Some(&CONNECT_TIMEOUT));
        assert_eq!(c.get_application_name(), Some("plant-store"));
        let c = config("postgres://h/db?connect_timeout=2").unwrap();
        assert_eq!(c.get_connect_timeout(), Some(&Duration::from_secs(2)));
        assert!(config("postgres://h/db?sslmode=bogus").is_err());
    }

    #[test]
    fn keepalive_notices_a_vanished_peer_unless_the_url_says_otherwise() {
        let c = config("postgres://h/db").unwrap();
        assert!(c.get_keepalives());
        assert_eq!(c.get_keepalives_idle(), KEEPALIVE_IDLE);
        assert_eq!(c.get_keepalives_interval(), Some(KEEPALIVE_INTERVAL));
        assert_eq!(c.get_keepalives_retries(), Some(KEEPALIVE_RETRIES));
        let c =
            config("postgres://h/db?keepalives_idle=60&keepalives_interval=9&keepalives_retries=1")
                .unwrap();
        assert_eq!(c.get_keepalives_idle(), Duration::from_secs(60));
        assert_eq!(c.get_keepalives_interval(), Some(Duration::from_secs(9)));
        assert_eq!(c.get_keepalives_retries(), Some(1));
    }

    fn job(change: Change) -> Job {
        Job {
            change,
            done: Box::new(|_| {}),
        }
    }

    #[test]
    fn a_group_is_one_query_with_every_string_as_hex() {
        let batch = [
            job(Change::Create {
                principal: "b".into(),
                id: -1,
                name: "x'); DROP TABLE plants; --".into(),
                tag: None,
            }),
            job(Change::Delete {
                principal: "a".into(),
                id: 9,
            }),
            job(Change::Create {
                principal: "a".into(),
                id: 2,
                name: "\0\u{0}é".into(),
                tag: Some(String::new()),
            }),
        ];
        let marker = Marker {
            at: 1_700_000_000_000,
            nonce: [0xab; 16],
        };
        let sql = group_sql(&batch, &[1, 2, 0], &marker, Some(42));
        assert!(!sql.contains("DROP"), "{sql}");
        let record = ") SELECT length(set_config('plant_store.outcomes', current_setting('plant_store.outcomes') || count(*), true)) FROM r;";
        assert_eq!(
            sql,
            format!(
                "BEGIN;\n\
                 SELECT set_config('plant_store.outcomes', '', true);\n\
                 WITH r AS (DELETE FROM plants WHERE principal = convert_from(decode('61', 'hex'), 'UTF8') AND id = 9 RETURNING 1{record}\n\
                 WITH r AS (INSERT INTO plants (principal, id, name, tag) VALUES (convert_from(decode('61', 'hex'), 'UTF8'), 2, decode('0000c3a9', 'hex'), decode('', 'hex')) ON CONFLICT DO NOTHING RETURNING 1{record}\n\
                 WITH r AS (INSERT INTO plants (principal, id, name, tag) VALUES (convert_from(decode('62', 'hex'), 'UTF8'), -1, decode('7827293b2044524f50205441424c4520706c616e74733b202d2d', 'hex'), NULL) ON CONFLICT DO NOTHING RETURNING 1{record}\n\
                 DELETE FROM plant_store_groups WHERE (at, nonce) IN (SELECT at, nonce FROM plant_store_groups WHERE at < 42 ORDER BY at LIMIT 1000);\n\
                 INSERT INTO plant_store_groups (at, nonce, outcomes) VALUES (1700000000000, decode('{}', 'hex'), current_setting('plant_store.outcomes')) RETURNING outcomes;\n\
                 COMMIT;",
                "ab".repeat(16)
            )
        );
        // Digits in the group's order (delete, then the creates of a/2 and b/-1).
        let answered = outcomes(&batch, &[1, 2, 0], "010").unwrap();
        assert_eq!(
            answered,
            [Outcome::Conflict, Outcome::NotFound, Outcome::Created]
        );
        assert!(outcomes(&batch, &[1, 2, 0], "01").is_err());
        assert!(outcomes(&batch, &[1, 2, 0], "01x").is_err());
    }
}
