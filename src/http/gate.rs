//! The gate: every request is read whole and checked strictly in the socket (by peeking,
//! without consuming a byte) before tiny_http parses it. tiny_http is lenient where a proxy
//! in front may be strict (obs-fold read as a new header, bare LF after a chunk extension,
//! chunk sizes such as ` 2` or `+2`), and such disagreements about where a request ends
//! are how a second request is smuggled in. So the bytes tiny_http reads are always bytes
//! this module has already accepted, by RFC 9112's rules:
//! - the request line is `METHOD SP TARGET SP HTTP/1.x` ended by CRLF;
//! - header lines end in CRLF, have a token for a name, no blank before the colon, and
//!   printable ASCII for a value; a line that starts with a blank (obs-fold) is refused;
//! - a body is framed by exactly one `Content-Length` of digits, or by
//!   `Transfer-Encoding: chunked` alone; chunk sizes are hex digits, chunk lines end in
//!   CRLF, and an extension holds no control character;
//! - the head is at most `MAX_HEAD_BYTES`;
//! - header names are as tiny_http takes them (`[A-Za-z0-9_-]`, within RFC 9110's tokens).
//!
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

use crate::http::socket::{self, Wake};
use std::os::fd::RawFd;
use std::time::Instant;

/// The largest request head (request line and header lines) accepted: past it, 431.
pub const MAX_HEAD_BYTES: usize = 32 * 1024;
/// The most chunk framing (size lines, extensions, CRLFs) a chunked body may carry
/// beside its `MAX_BODY_BYTES` of data.
pub const MAX_CHUNK_FRAMING_BYTES: usize = 4 * 1024;
/// A request (head and body) may arrive in at most this many pieces: each piece costs a
/// peek of what has arrived so far, so this bounds the work a trickling client causes.
pub const MAX_PIECES: u32 = 1024;

/// How the request's body is delimited.
#[derive(Debug, PartialEq, Eq, Clone, Copy)]
pub enum Framing {
    /// No body.
    None,
    Length(usize),
    Chunked,
}

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
#[derive(Debug, PartialEq, Eq)]
pub enum Refusal {
    /// 400, with what was wrong.
    Malformed(String),
    /// 431: the head is over `MAX_HEAD_BYTES` (or more than the socket can hold).
    HeadTooLarge,
    /// 413: a chunked body more than the socket can hold while it is checked.
    BodyTooLarge,
    /// 505: HTTP/2 or later (or 0.9).
    Version,
    /// 408: the body did not arrive whole within `--body-timeout`.
    Late,
}

/// What the gate found in the bytes before it.
#[derive(Debug, PartialEq, Eq)]
pub struct Head {
    /// Bytes of the request line and headers, final CRLF included.
    pub len: usize,
    pub framing: Framing,
    /// An `Expect` header: the client may send the body only after an interim answer.
    pub expect: Option<Expect>,
    /// No request follows this one on the connection (HTTP/1.0 without keep-alive, or
    /// `Connection: close`); the rule is tiny_http's, which reads no further either.
    pub last: bool,
}

/// A request's `Expect` header.
#[derive(Debug, PartialEq, Eq, Clone, Copy)]
pub enum Expect {
    /// `100-continue`: tiny_http sends the interim answer when the body is first read.
    Continue,
    /// Anything else: tiny_http answers 417 itself.
    Other,
}

/// A scan of the bytes seen so far.
#[derive(Debug, PartialEq, Eq)]
pub enum Scan<T> {
    /// Not enough yet: at least this many bytes in all are needed.
    More(usize),
    Done(T),
    Refused(Refusal),
}

fn malformed<T>(why: impl Into<String>) -> Scan<T> {
    Scan::Refused(Refusal::Malformed(why.into()))
}

