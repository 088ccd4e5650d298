//! Test control's faults on the bytes of an answer (`truncate`, `trickle`;
//! `api::control::faults`): the answer as `response::send` made it, head and body, is
//! sent cut short or in pieces, then the connection is closed.
//!
//! Written by a writer thread of its own (`Site::on_writer`), so no worker waits on a
//! client. A long list is read a page at a time as its bytes go out (`Wire`), chunked
//! (or, for HTTP/1.0 and `TE`, ending at the close) as its ordinary answer is: at most a
//! page and a piece are held, and a `truncate` reads no further than its cut. A
//! trickle's waits between its pieces are that thread's, on the server's `Delays`: a
//! stop, a reset or a restore, or `MAX_TRICKLE_TIME` since it began, ends them (the rest
//! of the answer goes at once), and a client that left ends it within `delay::LOOK_EVERY`.

use crate::api::caller::Seen;
use crate::api::control::faults::Action;
use crate::api::listing::PlantList;
use crate::http::access::AccessLine;
use crate::http::conn::InFlight;
use crate::http::site::Site;
use crate::http::socket;
use std::io::{self, Read, Write};
use std::net::Shutdown;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tiny_http::Request;

/// The longest a trickle lasts: past it, the rest of its answer goes at once.
pub const MAX_TRICKLE_TIME: Duration = Duration::from_secs(5 * 60);
/// The most of a list read at once, and so the largest chunk of its answer.
const LIST_READ_BYTES: usize = 16 * 1024;
/// The most written at once of an answer that does not wait between its pieces (a
/// truncate's, or a trickle's once hurried), which is flushed only at its end.
const HURRIED_BYTES: usize = 64 * 1024;

/// An answer's body as `response::send` made it.
pub enum Body {
    /// Known whole: its head gives its `Content-Length`.
    Whole(Vec<u8>),
    /// A list read as it is sent: in chunks (its head says `Transfer-Encoding: chunked`),
    /// or as it is when it ends at the close.
    List { list: PlantList, chunked: bool },
}

/// The head `response::send` made for a body that ends at the close, made a chunked
/// body's: `Transfer-Encoding: chunked` before its blank line (the connection still ends
/// with the answer, as `Connection: close` says).
pub fn chunked(mut head: Vec<u8>) -> Vec<u8> {
    debug_assert!(head.ends_with(b"\r\n\r\n"));
    let end = head.len() - 2;
    head.splice(end..end, *b"Transfer-Encoding: chunked\r\n");
    head
}

/// Sends the answer to `request` (`head`, then `body` but for HEAD) as the fault in
/// `seen` says; the connection ends with it.
pub fn send(
    request: Request,
    flight: InFlight,
    site: Arc<Site>,
    seen: Seen,
    line: AccessLine,
    head: Vec<u8>,
    body: Body,
) {
    let head_only = *request.method() == tiny_http::Method::Head;
    let wire = Wire::new(head, if head_only { None } else { Some(body) });
    let shape = match seen.fault.map(|f| f.action) {
        Some(Action::Trickle { bytes, every_ms }) => Shape::Trickle {
            piece: usize::try_from(bytes).unwrap_or(usize::MAX).max(1),
            every: Duration::from_millis(every_ms),
            // Taken with the answer made: a reset from now on ends the trickle.
            cuts: site.delays.cuts(),
        },
        Some(Action::Truncate { bytes }) => {
            Shape::Truncate(bytes.map(|n| usize::try_from(n).unwrap_or(usize::MAX)))
        }
        _ => Shape::Truncate(None),
    };
    let fd = flight.conn().fd();
    // No request after this one is read or run: the connection ends with this answer.
    flight.conn().close_after_answer();
    let what = (request, flight, site.clone(), line, wire, shape);
    site.on_writer(fd, what, |(r, f, s, l, w, shape)| {
        write(r, f, &s, l, w, shape)
    });
}

