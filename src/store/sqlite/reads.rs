//! SQLite reads: each worker's own read-only connection, and the few that long lists and
//! event streams borrow a page at a time.

use crate::ops::metrics::DatabaseSize;
use crate::store::ids::EVENT_ID_CHARS;
use crate::store::ids::event_id_text;
use crate::store::location::Location;
use crate::store::seam::{
    CREATED, DELETED, Endpoint, EventRow, EventRows, LogBounds, Reads, Rows, STREAM_READERS,
    StoreResult, Streams, TokenOwner,
};
use crate::store::sqlite::file::FileIdentity;
use rusqlite::{Connection, OptionalExtension, params};
use std::path::Path;
use std::sync::{Condvar, Mutex};

pub(super) const LIST_PAGE: &str =
    "SELECT id, name, tag FROM plants WHERE principal = ?1 AND id >= ?2 ORDER BY id LIMIT ?3";
/// Events: the id as its 16 bytes and the kind as its number (plants.sql, version 7),
/// shown as text by `events_page`.
const EVENTS_PAGE: &str = "SELECT seq, id, kind, at, plant, name, tag FROM events \
     WHERE principal = ?1 AND seq > ?2 ORDER BY seq LIMIT ?3";
const LOG_BOUNDS: &str = "SELECT last_seq, (SELECT min(seq) FROM events WHERE principal = ?1) \
     FROM log_tails WHERE principal = ?1";
const TOKEN_OWNER: &str = "SELECT principal, scope, expires_at FROM tokens WHERE hash = ?1";

/// One worker's read-only connection.
pub(super) struct WorkerReads {
    pub(super) conn: Connection,
    /// Declared after `conn`, so dropped after it: it holds the file open (`held.rs`).
    pub(super) file: Option<FileIdentity>,
}

impl Reads for WorkerReads {
    fn list_page(&self, principal: &str, from: i64, count: u32, each: Rows) -> StoreResult<u32> {
        list_page(&self.conn, principal, from, count, each)
    }

    /// Runs `f` in one read transaction, so its statements share one snapshot and one
    /// acquisition of SQLite's read lock. The transaction ends on every exit, a panic of
    /// `f` included (`ReadTransaction`): a read left open would fail every later `BEGIN`
    /// on this connection and hold back every checkpoint, so the WAL would grow for good.
    fn read(&self, f: &mut dyn FnMut()) -> StoreResult<()> {
        self.conn
            .prepare_cached("BEGIN")
            .and_then(|mut st| st.execute([]))?;
        let open = ReadTransaction(&self.conn);
        f();
        let ended = self
            .conn
            .prepare_cached("COMMIT")
            .and_then(|mut st| st.execute([]));
        drop(open);
        ended?;
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

    fn endpoints(&self, steady_ms: i64) -> StoreResult<Vec<Endpoint>> {
        crate::store::sqlite::webhooks::endpoints(&self.conn, steady_ms)
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

    /// Beside this server (its one count on the held file).
    fn others(&self) -> Option<String> {
        let file = self.file.as_ref()?;
        file.held().others(1).map(|h| h.to_string())
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

/// A read transaction under way: rolled back when dropped, unless it has ended.
struct ReadTransaction<'c>(&'c Connection);

impl Drop for ReadTransaction<'_> {
    fn drop(&mut self) {
        if !self.0.is_autocommit() {
            let _ = self.0.execute_batch("ROLLBACK");
        }
    }
}

fn list_page(
    conn: &Connection,
    principal: &str,
    from: i64,
    count: u32,
    each: Rows,
) -> StoreResult<u32> {
    page(conn, LIST_PAGE, principal, from, count, |row| {
        each(row.get(0)?, text(row, 1)?, text_or_null(row, 2)?);
        Ok(())
    })
}

pub(super) fn token_owner(conn: &Connection, hash: &[u8; 32]) -> StoreResult<Option<TokenOwner>> {
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
    let mut id = [0; EVENT_ID_CHARS];
    page(conn, EVENTS_PAGE, principal, after, count, |row| {
        each(&EventRow {
            seq: row.get(0)?,
            id: event_id_text(row.get_ref(1)?.as_blob()?, &mut id),
            kind: if row.get::<_, i64>(2)? == 1 {
                CREATED
            } else {
                DELETED
            },
            at_ms: row.get(3)?,
            plant: row.get(4)?,
            name: text_or_null(row, 5)?,
            tag: text_or_null(row, 6)?,
        });
        Ok(())
    })
}

/// Runs a page's query (principal, where it starts, how many rows) and hands each row to
/// `each`, borrowed; returns how many rows it saw.
fn page(
    conn: &Connection,
    sql: &str,
    principal: &str,
    from: i64,
    count: u32,
    mut each: impl FnMut(&rusqlite::Row) -> rusqlite::Result<()>,
) -> StoreResult<u32> {
    let mut st = conn.prepare_cached(sql)?;
    let mut rows = st.query(params![principal, from, count])?;
    let mut seen = 0;
    while let Some(row) = rows.next()? {
        each(row)?;
        seen += 1;
    }
    Ok(seen)
}

/// A text column, borrowed from its row.
fn text<'r>(row: &'r rusqlite::Row, i: usize) -> rusqlite::Result<&'r str> {
    Ok(row.get_ref(i)?.as_str()?)
}

