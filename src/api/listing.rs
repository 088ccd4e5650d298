//! GET /plants as a stream: the JSON array is produced a page of rows at a time, each page
//! in its own short read transaction, so a long list neither sits in memory nor holds a
//! lock or pins the WAL while a slow client reads. The list is therefore not one snapshot:
//! a plant created or deleted during a long download may or may not appear. But it is all
//! of one store: a list that a restore (test control) meets between two pages is cut (an
//! error of its body, which ends the connection without the body's end), never a mix
//! of the store before and after.

use crate::api::plant::write_plant_json;
use crate::store::{Db, Readers, StoreResult};
use std::io::{self, Read};

/// Rows fetched per read transaction.
pub const PAGE_ROWS: u32 = 256;

/// The first page is read on the worker's connection; later pages on a lent one, as the
/// list is written out (by a writer thread, see `response.rs`).
pub struct PlantList {
    readers: Readers,
    principal: String,
    /// The smallest id the next page may hold; `None` once the last row was read.
    next_from: Option<i64>,
    /// Rows the caller's `limit` still allows; `None` for no limit.
    remaining: Option<u32>,
    wrote_row: bool,
    closed: bool,
    /// The store's generation when the list started (`Readers::generation`).
    generation: u64,
    buf: Vec<u8>,
    pos: usize,
}

impl PlantList {
    /// Reads the first page, so a failing database is a clean error before any byte of the
    /// answer is sent.
    /// The rows the first page of a list with this `limit` asks for.
    pub fn first_page(limit: Option<u32>) -> (i64, u32) {
        (i64::MIN, limit.map_or(PAGE_ROWS, |r| r.min(PAGE_ROWS)))
    }

    pub fn start(db: &Db, principal: String, limit: Option<u32>) -> StoreResult<Self> {
        let mut list = PlantList {
            // Taken before the first page is read.
            generation: db.generation(),
            readers: db.readers(),
            principal,
            next_from: Some(i64::MIN),
            remaining: limit,
            wrote_row: false,
            closed: false,
            buf: Vec::with_capacity(1024),
            pos: 0,
        };
        list.buf.push(b'[');
        list.fill(|principal, from, want, each| db.list_page(principal, from, want, each))?;
        Ok(list)
    }

    /// True when the whole answer is already in the buffer: send it with a length.
    pub fn is_complete(&self) -> bool {
        self.closed
    }

    /// True when every byte of the list has been read (a read would end it, reading
    /// no page).
    pub fn is_read(&self) -> bool {
        self.closed && self.pos == self.buf.len()
    }

    /// The buffered part of the answer, moved out; all of it when `is_complete`.
    pub fn into_buffer(mut self) -> Vec<u8> {
        self.buf.drain(..self.pos);
        self.buf
    }

    /// Appends the next page (and the closing `]` after the last row) to the buffer,
    /// read by `page(principal, from, count, each)`.
    fn fill(
        &mut self,
        page: impl FnOnce(&str, i64, u32, &mut dyn FnMut(i64, &str, Option<&str>)) -> StoreResult<u32>,
    ) -> StoreResult<()> {
        let want = self.remaining.map_or(PAGE_ROWS, |r| r.min(PAGE_ROWS));
        let (mut seen, mut last) = (0, None);
        if let (Some(from), true) = (self.next_from, want > 0) {
            let (buf, wrote_row) = (&mut self.buf, &mut self.wrote_row);
            seen = page(&self.principal, from, want, &mut |id, name, tag| {
                if std::mem::replace(wrote_row, true) {
                    buf.push(b',');
                }
                write_plant_json(name, tag, buf);
                last = Some(id);
            })?;
        }
        if let Some(r) = &mut self.remaining {
            *r -= seen;
        }
        self.next_from = match last {
            Some(id) if seen == want => id.checked_add(1),
            _ => None,
        };
        if self.next_from.is_none() || self.remaining == Some(0) {
            self.buf.push(b']');
            self.closed = true;
        }
        Ok(())
    }
}

impl Read for PlantList {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        while self.pos == self.buf.len() {
            if self.closed {
                return Ok(0);
            }
            self.buf.clear();
            self.pos = 0;
            #[cfg(feature = "fault-injection")]
            crate::store::fault::hold_list_page();
            let readers = self.readers.clone();
            self.fill(|principal, from, want, each| readers.list_page(principal, from, want, each))
                .map_err(|e| {
                    log::error!("listing stopped by a database error: {e}");
                    io::Error::other("database error")
                })?;
            if !self.readers.same_store(self.generation) {
                log::info!("a list is cut: the store was restored while it was read");
                self.buf.clear();
                return Err(io::Error::other("the store was restored"));
            }
        }
        let n = out.len().min(self.buf.len() - self.pos);
        out[..n].copy_from_slice(&self.buf[self.pos..self.pos + n]);
        self.pos += n;
        Ok(n)
    }
}