/// A token character (RFC 9110 `tchar`).
fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// Scans a request head at the start of `buf`.
pub fn scan_head(buf: &[u8]) -> Scan<Head> {
    let mut lines = Vec::new();
    let mut start = 0;
    loop {
        let Some(at) = buf[start..].iter().position(|&b| b == b'\n' || b == b'\r') else {
            if buf.len() > MAX_HEAD_BYTES {
                return Scan::Refused(Refusal::HeadTooLarge);
            }
            if lines.is_empty() {
                // What cannot become a request line is refused at once; an HTTP/2
                // preface is judged once its line is whole.
                if let Err(r) = check_method_so_far(buf) {
                    return Scan::Refused(r);
                }
            }
            return Scan::More(buf.len() + 1);
        };
        let end = start + at;
        if buf[end] == b'\n' {
            return malformed("a line ends in a bare LF; lines end in CRLF");
        }
        match buf.get(end + 1) {
            None => return Scan::More(end + 2),
            Some(b'\n') => {}
            Some(_) => return malformed("a bare CR in the request head"),
        }
        if end + 2 > MAX_HEAD_BYTES {
            return Scan::Refused(Refusal::HeadTooLarge);
        }
        let line = &buf[start..end];
        start = end + 2;
        if line.is_empty() {
            if lines.is_empty() {
                return malformed("an empty line where the request line belongs");
            }
            break;
        }
        lines.push(line);
    }
    if let Err(r) = check_request_line(lines[0]) {
        return Scan::Refused(r);
    }
    let mut lengths = Vec::new();
    let mut encodings = Vec::new();
    let mut expect = None;
    let mut connection: Option<Vec<u8>> = None;
    for line in &lines[1..] {
        let (name, value) = match header(line) {
            Ok(h) => h,
            Err(why) => return malformed(why),
        };
        if name.eq_ignore_ascii_case(b"content-length") {
            lengths.push(value);
        } else if name.eq_ignore_ascii_case(b"transfer-encoding") {
            encodings.push(value);
        } else if name.eq_ignore_ascii_case(b"expect") && expect.is_none() {
            // tiny_http looks at the first one only.
            expect = Some(match value.eq_ignore_ascii_case(b"100-continue") {
                true => Expect::Continue,
                false => Expect::Other,
            });
        } else if name.eq_ignore_ascii_case(b"connection") && connection.is_none() {
            connection = Some(value.to_ascii_lowercase());
        }
    }
    let framing = match framing(&lengths, &encodings) {
        Ok(f) => f,
        Err(why) => return malformed(why),
    };
    let has = |word: &[u8]| {
        connection
            .as_deref()
            .is_some_and(|c| c.windows(word.len()).any(|w| w == word))
    };
    let http10 = lines[0].ends_with(b"HTTP/1.0");
    let last = has(b"close") || has(b"upgrade") || (http10 && !has(b"keep-alive"));
    if has(b"upgrade") && framing != Framing::None {
        // tiny_http hands such a request the whole rest of the stream as its body.
        return malformed("a request with a body cannot ask for a protocol upgrade");
    }
    Scan::Done(Head {
        len: start,
        framing,
        expect,
        last,
    })
}

/// While the request line is still arriving: refuse at once what cannot become one.
fn check_method_so_far(partial: &[u8]) -> Result<(), Refusal> {
    let method = partial.split(|&b| b == b' ').next().unwrap_or(partial);
    if method.iter().all(|&b| is_tchar(b)) {
        Ok(())
    } else {
        Err(Refusal::Malformed("the request line is malformed".into()))
    }
}

/// `METHOD SP TARGET SP HTTP/1.0|1.1`.
fn check_request_line(line: &[u8]) -> Result<(), Refusal> {
    let bad = || Refusal::Malformed("the request line is malformed".into());
    let mut parts = line.split(|&b| b == b' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(bad());
    };
    if method.is_empty() || !method.iter().all(|&b| is_tchar(b)) {
        return Err(bad());
    }
    if target.is_empty() || !target.iter().all(|&b| (0x21..0x7f).contains(&b)) {
        return Err(bad());
    }
    match version {
        b"HTTP/1.0" | b"HTTP/1.1" => Ok(()),
        [b'H', b'T', b'T', b'P', b'/', major, b'.', minor]
            if major.is_ascii_digit() && minor.is_ascii_digit() =>
        {
            Err(Refusal::Version)
        }
        _ => Err(bad()),
    }
}