/// A text column that may be NULL, borrowed from its row.
fn text_or_null<'r>(row: &'r rusqlite::Row, i: usize) -> rusqlite::Result<Option<&'r str>> {
    Ok(row.get_ref(i)?.as_str_or_null()?)
}

/// At most `STREAM_READERS` read-only connections, opened when first needed, lent for one
/// list page at a time.
pub(super) struct StreamReaders {
    pub(super) location: Location,
    /// Idle connections, and how many exist.
    pub(super) idle: Mutex<(Vec<Connection>, usize)>,
    pub(super) freed: Condvar,
    /// The file's guard: no connection is opened once the path names another file. It
    /// holds the file until after the connections are closed (declared after them).
    pub(super) file: Option<FileIdentity>,
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
    /// Runs `f` on a lent connection, given back however `f` ends (a panic included), so
    /// that no panic takes one of the `STREAM_READERS` for good.
    fn lent<T>(&self, f: impl FnOnce(&Connection) -> StoreResult<T>) -> StoreResult<T> {
        let lent = Lent {
            readers: self,
            conn: Some(self.lend()?),
        };
        f(lent.conn.as_ref().expect("lent until dropped"))
    }

    fn lend(&self) -> StoreResult<Connection> {
        let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if let Some(conn) = idle.0.pop() {
                return Ok(conn);
            }
            if idle.1 < STREAM_READERS {
                // Never a new connection on a file that is no longer this database's:
                // opened by its path, it would be another's.
                if let Some(f) = &self.file {
                    f.verify()?;
                }
                idle.1 += 1;
                drop(idle);
                return self.location.open_lent().inspect_err(|_| {
                    self.idle.lock().unwrap_or_else(|e| e.into_inner()).1 -= 1;
                });
            }
            idle = self.freed.wait(idle).unwrap_or_else(|e| e.into_inner());
        }
    }
}

/// A connection lent by `StreamReaders`: back among the idle ones when dropped.
struct Lent<'r> {
    readers: &'r StreamReaders,
    conn: Option<Connection>,
}

impl Drop for Lent<'_> {
    fn drop(&mut self) {
        let Some(conn) = self.conn.take() else { return };
        let mut idle = self.readers.idle.lock().unwrap_or_else(|e| e.into_inner());
        if std::thread::panicking() {
            // Its statement may have been left mid-way: closed, and a new one opened later.
            idle.1 -= 1;
            drop(conn);
        } else {
            idle.0.push(conn);
        }
        drop(idle);
        self.readers.freed.notify_one();
    }
}
