//! A connection's life, one thread each: wait for a request whole and checked in the
//! socket (`gate.rs`), let tiny_http parse it, read its body, hand it to the workers;
//! again, until the connection ends, breaks a rule, or the server stops.
//!
//! A connection has at most one request with the workers and one read ahead: the
//! connection thread hands a request over and goes straight back to reading the next
//! one, and waits for the first to be answered only when the client has already sent the
//! next (so pipelined requests run one at a time, in order). tiny_http parses every
//! request and writes every response.
//!
//! A connection that is closed after an answer (bad framing, a body left unread or late)
//! is closed gently: its write side first, then what the client still sends is read and
//! dropped for a moment (`LINGER`), so the close does not reset the answer away.

use crate::api::control::Control;
use crate::api::control::journal::Ticket;
use crate::api::error::ApiError;
use crate::api::limits::MAX_BODY_BYTES;
use crate::http::conn::{Conn, InFlight};
use crate::http::framing::{self, Framing, Head, MAX_HEAD_BYTES, Refusal};
use crate::http::gate::{self, Admit, Gate};
use crate::http::response::{self, Exchange, Queue};
use crate::http::site::Site;
use crate::http::socket;
use std::io::{self, Read};
use std::net::Shutdown;
use std::os::fd::RawFd;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tiny_http::Request;

/// How long, and how much, a connection closed after an answer is still read from.
pub const LINGER: Duration = Duration::from_secs(1);
pub const LINGER_BYTES: usize = 256 * 1024;

/// Where a connection is in its life. Each step takes one phase to the next; the loop in
/// `serve_connection` is the whole life.
enum Phase {
    /// Waiting for the next request head, under the head deadline; the gate checks it.
    Head,
    /// A head the gate accepted (with its journal entry, when it has one): its body, then
    /// tiny_http's parse of what the gate let through.
    Read(Head, Option<Ticket>),
    /// A request read as far as it is to be read: hand it to the workers.
    HandOver(Parsed),
    /// Answer what the gate refused (with its journal entry, when it has one), then close
    /// gently.
    Refuse(Refusal, Option<Ticket>),
    /// Close gently once the answers in flight are written.
    Linger,
    /// Close now.
    End,
}

/// A request parsed by tiny_http, with what became of its body.
struct Parsed {
    request: Request,
    body: Body,
    /// Its head was whole before the server began to stop: it is served (503).
    stopping: bool,
    /// No request follows it on this connection.
    last: bool,
    /// A header of `framing::SINGLE_HEADERS` it gives more than once.
    repeated: Option<&'static str>,
    /// Its `Content-Length`, as the gate read it.
    declared: Option<usize>,
    /// Test control's journal entry, from the moment its head was read.
    journal: Option<Ticket>,
}

/// Serves one connection's requests in order until it ends, breaks a rule, or the
/// server stops. Each request passes the gate (whole and strict in the socket) before
/// tiny_http parses it.
pub fn serve_connection<C, E>(conn: &Arc<Conn>, client: &mut C, queue: &Queue, site: &Arc<Site>)
where
    C: Iterator<Item = Result<Request, E>>,
    E: std::fmt::Display,
{
    let mut gate = Gate::new(conn.fd());
    let mut phase = Phase::Head;
    loop {
        phase = match phase {
            Phase::Head => await_head(conn, &mut gate, site),
            Phase::Read(head, journal) => read_request(conn, &mut gate, client, head, journal),
            Phase::HandOver(read) => hand_over(conn, queue, site, read),
            Phase::Refuse(refusal, journal) => refuse(conn, refusal, journal),
            Phase::Linger => {
                conn.wait_released();
                socket::linger(conn.fd(), LINGER, LINGER_BYTES);
                Phase::End
            }
            Phase::End => return,
        }
    }
}

/// The next head, under the head deadline (the watchdog's).
fn await_head(conn: &Conn, gate: &mut Gate, site: &Site) -> Phase {
    match conn.head(|| gate.head(|| conn.gone())) {
        Some(Admit::Request(head)) => {
            let journal = site
                .control
                .as_deref()
                .and_then(|control| arrived(control, gate, &head));
            Phase::Read(head, journal)
        }
        Some(Admit::Refuse(refusal)) => Phase::Refuse(refusal, None),
        // The deadline shut the socket, the server is stopping, or the client is done.
        Some(Admit::Close) | None => Phase::End,
    }
}

