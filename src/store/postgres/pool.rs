//! The read connections of one instance (`Pool`), and a worker's reads on them.

use crate::store::postgres::conn::{Conn, PgResult, Target, migrate, target};
use crate::store::seam::{
    BUSY, BUSY_TIMEOUT, Backend, Endpoint, EventRow, EventRows, LogBounds, Reads, Rows, StoreError,
    StoreResult, Streams, TokenOwner,
};
use postgres::Row;
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Instant;

const LIST_PAGE: &str =
    "SELECT id, name, tag FROM plants WHERE principal = $1 AND id >= $2 ORDER BY id LIMIT $3";
const TOKEN_OWNER: &str = "SELECT principal, scope, expires_at FROM tokens WHERE hash = $1";
/// `TOKEN_OWNER` and the first `LIST_PAGE` of the token's principal, in one statement: a
/// row per plant after the token's columns, or one row of NULLs when there is none.
const TOKEN_AND_PAGE: &str = "SELECT t.principal, t.scope, t.expires_at, p.id, p.name, p.tag \
     FROM tokens t LEFT JOIN LATERAL (SELECT id, name, tag FROM plants \
     WHERE principal = t.principal AND id >= $2 ORDER BY id LIMIT $3) p ON true \
     WHERE t.hash = $1 ORDER BY p.id";
const EVENTS_PAGE: &str = "SELECT seq, id, kind, at, plant, name, tag FROM events \
     WHERE principal = $1 AND seq > $2 ORDER BY seq LIMIT $3";
const LOG_BOUNDS: &str = "SELECT last_seq, (SELECT min(seq) FROM events WHERE principal = $1) \
     FROM event_logs WHERE principal = $1";
/// The read connections of one instance: at most `--db-pool` − 1, the writer's being the
/// last one.
pub struct Pool {
    target: Target,
    max: usize,
    /// Idle connections, and how many exist (idle and lent).
    state: Mutex<(Vec<Conn>, usize)>,
    freed: Condvar,
}

impl Pool {
    /// Connects once, migrates, and keeps the connection as the first idle one.
    pub fn open(url: &str, pool: usize) -> StoreResult<Pool> {
        let target = target(url)?;
        let mut client = target.connect()?;
        migrate(&mut client)?;
        let first = Conn {
            client,
            statements: HashMap::new(),
        };
        Ok(Pool {
            target,
            max: pool.saturating_sub(1).max(1),
            state: Mutex::new((vec![first], 1)),
            freed: Condvar::new(),
        })
    }

    pub fn connect(&self) -> StoreResult<Conn> {
        Ok(Conn {
            client: self.target.connect()?,
            statements: HashMap::new(),
        })
    }

    /// An idle connection, or a new one while fewer than `max` exist; waits up to
    /// `BUSY_TIMEOUT` for one to be given back.
    pub fn take(&self) -> StoreResult<Conn> {
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
                return Err(StoreError(BUSY.into()));
            }
            state = self
                .freed
                .wait_timeout(state, left)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }

    /// Takes back a lent connection; a broken one is dropped.
    pub fn give(&self, conn: Conn) {
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
    pub fn forget_idle(&self) {
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
}

impl Streams for Pool {
    /// `Reads::list_page` on a lent connection.
    fn list_page(&self, principal: &str, from: i64, count: u32, each: Rows) -> StoreResult<u32> {
        let rows = self.lent(|c| list_rows(c, principal, from, count))?;
        visit(&rows, each)
    }

    fn events_page(
        &self,
        principal: &str,
        after: i64,
        count: u32,
        each: EventRows,
    ) -> StoreResult<u32> {
        let rows = self.lent(|c| event_rows(c, principal, after, count))?;
        visit_events(&rows, each)
    }

    fn token_owner(&self, hash: &[u8; 32]) -> StoreResult<Option<TokenOwner>> {
        let rows = self.lent(|c| c.query(TOKEN_OWNER, &[&&hash[..]]))?;
        owner(rows.first())
    }
}

/// The owner a `TOKEN_OWNER` row names.
fn owner(row: Option<&Row>) -> StoreResult<Option<TokenOwner>> {
    let Some(row) = row else {
        return Ok(None);
    };
    let scope: &str = row.try_get(1)?;
    Ok(TokenOwner::from_row(
        row.try_get(0)?,
        scope,
        row.try_get(2)?,
    ))
}

fn text(b: &[u8]) -> StoreResult<&str> {
    std::str::from_utf8(b).map_err(|_| StoreError("a stored name or tag is not UTF-8".into()))
}

/// Calls `each` for each `EVENTS_PAGE` row.
fn visit_events(rows: &[Row], each: EventRows) -> StoreResult<u32> {
    for row in rows {
        let name: Option<&[u8]> = row.try_get(5)?;
        let tag: Option<&[u8]> = row.try_get(6)?;
        each(&EventRow {
            seq: row.try_get(0)?,
            id: row.try_get(1)?,
            kind: row.try_get(2)?,
            at_ms: row.try_get(3)?,
            plant: row.try_get(4)?,
            name: name.map(text).transpose()?,
            tag: tag.map(text).transpose()?,
        });
    }
    Ok(rows.len() as u32)
}

impl Backend for Arc<Pool> {
    fn connect(&self) -> StoreResult<Box<dyn Reads>> {
        Ok(Box::new(WorkerReads {
            pool: self.clone(),
            held: RefCell::new(None),
            expected: Cell::new(None),
            prefetched: RefCell::new(None),
        }))
    }
}

fn list_rows(conn: &mut Conn, principal: &str, from: i64, count: u32) -> PgResult<Vec<Row>> {
    conn.query(LIST_PAGE, &[&principal, &from, &i64::from(count)])
}

fn event_rows(conn: &mut Conn, principal: &str, after: i64, count: u32) -> PgResult<Vec<Row>> {
    conn.query(EVENTS_PAGE, &[&principal, &after, &i64::from(count)])
}

/// Names and tags are bytea holding UTF-8 (`plants.sql`); they were written from `str`.
fn visit(rows: &[Row], each: Rows) -> StoreResult<u32> {
    visit_from(rows, 0, each)
}

/// `visit` of rows whose id, name and tag start at column `at`; a row whose id is NULL
/// (the outer join's, when there is no plant) is none.
fn visit_from(rows: &[Row], at: usize, each: Rows) -> StoreResult<u32> {
    let mut seen = 0;
    for row in rows {
        let Some(id) = row.try_get::<_, Option<i64>>(at)? else {
            continue;
        };
        let name: &[u8] = row.try_get(at + 1)?;
        let tag: Option<&[u8]> = row.try_get(at + 2)?;
        each(id, text(name)?, tag.map(text).transpose()?);
        seen += 1;
    }
    Ok(seen)
}

/// A page fetched with the token, for the `list_page` that follows.
struct Prefetched {
    principal: String,
    from: i64,
    count: u32,
    rows: Vec<Row>,
}

/// One worker's reads: a connection lent per call, or for the whole of `read` from its
/// first query on (so a request refused before it queries, such as one without a token,
/// never takes a connection from the pool).
struct WorkerReads {
    pool: Arc<Pool>,
    /// `None` outside `read`; inside it, the connection its first query took.
    held: RefCell<Option<Option<Conn>>>,
    /// The page `expect_page` announced, until the token look-up.
    expected: Cell<Option<(i64, u32)>>,
    /// The page fetched with the token, until `list_page` or the end of `read`.
    prefetched: RefCell<Option<Prefetched>>,
}

/// The end of a `WorkerReads::read`: the held connection back to the pool.
struct EndRead<'a>(&'a WorkerReads);