/// How a fault shapes the answer's bytes.
enum Shape {
    /// Its first bytes (all when fewer), or without a count, its head and the first half
    /// of a whole body (of a list: its first read), or the first half of a head alone.
    Truncate(Option<usize>),
    /// In pieces of `piece` bytes, `every` apart; `cuts` is `Delays::cuts` when it began.
    Trickle {
        piece: usize,
        every: Duration,
        cuts: u64,
    },
}

/// The bytes of an answer in the order they go out: the head, then the body, a list read
/// as its bytes are asked for.
struct Wire {
    /// What is ready to go out, from `at` on.
    ready: Vec<u8>,
    at: usize,
    head_len: usize,
    /// The body's whole length, when it is known before it is sent.
    body_len: Option<usize>,
    /// The list still to read, and whether its bytes are chunked.
    list: Option<(PlantList, bool)>,
    /// Where the list is read into.
    read: Vec<u8>,
    /// Bytes of the answer taken so far.
    taken: usize,
}

impl Wire {
    fn new(head: Vec<u8>, body: Option<Body>) -> Wire {
        let head_len = head.len();
        let mut wire = Wire {
            ready: head,
            at: 0,
            head_len,
            body_len: Some(0),
            list: None,
            read: Vec::new(),
            taken: 0,
        };
        match body {
            None => {}
            Some(Body::Whole(data)) => {
                wire.body_len = Some(data.len());
                wire.ready.extend_from_slice(&data);
            }
            Some(Body::List { list, chunked }) => {
                wire.body_len = None;
                wire.list = Some((list, chunked));
            }
        }
        wire
    }

    /// Appends the list's next bytes to what is ready (a chunk; after its last row, the
    /// last chunk); nothing once it is read. A list that fails is read no further.
    fn load(&mut self) -> io::Result<()> {
        let Some((list, chunked)) = &mut self.list else {
            return Ok(());
        };
        let chunked = *chunked;
        self.read.resize(LIST_READ_BYTES, 0);
        let n = list
            .read(&mut self.read)
            .inspect_err(|_| self.list = None)?;
        if n == 0 {
            self.list = None;
        }
        self.ready.drain(..self.at);
        self.at = 0;
        if chunked {
            self.ready
                .extend_from_slice(format!("{n:x}\r\n").as_bytes());
        }
        self.ready.extend_from_slice(&self.read[..n]);
        if chunked {
            self.ready.extend_from_slice(b"\r\n");
        }
        Ok(())
    }

    /// Moves up to `max` of the next bytes into `piece`: as many as there are when
    /// `whole` (fewer only at the end), else at least one but no more than are ready, the
    /// list read only when none is.
    fn take(&mut self, piece: &mut Vec<u8>, max: usize, whole: bool) -> io::Result<()> {
        while piece.len() < max {
            if self.at == self.ready.len() {
                if self.list.is_none() || (!whole && !piece.is_empty()) {
                    break;
                }
                self.load()?;
                continue;
            }
            let n = (max - piece.len()).min(self.ready.len() - self.at);
            piece.extend_from_slice(&self.ready[self.at..self.at + n]);
            self.at += n;
            self.taken += n;
        }
        Ok(())
    }

    /// True when every byte has been taken; never waits for a page of the list (only
    /// its last chunk, once it is read whole, is made to know).
    fn ended(&mut self) -> io::Result<bool> {
        loop {
            match &self.list {
                _ if self.at < self.ready.len() => return Ok(false),
                None => return Ok(true),
                Some((list, _)) if !list.is_read() => return Ok(false),
                Some(_) => self.load()?,
            }
        }
    }

    /// Bytes of the body taken so far (for the access line).
    fn body_taken(&self) -> u64 {
        self.taken.saturating_sub(self.head_len) as u64
    }

    /// Where a `truncate` without `bytes` cuts: after the head and the first half of a
    /// whole body, or of a list its first read; in the middle of a head alone.
    fn half(&mut self) -> io::Result<usize> {
        match self.body_len {
            Some(0) => Ok(self.head_len / 2),
            Some(n) => Ok(self.head_len + n / 2),
            None => {
                self.load()?;
                Ok(self.ready.len())
            }
        }
    }
}