/// Test control's journal: the request is listed from here, its head just read, with
/// its target as it is routed (an absolute-form target as its origin form: `origin_form`,
/// the one derivation). (Out of line, as `read_request` is.)
#[inline(never)]
fn arrived(control: &Control, gate: &Gate, head: &Head) -> Option<Ticket> {
    let (method, target, fields) = framing::fields(gate.head_bytes(head))?;
    let routed = framing::origin_form(target);
    control.arrived(
        method,
        routed.as_deref().unwrap_or(target),
        fields,
        head.len,
    )
}

/// The body, under the body deadline; then tiny_http parses what the gate let through (it
/// is in the socket already; the head deadline bounds it all the same), and the body is
/// read at once: every read of tiny_http's follows the gate's last look (`refresh`), so
/// that what it reads ahead is what the gate has seen.
// Out of line, as are `hand_over`, `refuse` and `socket::linger`: an idle connection's
// thread waits in `await_head`, below `serve_connection`'s frame, and every stack page that
// frame spans stays resident while the connection is open. Inlined, these made it 6.6 KiB
// (two more pages per connection; docs/operating.md, "Memory").
#[inline(never)]
fn read_request<C, E>(
    conn: &Conn,
    gate: &mut Gate,
    client: &mut C,
    head: Head,
    journal: Option<Ticket>,
) -> Phase
where
    C: Iterator<Item = Result<Request, E>>,
    E: std::fmt::Display,
{
    let stopping = conn.stopping();
    let deadline = Instant::now() + conn.limits().body;
    if head.framing != Framing::None {
        log::debug!("a request head was read; its body is awaited");
    }
    let found = match gate.body(&head, MAX_BODY_BYTES, deadline, false) {
        Ok(found) => found,
        Err(refusal) => return Phase::Refuse(refusal, journal),
    };
    gate.refresh();
    let mut request = match conn.under_head_deadline(|| client.next()) {
        Some(Some(Ok(request))) => request,
        Some(Some(Err(e))) => {
            // tiny_http answered it itself (an `Expect` it does not know: 417).
            log::debug!("connection ends: {e}");
            return Phase::End;
        }
        Some(None) | None => return Phase::End,
    };
    let body = match found {
        _ if stopping => Body::NotRead,
        gate::Body::AfterContinue => {
            // tiny_http sends 100 Continue, in order after the earlier answers.
            request.as_reader();
            match gate.body(&head, MAX_BODY_BYTES, deadline, true) {
                Ok(_) => {
                    gate.refresh();
                    read_body(conn, &mut request, head.framing, deadline)
                }
                Err(refusal) => Body::Refused(refusal.into()),
            }
        }
        _ => read_body(conn, &mut request, head.framing, deadline),
    };
    Phase::HandOver(Parsed {
        request,
        body,
        stopping,
        // Without `TCP_INFO` the gate cannot find the next request (gate.rs): one per
        // connection.
        last: head.last || !socket::reports_reads(),
        repeated: head.repeated,
        declared: match head.framing {
            Framing::Length(n) => Some(n),
            _ => None,
        },
        journal,
    })
}

/// Hands the request to the workers once the previous one (if the client pipelined this
/// one) is answered; when that answer ends the connection, this one is not run.
#[inline(never)]
fn hand_over(conn: &Arc<Conn>, queue: &Queue, site: &Arc<Site>, read: Parsed) -> Phase {
    conn.wait_answered();
    if conn.closing() {
        return Phase::End;
    }
    let mut exchange = Exchange::new(read.request, InFlight::new(conn.clone()), site.clone());
    exchange.repeated = read.repeated;
    exchange.declared(read.declared);
    exchange.journal = read.journal;
    let next = match read.body {
        _ if read.stopping => {
            // Read just as the server began to stop.
            conn.close_after_answer();
            response::send(exchange, Err(ApiError::ShuttingDown));
            return Phase::End;
        }
        // The drain's time ran out while the body was read: no one to answer.
        Body::Refused(_) if conn.aborted() => return Phase::End,
        Body::Refused(error) => {
            conn.close_after_answer();
            response::send(exchange, Err(error));
            return Phase::Linger;
        }
        Body::Complete(data) => {
            exchange.set_body(data);
            if read.last { Phase::End } else { Phase::Head }
        }
        // Too long: answered (413) by the route after its checks; the rest of the body
        // is never read as a request.
        Body::TooLong(data) => {
            conn.close_after_answer();
            exchange.set_body(data);
            Phase::Linger
        }
        // Shut for reading already: nothing to linger for.
        Body::NotRead => {
            conn.close_after_answer();
            Phase::End
        }
    };
    match queue.offer(exchange) {
        Ok(()) => next,
        Err(exchange) => {
            conn.close_after_answer();
            response::send(exchange, Err(ApiError::ShuttingDown));
            match next {
                Phase::Head => Phase::End,
                other => other,
            }
        }
    }
}

