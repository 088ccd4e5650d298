//! The gate: every request is read whole and checked strictly in the socket (by peeking,
//! without consuming a byte) before tiny_http parses it, by the rules of `framing/`.
//! The whole request, its body included, is in the socket before tiny_http reads it, and
//! tiny_http reads it right after the gate's last look (`refresh`). Waiting costs no CPU:
//! the socket's receive low-water mark is set to the bytes still needed, and a head is
//! awaited with a blocking peek, a body with `poll`, each waking only when they have
//! arrived (or the client closed, or a deadline shut the socket down). The head is
//! awaited under the head deadline (the watchdog's), the body under the body deadline
//! (ours: past it, 408).
//!
//! Alignment: a peek sees the socket from its read position, which is the start of the
//! next request only when tiny_http has not read ahead. tiny_http reads through a 1 KiB
//! buffer, so a pipelining client's next request may already be partly in it. The gate
//! keeps what it saw past the request it accepted (`carry`) and asks the kernel how many
//! bytes the process has read (`socket::consumed`): the next request is the tail of
//! `carry` that tiny_http holds, followed by what the socket holds. If tiny_http holds
//! bytes the gate never saw (a pipelined request that arrived just as tiny_http read),
//! the connection is closed after the answers in flight: the client sends it again.
//! Where the kernel does not say how much was read (`TCP_INFO` under an emulator such as
//! qemu-user), a connection serves one request: the first is always aligned.

use crate::http::framing::{
    Expect, Framing, Head, MAX_CHUNK_FRAMING_BYTES, MAX_HEAD_BYTES, MAX_LOOKED_BYTES, MAX_PIECES,
    Refusal, Resume, Scan, scan_chunked, scan_head,
};
use crate::http::socket::{self, Wake};
use std::os::fd::RawFd;
use std::time::Instant;

/// A wait for more of a head peeks this much at most (then looks at the rest at once).
const WAIT_PEEK_BYTES: usize = 512;

/// tiny_http reads the socket through a buffer of this size: it may hold this much past
/// the request it parsed.
const TINY_HTTP_READ_AHEAD: usize = 1024;

/// How a wait for more of a request ended.
enum Waited {
    More,
    /// Readable, yet nothing new: the receive window is full.
    Stuck,
    Late,
    Closed,
}

/// Why the gate refuses a request; each is answered (then the connection is closed).
/// What the gate lets through.
#[derive(Debug)]
pub enum Admit {
    /// A whole request (or its head, when the body is left to the body reader) is in the
    /// socket and checked: tiny_http may read it.
    Request(Head),
    /// Answer this and close.
    Refuse(Refusal),
    /// The client left, a deadline shut the socket, the server is stopping, or tiny_http
    /// holds bytes the gate did not see: close without an answer.
    Close,
}

/// One connection's gate: where the next request starts, and what was seen past it.
pub struct Gate {
    fd: RawFd,
    /// Stream offset of the next request.
    pos: u64,
    /// Bytes seen at `pos` and after, when the last request was checked.
    carry: Vec<u8>,
    buf: Vec<u8>,
    /// How many bytes of the next request tiny_http already holds: asked of the kernel
    /// once per request (nothing reads the socket while the gate waits).
    held: Option<usize>,
    /// The bytes the socket held at the last look.
    queued: usize,
    /// The socket's `SO_RCVLOWAT` now (tiny_http's reads need it back at 1).
    lowat: usize,
    /// The request accepted last, until `refresh`: how many of its bytes tiny_http held
    /// at the last look, and its length.
    accepted: Option<(usize, usize)>,
    /// tiny_http has read nothing from the socket yet.
    untouched: bool,
    /// Where the scan of the chunked body being awaited resumes.
    resume: Resume,
    /// Looks at the request being awaited so far, and the bytes they copied.
    looks: (u32, usize),
    /// The last look's wait was a `poll` that said readable (not closed): if it brought
    /// nothing new, the pieces' overhead has filled the socket's memory.
    polled_ready: bool,
}

impl Gate {
    pub fn new(fd: RawFd) -> Gate {
        Gate {
            fd,
            pos: 0,
            carry: Vec::new(),
            buf: Vec::new(),
            held: None,
            queued: 0,
            lowat: 1,
            accepted: None,
            untouched: true,
            resume: Resume::default(),
            looks: (0, 0),
            polled_ready: false,
        }
    }