/// A header line's name and value (blanks around the value removed).
fn header(line: &[u8]) -> Result<(&[u8], &[u8]), String> {
    if line[0] == b' ' || line[0] == b'\t' {
        return Err("a header line starts with a blank (obsolete line folding)".into());
    }
    let Some(colon) = line.iter().position(|&b| b == b':') else {
        return Err("a header line has no colon".into());
    };
    let name = &line[..colon];
    // tiny_http takes only these of RFC 9110's token characters in a name.
    if name.is_empty()
        || !name
            .iter()
            .all(|&b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    {
        return Err("a header name may hold only letters, digits, `-` and `_`".into());
    }
    let value = line[colon + 1..].trim_ascii();
    if !value.iter().all(|&b| (0x20..0x7f).contains(&b)) {
        return Err("a header value holds a control or non-ASCII character".into());
    }
    Ok((name, value))
}

/// Exactly one `Content-Length` of digits, or `Transfer-Encoding: chunked` alone, or
/// neither.
fn framing(lengths: &[&[u8]], encodings: &[&[u8]]) -> Result<Framing, String> {
    match (lengths, encodings) {
        ([], []) => Ok(Framing::None),
        ([_, ..], [_, ..]) => Err("Content-Length and Transfer-Encoding together".into()),
        ([length], []) => parse_length(length).map(Framing::Length),
        ([_, _, ..], []) => Err("Content-Length is given more than once".into()),
        ([], [b"chunked"]) => Ok(Framing::Chunked),
        ([], [coding]) if coding.eq_ignore_ascii_case(b"chunked") => Err(
            "Transfer-Encoding must be written `chunked`, in lower case (the only spelling this server's HTTP parser takes)".into(),
        ),
        ([], [_]) => Err("Transfer-Encoding must be `chunked`".into()),
        ([], _) => Err("Transfer-Encoding is given more than once".into()),
    }
}

/// A `Content-Length` value: decimal digits only, within `usize`.
fn parse_length(raw: &[u8]) -> Result<usize, String> {
    if !raw.is_empty() && raw.iter().all(u8::is_ascii_digit) {
        if let Some(n) = std::str::from_utf8(raw).ok().and_then(|s| s.parse().ok()) {
            return Ok(n);
        }
    }
    Err(format!(
        "Content-Length must be decimal digits, not `{}`",
        crate::api::error::printable(&String::from_utf8_lossy(raw), 32)
    ))
}

/// A chunked body, scanned.
#[derive(Debug, PartialEq, Eq)]
pub struct Chunked {
    /// Raw bytes of the body, last chunk and final CRLF included.
    pub len: usize,
    /// Bytes of data in it.
    pub data: usize,
}

/// Scans a chunked body at the start of `buf`. More than `max_data` bytes of data is
/// `Done` with `data` over `max_data`: the body is too long (413; the rest is never read
/// as a request). More than `MAX_CHUNK_FRAMING_BYTES` of framing is refused.
pub fn scan_chunked(buf: &[u8], max_data: usize) -> Scan<Chunked> {
    let mut at = 0;
    let mut data = 0usize;
    loop {
        if data > max_data {
            return Scan::Done(Chunked { len: at, data });
        }
        if at > max_data + MAX_CHUNK_FRAMING_BYTES {
            return malformed("a chunked body carries too much framing (chunk lines)");
        }
        let line_end = match line(&buf[at..]) {
            Scan::More(n) => return Scan::More(at + n),
            Scan::Refused(r) => return Scan::Refused(r),
            Scan::Done(n) => at + n,
        };
        let line = &buf[at..line_end - 2];
        let (size, ext) = match line.iter().position(|&b| b == b';') {
            Some(semi) => (&line[..semi], &line[semi..]),
            None => (line, &line[line.len()..]),
        };
        if size.is_empty() || size.len() > 16 || !size.iter().all(u8::is_ascii_hexdigit) {
            return malformed("a chunk size must be hex digits");
        }
        if !ext.iter().all(|&b| b == b'\t' || (0x20..0x7f).contains(&b)) {
            return malformed("a chunk extension holds a control character");
        }
        // At most 16 hex digits: within u64, and past any limit where usize is smaller.
        let size = std::str::from_utf8(size)
            .ok()
            .and_then(|s| usize::from_str_radix(s, 16).ok())
            .unwrap_or(usize::MAX);
        at = line_end;
        if size == 0 {
            // No trailer fields: the body ends with an empty line.
            return match buf.get(at..at + 2) {
                None if buf.len() <= at + 1 && buf[at..].iter().all(|&b| b == b'\r') => {
                    Scan::More(at + 2)
                }
                Some(b"\r\n") => Scan::Done(Chunked { len: at + 2, data }),
                _ => malformed("trailer fields are not accepted after the last chunk"),
            };
        }
        data = data.saturating_add(size);
        if data > max_data {
            return Scan::Done(Chunked { len: at, data });
        }
        let end = at + size;
        match buf.get(end..end + 2) {
            None if buf.len() < end + 2 => {
                if buf.len() == end + 1 && buf[end] != b'\r' {
                    return malformed("chunk data must be followed by CRLF");
                }
                return Scan::More(end + 2);
            }
            Some(b"\r\n") => at = end + 2,
            _ => return malformed("chunk data must be followed by CRLF"),
        }
    }
}

/// The length of the line at the start of `buf`, its CRLF included: at most 1 KiB, no
/// bare CR or LF.
fn line(buf: &[u8]) -> Scan<usize> {
    const MAX_LINE: usize = 1024;
    match buf.iter().position(|&b| b == b'\r' || b == b'\n') {
        None if buf.len() >= MAX_LINE => malformed("a chunk line is too long"),
        None => Scan::More(buf.len() + 1),
        Some(i) if buf[i] == b'\n' => malformed("a chunk line ends in a bare LF"),
        Some(i) => match buf.get(i + 1) {
            None => Scan::More(i + 2),
            Some(b'\n') => Scan::Done(i + 2),
            Some(_) => malformed("a bare CR in a chunk line"),
        },
    }
}

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
        Some((held, queued))
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

    /// Waits for the next request's head and checks it. `gone` says whether the
    /// connection was shut (deadline, shutdown) while waiting.
    pub fn head(&mut self, gone: impl Fn() -> bool) -> Admit {
        const LIMIT: usize = MAX_HEAD_BYTES + 1;
        let mut pieces = 0;
        let mut waited = false;
        loop {
            let before = self.queued;
            let Some((held, queued)) = self.look(LIMIT, waited) else {
                return self.done(Admit::Close);
            };
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
            pieces += 1;
            if pieces > MAX_PIECES {
                return self.done(Admit::Refuse(Refusal::Malformed(
                    "the request head arrived in too many pieces".into(),
                )));
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
        let mut pieces = 0;
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
                Framing::Length(n) if n > max => return self.accept(head.len + n, Body::TooLong),
                Framing::Length(n) if held + queued >= head.len + n => {
                    return self.accept(head.len + n, Body::Whole);
                }
                Framing::Length(n) => head.len + n,
                Framing::Chunked => match scan_chunked(&self.buf[head.len..], max) {
                    Scan::Done(c) if c.data > max => {
                        return self.accept(head.len + c.len, Body::TooLong);
                    }
                    Scan::Done(c) => return self.accept(head.len + c.len, Body::Whole),
                    Scan::Refused(r) => return Err(r),
                    Scan::More(n) => head.len + n,
                },
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
            pieces += 1;
            if pieces > MAX_PIECES {
                return Err(Refusal::Malformed(
                    "the request body arrived in too many pieces".into(),
                ));
            }
            match self.wait(held, queued, need, Some(deadline)) {
                Waited::More => {}
                Waited::Stuck => return Err(Refusal::BodyTooLarge),
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
            Framing::Chunked => matches!(scan_chunked(&self.buf[head.len..], max), Scan::Done(_)),
            Framing::None => true,
        }
    }

    /// How much is looked at of the request `head` starts, and past it: a chunked body
    /// whole (up to its bound), and as much of what follows the request as tiny_http may
    /// read ahead, so that `carry` holds it.
    fn limit(&self, head: &Head) -> usize {
        let body = match head.framing {
            Framing::Chunked => crate::api::routes::MAX_BODY_BYTES + MAX_CHUNK_FRAMING_BYTES + 64,
            Framing::Length(n) => n.min(crate::api::routes::MAX_BODY_BYTES),
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
        self.pos += len as u64;
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

#[cfg(test)]
mod tests {
    use super::*;

    fn head(raw: &str) -> Scan<Head> {
        scan_head(raw.as_bytes())
    }

    fn refused(raw: &str) -> bool {
        matches!(head(raw), Scan::Refused(_))
    }

    #[test]
    fn a_plain_head_is_whole_at_its_empty_line() {
        let raw = "GET /plants HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer t\r\n\r\nNEXT";
        assert_eq!(
            head(raw),
            Scan::Done(Head {
                len: raw.len() - 4,
                framing: Framing::None,
                expect: None,
                last: false
            })
        );
        let post = "POST /plants HTTP/1.1\r\ncontent-length: 12\r\nExpect: 100-Continue\r\n\r\n";
        assert_eq!(
            head(post),
            Scan::Done(Head {
                len: post.len(),
                framing: Framing::Length(12),
                expect: Some(Expect::Continue),
                last: false
            })
        );
    }

    #[test]
    fn a_partial_head_asks_for_more() {
        assert_eq!(head(""), Scan::More(1));
        assert_eq!(
            head("P"),
            Scan::More(2),
            "a strict prefix of the HTTP/2 preface"
        );
        assert_eq!(head("GET / HTTP/1.1\r"), Scan::More(16));
        assert_eq!(head("GET / HTTP/1.1\r\nHost: x\r\n"), Scan::More(26));
    }

    #[test]
    fn lenient_heads_are_refused() {
        for raw in [
            "GET / HTTP/1.1\nHost: x\r\n\r\n",
            "GET / HTTP/1.1\r\nHost: x\n\r\n",
            "GET / HTTP/1.1\r\nHost: x\rY\r\n\r\n",
            "GET / HTTP/1.1\r\nHost: x\r\n folded\r\n\r\n",
            "GET / HTTP/1.1\r\nHost: x\r\n\tfolded\r\n\r\n",
            "GET / HTTP/1.1\r\nHost : x\r\n\r\n",
            "GET / HTTP/1.1\r\nX.Forwarded-For: x\r\n\r\n",
            "GET / HTTP/1.1\r\n: x\r\n\r\n",
            "GET / HTTP/1.1\r\nNoColon\r\n\r\n",
            "GET / HTTP/1.1\r\nX: a\x01b\r\n\r\n",
            "GET  / HTTP/1.1\r\n\r\n",
            "GET / HTTP/1.1 \r\n\r\n",
            "GET /\r\n\r\n",
            "\r\nGET / HTTP/1.1\r\n\r\n",
            "G(T / HTTP/1.1\r\n\r\n",
            "GET / HTTX/1.1\r\n\r\n",
            "POST / HTTP/1.1\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\n",
            "POST / HTTP/1.1\r\nContent-Length: +2\r\n\r\n",
            "POST / HTTP/1.1\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n",
            "POST / HTTP/1.1\r\nTransfer-Encoding: Chunked\r\n\r\n",
            "POST / HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
            "POST / HTTP/1.1\r\nConnection: Upgrade\r\nContent-Length: 2\r\n\r\n",
        ] {
            assert!(refused(raw), "{raw:?}");
        }
        assert!(
            refused("G\x00"),
            "not a method, refused before the line ends"
        );
    }

    #[test]
    fn http2_and_later_are_505_and_long_heads_431() {
        assert_eq!(
            head("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"),
            Scan::Refused(Refusal::Version)
        );
        assert_eq!(
            head("GET / HTTP/3.0\r\n\r\n"),
            Scan::Refused(Refusal::Version)
        );
        let long = format!(
            "GET / HTTP/1.1\r\nX: {}\r\n\r\n",
            "a".repeat(MAX_HEAD_BYTES)
        );
        assert_eq!(head(&long), Scan::Refused(Refusal::HeadTooLarge));
        let unended = "a".repeat(MAX_HEAD_BYTES + 1);
        assert_eq!(head(&unended), Scan::Refused(Refusal::HeadTooLarge));
    }

    fn chunked(raw: &str) -> Scan<Chunked> {
        scan_chunked(raw.as_bytes(), 64)
    }

    #[test]
    fn strict_chunks_are_whole_at_the_last_chunk() {
        let raw = "2\r\nab\r\n1;name=value\r\nc\r\n0\r\n\r\nNEXT";
        assert_eq!(
            chunked(raw),
            Scan::Done(Chunked {
                len: raw.len() - 4,
                data: 3
            })
        );
        assert_eq!(chunked("2\r\nab"), Scan::More(7));
        assert_eq!(chunked("0\r\n"), Scan::More(5));
        assert_eq!(chunked("0\r\n\r"), Scan::More(5));
        assert_eq!(chunked("A"), Scan::More(2));
    }

    #[test]
    fn lenient_chunks_are_refused() {
        for raw in [
            " 2\r\nab\r\n0\r\n\r\n",
            "+2\r\nab\r\n0\r\n\r\n",
            "2 \r\nab\r\n0\r\n\r\n",
            "2\nab\r\n0\r\n\r\n",
            "2\r\nab\n0\r\n\r\n",
            "2\r\nabc\r\n0\r\n\r\n",
            "0;ext\nx\r\n\r\n",
            "0;e\x01\r\n\r\n",
            "0\r\nTrailer: x\r\n\r\n",
            "0x2\r\nab\r\n0\r\n\r\n",
            "\r\n",
        ] {
            assert!(matches!(chunked(raw), Scan::Refused(_)), "{raw:?}");
        }
    }

    #[test]
    fn too_much_chunk_framing_is_refused_not_cut() {
        let many = "1;xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\r\na\r\n".repeat(200);
        assert!(matches!(
            scan_chunked(many.as_bytes(), 1024),
            Scan::Refused(_)
        ));
    }

    #[test]
    fn a_chunked_body_over_the_limit_is_done_as_too_long() {
        let raw = format!("41\r\n{}\r\n0\r\n\r\n", "a".repeat(65));
        assert!(matches!(
            chunked(&raw),
            Scan::Done(Chunked { data: 65, .. })
        ));
    }
}