/// What a trickle waits before its next piece: `every`, or what is left of
/// `MAX_TRICKLE_TIME` since it `began`; `None` once that has passed.
fn next_wait(every: Duration, began: Instant, now: Instant) -> Option<Duration> {
    let left = (began + MAX_TRICKLE_TIME).saturating_duration_since(now);
    (!left.is_zero()).then(|| every.min(left))
}

/// Writes the answer as shaped, then shuts the connection: for writing after a whole
/// trickle, at once and both ways after a truncated answer (the client sees it end
/// there) or one that failed (a list read no further: no last chunk, so the client sees
/// an incomplete answer, never a complete one). The access line goes out before the last
/// piece.
fn write(
    request: Request,
    flight: InFlight,
    site: &Site,
    line: AccessLine,
    mut wire: Wire,
    shape: Shape,
) {
    let fd = flight.conn().fd();
    let mut writer = request.into_writer();
    let mut line = Some(line);
    let mut log = |wire: &Wire| {
        if let Some(line) = line.take() {
            line.write(wire.body_taken(), &site.metrics);
        }
    };
    let (cut, pace, how) = match shape {
        Shape::Truncate(cut) => (cut, None, Shutdown::Both),
        Shape::Trickle { piece, every, cuts } => (
            Some(usize::MAX),
            Some(Pace { piece, every, cuts }),
            Shutdown::Write,
        ),
    };
    let sent = match cut.map_or_else(|| wire.half(), Ok) {
        Ok(cut) => pieces(&mut wire, &mut writer, site, fd, (cut, pace), &mut log),
        Err(e) => Err(e),
    };
    log(&wire);
    drop(writer);
    let how = match sent {
        Ok(()) => how,
        Err(e) => {
            log::debug!("an answer a fault shapes was not sent whole: {e}");
            Shutdown::Both
        }
    };
    socket::shutdown(fd, how);
    drop(flight);
}

/// A trickle's pieces and waits (`Shape::Trickle`).
struct Pace {
    piece: usize,
    every: Duration,
    cuts: u64,
}

/// Sends the answer's first `cut` bytes (all of it when it is shorter). A truncate's go
/// at once, flushed at their end. A trickle's go in pieces, each flushed, the first at
/// once and each next `every` after the one before; once hurried (the server stops, a
/// reset or restore came since `cuts`, `MAX_TRICKLE_TIME` has passed, or the client
/// shut its side or left) the rest goes at once. A client that left fails the next write.
fn pieces(
    wire: &mut Wire,
    writer: &mut impl Write,
    site: &Site,
    fd: std::os::fd::RawFd,
    (cut, pace): (usize, Option<Pace>),
    log: &mut impl FnMut(&Wire),
) -> io::Result<()> {
    let began = Instant::now();
    let mut hurried = pace.is_none();
    let (mut bytes, mut sent) = (Vec::new(), 0);
    loop {
        bytes.clear();
        let size = match &pace {
            Some(pace) if !hurried => pace.piece,
            _ => HURRIED_BYTES,
        };
        wire.take(&mut bytes, size.min(cut - sent), !hurried)?;
        sent += bytes.len();
        // Past the cut, nothing more is read.
        let last = sent == cut || wire.ended()?;
        if last {
            log(wire);
        }
        writer.write_all(&bytes)?;
        if last {
            return writer.flush();
        }
        let Some(pace) = pace.as_ref().filter(|_| !hurried) else {
            continue;
        };
        writer.flush()?;
        let gone = || socket::peer(fd) != socket::Peer::Open;
        hurried = !next_wait(pace.every, began, Instant::now())
            .is_some_and(|wait| site.delays.pause(wait, pace.cuts, gone));
    }
}

#[cfg(test)]
mod tests;