    /// The bytes of the next request seen so far (at most `limit`) into `buf`: what
    /// tiny_http already holds of it (from `carry`), then a peek of what the socket holds.
    /// Returns how many bytes tiny_http holds, and how many the socket does. `None`:
    /// tiny_http holds bytes the gate never saw, or the socket failed.
    fn view(&mut self, limit: usize) -> Option<(usize, usize)> {
        self.look(limit, false)
    }

    /// `view`; with `wait`, the peek blocks until the low-water mark is reached (or the
    /// client closes, or the socket is shut down) and the bytes it returns are taken as
    /// all the socket holds.
    fn look(&mut self, limit: usize, wait: bool) -> Option<(usize, usize)> {
        self.polled_ready = false;
        let (held, queued) = match self.held {
            Some(held) if wait => (held, 0),
            Some(held) => (held, socket::inq(self.fd)),
            // Nothing has been read from a new connection.
            None if self.untouched => {
                self.held = Some(0);
                (0, socket::inq(self.fd))
            }
            None => {
                let (consumed, queued) = socket::consumed(self.fd)?;
                let held = usize::try_from(consumed.checked_sub(self.pos)?).ok()?;
                if held > self.carry.len() {
                    return None;
                }
                self.held = Some(held);
                (held, queued)
            }
        };
        self.buf.clear();
        self.buf.extend_from_slice(&self.carry[..held]);
        let room = limit.saturating_sub(held);
        let queued = if wait {
            // A blocking peek waits for no more bytes than its buffer holds: for more
            // than that (the head's start already in the socket), the wait is a poll,
            // which honours the whole low-water mark, and then a look.
            if self.lowat > WAIT_PEEK_BYTES {
                let ready = socket::wait_for(self.fd, None) == Wake::Ready;
                self.held = Some(held);
                let seen = self.look(limit, false);
                self.polled_ready = ready;
                return seen;
            }
            // Waits in a small buffer on the stack (an idle connection holds no heap for
            // it); when that fills, the rest is looked at without waiting.
            let mut first = [0u8; WAIT_PEEK_BYTES];
            let n = socket::peek_wait(self.fd, &mut first[..room.min(WAIT_PEEK_BYTES)])?;
            if n < WAIT_PEEK_BYTES {
                self.buf.extend_from_slice(&first[..n]);
                n
            } else {
                self.held = Some(held);
                return self.look(limit, false);
            }
        } else {
            if queued.min(room) > 0 {
                socket::peek_into(self.fd, &mut self.buf, queued.min(room))?;
            }
            queued
        };
        self.queued = queued;
        self.looks.1 += self.buf.len();
        Some((held, queued))
    }

    /// Counts one more piece of the request being awaited: refused past `MAX_PIECES`, or
    /// once its looks have copied `MAX_LOOKED_BYTES`, whichever comes first.
    fn another_piece(&mut self) -> Result<(), Refusal> {
        self.looks.0 += 1;
        if self.looks.0 > MAX_PIECES || self.looks.1 > MAX_LOOKED_BYTES {
            return Err(too_many_pieces());
        }
        Ok(())
    }

    /// Waits until the socket holds at least `need` bytes of the request beyond the
    /// `held` ones in tiny_http's buffer, or until `deadline`. `Stuck` when the socket
    /// says it is readable but nothing arrived since the last look: its receive window is
    /// full, and the request can never fit (the kernel would keep waking us).
    fn wait(
        &mut self,
        held: usize,
        queued: usize,
        need: usize,
        deadline: Option<Instant>,
    ) -> Waited {
        let in_socket = need.saturating_sub(held).max(queued + 1);
        self.set_lowat(in_socket);
        match socket::wait_for(self.fd, deadline) {
            // (With nothing queued, a wake always brings something.)
            Wake::Ready if queued > 0 && socket::inq(self.fd) <= queued => Waited::Stuck,
            Wake::Ready => Waited::More,
            Wake::Timeout => Waited::Late,
            Wake::Hangup => Waited::Closed,
        }
    }

    /// The bytes of the head `head` just admitted (`head`'s `Admit::Request`).
    pub fn head_bytes(&self, head: &Head) -> &[u8] {
        &self.buf[..head.len.min(self.buf.len())]
    }

