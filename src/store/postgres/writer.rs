//! The writer thread's connection, outside the pool: a group of writes is one round trip
//! (`group.rs`) and is never sent twice; a group whose answer was lost is settled beside
//! the writer (`lost.rs`).

use crate::ops::random::Random;
use crate::store::ids::event_ids;
use crate::store::postgres::conn::{CONNECT_TIMEOUT, Conn};
use crate::store::postgres::group::{Marker, PREPARE, group_outcomes, group_sql, key, outcomes};
use crate::store::postgres::lost::Lost;
use crate::store::postgres::pool::Pool;
use crate::store::seam::{Job, OUTCOME_UNKNOWN, Outcome, StoreError, StoreResult, Writer};
use std::time::{Duration, Instant};

/// A write connection idle this long is checked before a group is sent on it.
const WRITER_IDLE_CHECK: Duration = Duration::from_secs(1);
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

/// A writer's first group, and then one a minute at most, removes markers older than
/// `MARKER_RETENTION_MS`, at most `PRUNE_ROWS` of them.
const PRUNE_EVERY: Duration = Duration::from_secs(60);
const MARKER_RETENTION_MS: i64 = 3_600_000;

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
            conn.client.batch_execute(PREPARE)?;
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
    /// Test control and seeds are SQLite's (the command line refuses them here).
    fn admin(
        &mut self,
        _op: crate::store::admin::Admin,
        _random: &Random,
    ) -> StoreResult<crate::store::admin::Admitted> {
        Err(StoreError("test control and seeds need SQLite".into()))
    }

    fn commit(
        &mut self,
        batch: &mut Vec<Job>,
        at: i64,
        random: &Random,
    ) -> StoreResult<Vec<Outcome>> {
        // The statements' order (`key`): the principals' locks are taken first, in one
        // statement, in one order (`group_sql`), then the webhook endpoints' by id, so two
        // instances committing overlapping groups wait for each other but never
        // deadlock. The sort is stable: two changes of one row, both named by principal
        // (or both by token), keep their order; changes of one group were in flight at
        // once, so any order of them is one the clients could have seen.
        let mut order: Vec<usize> = (0..batch.len()).collect();
        order.sort_by_key(|&i| key(&batch[i].change));
        let marker = Marker::new(at)?;
        let prune = self
            .pruned
            .is_none_or(|t| t.elapsed() > PRUNE_EVERY)
            .then_some(marker.at - MARKER_RETENTION_MS);
        if prune.is_some() {
            self.pruned = Some(Instant::now());
        }
        let sql = group_sql(batch, &order, &marker, prune, &event_ids(random, batch)?);
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
            if error.code() == Some(&postgres::error::SqlState::INVALID_SQL_STATEMENT_NAME) {
                // The session lost its prepared statements (`DISCARD ALL`, a pooler's
                // other server connection): the next group connects and prepares anew.
                self.conn = None;
            }
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
                return Err(StoreError(OUTCOME_UNKNOWN.into()));
            }
        }
        Ok(Vec::new())
    }

    fn close(self: Box<Self>, _checkpoint: bool) {
        // Writes whose commit is being settled get their answer first (at most
        // `SETTLE_WITHIN`).
        for settler in self.settlers {
            let _ = settler.join();
        }
        log::info!("database connections closed");
    }
}