impl From<Refusal> for ApiError {
    fn from(refusal: Refusal) -> ApiError {
        match refusal {
            Refusal::Malformed(why) => ApiError::BadRequest(why),
            Refusal::HeadTooLarge => ApiError::HeadTooLarge {
                limit: MAX_HEAD_BYTES,
            },
            Refusal::Version => ApiError::VersionNotSupported,
            Refusal::Late => ApiError::RequestTimeout,
        }
    }
}

/// Answers a request the gate refused, once the answers in flight are written; then the
/// connection closes gently.
#[inline(never)]
fn refuse(conn: &Conn, refusal: Refusal, journal: Option<Ticket>) -> Phase {
    // The drain's time ran out while the request was read: no one to answer (its journal
    // entry, if any, ends unanswered as the ticket drops).
    if conn.aborted() {
        log::debug!("a request cut off by the end of the drain is not answered");
        return Phase::End;
    }
    let error = ApiError::from(refusal);
    conn.close_after_answer();
    conn.wait_released();
    if let Some(ticket) = journal {
        ticket.answered(Some(error.status()), None, None);
    }
    response::refuse(conn, &error, Instant::now());
    Phase::Linger
}

/// What became of a request's body.
enum Body {
    /// Read whole (empty when there was none): the connection may go on.
    Complete(Vec<u8>),
    /// Larger than `MAX_BODY_BYTES`: only the first bytes past the limit were read.
    TooLong(Vec<u8>),
    /// Declared larger than `MAX_BODY_BYTES`: not read at all, and the socket is shut
    /// for reading (tiny_http would otherwise read and discard the rest when the request
    /// is dropped).
    NotRead,
    /// The answer is this error (too slow 408, cut off 400).
    Refused(ApiError),
}

/// Reads the request's body: at most `MAX_BODY_BYTES` + 1 bytes, by the body deadline
/// the gate started (the gate has found the body whole in the socket already).
fn read_body(conn: &Conn, request: &mut Request, framing: Framing, deadline: Instant) -> Body {
    let declared = match framing {
        Framing::None => return Body::Complete(Vec::new()),
        Framing::Length(n) => Some(n),
        Framing::Chunked => None,
    };
    if declared.is_some_and(|n| n > MAX_BODY_BYTES) {
        socket::shutdown(conn.fd(), Shutdown::Read);
        return Body::NotRead;
    }
    let mut body = Vec::with_capacity(declared.unwrap_or(1024).min(MAX_BODY_BYTES + 1));
    let read = Deadline {
        inner: request.as_reader(),
        fd: conn.fd(),
        deadline,
    }
    .take(declared.map_or(MAX_BODY_BYTES as u64 + 1, |n| n as u64))
    .read_to_end(&mut body);
    socket::set_read_timeout(conn.fd(), None);
    match read {
        Err(e)
            if matches!(
                e.kind(),
                io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
            ) =>
        {
            Body::Refused(ApiError::RequestTimeout)
        }
        Err(e) => Body::Refused(ApiError::BadRequest(format!(
            "could not read the request body: {e}"
        ))),
        Ok(_) if declared.is_some_and(|n| body.len() < n) => Body::Refused(ApiError::BadRequest(
            "the connection ended before the whole body arrived".into(),
        )),
        Ok(_) if body.len() > MAX_BODY_BYTES => Body::TooLong(body),
        Ok(_) => Body::Complete(body),
    }
}

/// A body reader whose every read may take only the time left until `deadline` (set as
/// the socket's read timeout before it).
struct Deadline<'r> {
    inner: &'r mut dyn Read,
    fd: RawFd,
    deadline: Instant,
}

impl Read for Deadline<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let left = self.deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::ErrorKind::TimedOut.into());
        }
        socket::set_read_timeout(self.fd, Some(left));
        self.inner.read(buf)
    }
}