    /// Waits for the next request's head and checks it. `gone` says whether the
    /// connection was shut (deadline, shutdown) while waiting.
    pub fn head(&mut self, gone: impl Fn() -> bool) -> Admit {
        const LIMIT: usize = MAX_HEAD_BYTES + 1;
        self.looks = (0, 0);
        let mut waited = false;
        loop {
            let before = self.queued;
            let Some((held, queued)) = self.look(LIMIT, waited) else {
                return self.done(Admit::Close);
            };
            if waited && !gone() && queued <= before && self.polled_ready {
                // Readable, yet nothing new: pieces so small that their overhead filled
                // the socket's memory (the kernel would keep waking us), as for a body.
                return self.done(Admit::Refuse(too_many_pieces()));
            }
            if waited && (gone() || queued <= before) {
                // Woken with nothing new: the client closed (a request may have arrived
                // together with the close: it is served), or the socket was shut.
                let whole = match scan_head(&self.buf) {
                    Scan::Done(head) if !gone() => Admit::Request(head),
                    _ => Admit::Close,
                };
                return self.done(whole);
            }
            let need = match scan_head(&self.buf) {
                Scan::Done(head) => return self.done(Admit::Request(head)),
                Scan::Refused(r) => return self.done(Admit::Refuse(r)),
                Scan::More(need) => need,
            };
            if let Err(r) = self.another_piece() {
                return self.done(Admit::Refuse(r));
            }
            // The next look waits (no spinning) until more than is there now arrives.
            self.set_lowat(need.saturating_sub(held).max(queued + 1).min(LIMIT - held));
            waited = true;
        }
    }

    /// Waits (until `deadline`) for the body of `head` to be in the socket whole before
    /// tiny_http reads the request: a `Content-Length` body (counted) or a chunked body
    /// (checked line by line), up to `max`. A client that waits for 100 Continue gets `Deferred` (before the
    /// interim answer is sent, tiny_http's, in order): a chunked body is then checked by
    /// calling this again with `continued`. A request is accepted (the next one starts
    /// after it) once its length in the stream is known.
    pub fn body(
        &mut self,
        head: &Head,
        max: usize,
        deadline: Instant,
        continued: bool,
    ) -> Result<Body, Refusal> {
        self.resume = Resume::default();
        // The head's look serves first, unless it was cut short at the head's bound.
        let mut look = match self.held {
            Some(held) if !continued && self.buf.len() <= MAX_HEAD_BYTES => {
                Some((held, self.queued))
            }
            _ => None,
        };
        loop {
            let (held, queued) = match look.take() {
                Some(seen) => seen,
                None => self
                    .view(self.limit(head))
                    .ok_or_else(|| Refusal::Malformed("the connection ended early".into()))?,
            };
            // What the request needs in all, when the body is not whole yet.
            let need = match head.framing {
                Framing::None => return self.accept(head.len, Body::Whole),
                // `n` may be `usize::MAX` (a declared length past `usize`, `parse_length`).
                Framing::Length(n) if n > max => {
                    return self.accept(head.len.saturating_add(n), Body::TooLong);
                }
                Framing::Length(n) if held + queued >= head.len + n => {
                    return self.accept(head.len + n, Body::Whole);
                }
                Framing::Length(n) => head.len + n,
                Framing::Chunked => {
                    match scan_chunked(&self.buf[head.len..], max, &mut self.resume) {
                        Scan::Done(c) if c.data > max => {
                            return self.accept(head.len + c.len, Body::TooLong);
                        }
                        Scan::Done(c) => return self.accept(head.len + c.len, Body::Whole),
                        Scan::Refused(r) => return Err(r),
                        Scan::More(n) => head.len + n,
                    }
                }
            };
            match head.expect {
                // tiny_http answers an `Expect` it does not know (417) itself.
                Some(Expect::Other) => return self.accept(head.len, Body::Deferred),
                Some(Expect::Continue) if !continued => {
                    self.reset_lowat();
                    // tiny_http reads the head before the body comes: ask again then, with
                    // what was seen of this request kept as what tiny_http will hold.
                    self.held = None;
                    self.untouched = false;
                    self.carry.clone_from(&self.buf);
                    return Ok(Body::AfterContinue);
                }
                _ => {}
            }
            self.another_piece()?;
            match self.wait(held, queued, need, Some(deadline)) {
                Waited::More => {}
                // The socket holds no more, and the body is not whole: sent in pieces so
                // small that their overhead fills the socket's memory (a body over the
                // limit is found by its length or its chunk sizes first).
                Waited::Stuck => return Err(too_many_pieces()),
                Waited::Late => return Err(Refusal::Late),
                Waited::Closed => {
                    // Whatever arrived before the close may still complete it.
                    if self.complete(head, max) {
                        continue;
                    }
                    return Err(Refusal::Malformed(
                        "the connection ended before the whole body arrived".into(),
                    ));
                }
            }
        }
    }