impl Drop for EndRead<'_> {
    fn drop(&mut self) {
        let reads = self.0;
        reads.expected.set(None);
        if let Ok(mut prefetched) = reads.prefetched.try_borrow_mut() {
            prefetched.take();
        }
        if let Some(Some(conn)) = reads.held.try_borrow_mut().ok().and_then(|mut h| h.take()) {
            reads.pool.give(conn);
        }
    }
}

impl WorkerReads {
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
}

impl Reads for WorkerReads {
    /// A write's token is looked up in its group's round trip (`group.rs`), not in one of
    /// its own before it.
    fn folds_tokens(&self) -> bool {
        true
    }

    /// Holds one connection while `f` runs, for all its reads; gives it back however `f`
    /// ends (a panic included: else the pool would count it as lent for good).
    fn read(&self, f: &mut dyn FnMut()) -> StoreResult<()> {
        *self.held.borrow_mut() = Some(None);
        let _end = EndRead(self);
        f();
        Ok(())
    }

    fn list_page(&self, principal: &str, from: i64, count: u32, each: Rows) -> StoreResult<u32> {
        let prefetched = self.prefetched.borrow_mut().take();
        if let Some(page) = prefetched
            .filter(|p| (p.principal.as_str(), p.from, p.count) == (principal, from, count))
        {
            return visit_from(&page.rows, 3, each);
        }
        let rows = self.with(|c| list_rows(c, principal, from, count))?;
        visit(&rows, each)
    }

    fn expect_page(&self, from: i64, count: u32) {
        if self.held.borrow().is_some() && count > 0 {
            self.expected.set(Some((from, count)));
        }
    }

    fn token_owner(&self, hash: &[u8; 32]) -> StoreResult<Option<TokenOwner>> {
        let expected = self.expected.take();
        let rows = match expected {
            Some((from, count)) => {
                self.with(|c| c.query(TOKEN_AND_PAGE, &[&&hash[..], &from, &i64::from(count)]))?
            }
            None => self.with(|c| c.query(TOKEN_OWNER, &[&&hash[..]]))?,
        };
        let owner = owner(rows.first())?;
        if let (Some((from, count)), Some(owner)) = (expected, &owner) {
            *self.prefetched.borrow_mut() = Some(Prefetched {
                principal: owner.principal.clone(),
                from,
                count,
                rows,
            });
        }
        Ok(owner)
    }

    fn events_page(
        &self,
        principal: &str,
        after: i64,
        count: u32,
        each: EventRows,
    ) -> StoreResult<u32> {
        let rows = self.with(|c| event_rows(c, principal, after, count))?;
        visit_events(&rows, each)
    }

    fn endpoints(&self, _steady_ms: i64) -> StoreResult<Vec<Endpoint>> {
        self.with(crate::store::postgres::webhooks::endpoints)
    }

    fn log_bounds(&self, principal: &str) -> StoreResult<Option<LogBounds>> {
        let rows = self.with(|c| c.query(LOG_BOUNDS, &[&principal]))?;
        rows.first()
            .map(|r| {
                Ok(LogBounds {
                    last_seq: r.try_get(0)?,
                    oldest_kept: r.try_get(1)?,
                })
            })
            .transpose()
    }

    fn ping(&self) -> StoreResult<()> {
        self.with(|c| c.client.simple_query("SELECT 1").map(|_| ()))
    }
}