    /// True when a last look finds the body whole (after the client closed its side).
    fn complete(&mut self, head: &Head, max: usize) -> bool {
        let Some((held, queued)) = self.view(self.limit(head)) else {
            return false;
        };
        match head.framing {
            Framing::Length(n) => held + queued >= head.len + n,
            Framing::Chunked => matches!(
                scan_chunked(&self.buf[head.len..], max, &mut self.resume),
                Scan::Done(_)
            ),
            Framing::None => true,
        }
    }

    /// How much is looked at of the request `head` starts, and past it: a chunked body
    /// whole (up to its bound), and as much of what follows the request as tiny_http may
    /// read ahead, so that `carry` holds it.
    fn limit(&self, head: &Head) -> usize {
        let body = match head.framing {
            Framing::Chunked => crate::api::limits::MAX_BODY_BYTES + MAX_CHUNK_FRAMING_BYTES + 64,
            Framing::Length(n) => n.min(crate::api::limits::MAX_BODY_BYTES),
            Framing::None => 0,
        };
        head.len + body + TINY_HTTP_READ_AHEAD
    }

    /// Just before tiny_http reads the request accepted last: what reached the socket
    /// since the gate's last look is added to `carry`, so that the bytes tiny_http reads
    /// ahead (a pipelined request) are bytes the gate has seen. Costs one `FIONREAD` when
    /// nothing new came; what comes in the instant between this and tiny_http's read is
    /// the race that closes the connection (see the module's comment).
    pub fn refresh(&mut self) {
        let Some((held, len)) = self.accepted.take() else {
            return;
        };
        let queued = socket::inq(self.fd);
        if queued <= self.queued {
            return;
        }
        self.buf.truncate(held);
        let room = (len + TINY_HTTP_READ_AHEAD)
            .saturating_sub(held)
            .min(queued);
        if socket::peek_into(self.fd, &mut self.buf, room).is_some() {
            self.carry.clear();
            if self.buf.len() > len {
                self.carry.extend_from_slice(&self.buf[len..]);
            }
        }
    }

    /// The request is `len` bytes long: the next starts after it.
    fn accept(&mut self, len: usize, body: Body) -> Result<Body, Refusal> {
        self.reset_lowat();
        self.accepted = self.held.map(|held| (held, len));
        self.held = None;
        self.untouched = false;
        self.carry.clear();
        if self.buf.len() > len {
            self.carry.extend_from_slice(&self.buf[len..]);
        }
        self.pos = self.pos.saturating_add(len as u64);
        Ok(body)
    }

    fn done(&mut self, admit: Admit) -> Admit {
        self.reset_lowat();
        admit
    }

    fn reset_lowat(&mut self) {
        self.set_lowat(1);
    }

    fn set_lowat(&mut self, bytes: usize) {
        if self.lowat != bytes {
            socket::set_rcvlowat(self.fd, bytes);
            self.lowat = bytes;
        }
    }
}

/// What `Gate::body` found.
#[derive(Debug, PartialEq, Eq)]
pub enum Body {
    /// In the socket whole (or there is none).
    Whole,
    /// Over the limit: left for the body reader to refuse (413) after the route and token
    /// checks; the connection closes after the answer.
    TooLong,
    /// Not looked at: tiny_http refuses the request itself (an `Expect` it does not know).
    Deferred,
    /// A body the client sends only after 100 Continue: have tiny_http send that
    /// (`Request::as_reader`, in order with the connection's other answers), then call
    /// `Gate::body` again with `continued`.
    AfterContinue,
}

fn too_many_pieces() -> Refusal {
    Refusal::Malformed("the request arrived in too many pieces".into())
}
