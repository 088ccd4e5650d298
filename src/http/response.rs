//! Answers: the one place an `ApiError` becomes a response, who writes it, and the access
//! log line.
//!
//! A worker writes an answer itself when it fits in the socket's send buffer beside what
//! is still unsent there (`WORKER_WRITE_BYTES`), which is every answer to a client that
//! reads its answers, a list page included. Anything else (a list longer than a page,
//! or any answer to a client that has stopped reading) is written by a writer thread of
//! its own, so no worker ever waits on a client. A connection has one request in flight
//! at a time, so there are at most `--max-connections` writer threads.

use crate::api::caller::Seen;
use crate::api::control::faults::Taken;
use crate::api::error::ApiError;
use crate::api::events::{EventStream, STREAM_OPENED};
use crate::api::listing::PlantList;
use crate::api::routes::{Incoming, Pending, Reply, Route};
use crate::http::access::AccessLine;
use crate::http::conn::{Conn, InFlight};
use crate::http::fault_bytes;
use crate::http::feed;
use crate::http::queue::WorkQueue;
use crate::http::site::Site;
use crate::http::socket;
use crate::store::{Outcome, StoreResult};
use std::borrow::Cow;
use std::cell::Cell;
use std::io::{self, Cursor, Read, Write};
use std::net::Shutdown;
use std::os::fd::RawFd;
use std::sync::Arc;
use std::time::Instant;
use tiny_http::{Header, Headers, Request, Response, StatusCode};

/// A worker writes an answer itself when it and the bytes still unsent on the socket
/// come to at most this much: Linux gives a new TCP socket a send buffer of at least
/// this (`tcp_wmem`), so the write cannot wait for the client.
pub const WORKER_WRITE_BYTES: usize = 16 * 1024;
/// Room left for the status line and headers within `WORKER_WRITE_BYTES`.
const HEAD_BYTES: usize = 512;

/// The workers' queue.
pub type Queue = WorkQueue<Exchange, Settled>;

/// A write whose change the writer thread has committed (or failed to).
pub struct Settled {
    pub exchange: Exchange,
    pub pending: Pending,
    pub outcome: StoreResult<Outcome>,
}

/// A request from the moment its head is read until it is answered: tiny_http's
/// request, its body (read by the connection thread), and what its log line needs.
pub struct Exchange {
    pub request: Request,
    origin_form: Option<Box<str>>,
    body: Cursor<Vec<u8>>,
    /// The declared `Content-Length`, as the gate read it (`declared`).
    declared: Option<usize>,
    pub(crate) started: Instant,
    /// The caller's principal (for the log line) and headers for every answer to this
    /// request, as handling learned them.
    pub seen: Seen,
    /// A header of `framing::SINGLE_HEADERS` the request gives more than once.
    pub repeated: Option<&'static str>,
    /// The server's shared state (its event streams, its threads).
    pub(crate) site: Arc<Site>,
    /// Test control's journal entry, answered before the answer's first byte.
    pub journal: Option<crate::api::control::journal::Ticket>,
    /// Test control: a journal listing that waited, due to be listed (`waiting::list`).
    pub listing: Option<Arc<crate::api::control::journal::Query>>,
    /// Declared last: dropped after the request, then lets the connection go on.
    pub(crate) flight: InFlight,
}

impl Exchange {
    /// Gives test control's journal the body as the client sent it: when the route reads
    /// it, or when a fault takes the request's place first (a retry resends it; a test
    /// compares the two).
    pub fn journal_body(&mut self) {
        if let Some(ticket) = &mut self.journal {
            ticket.body(self.body.get_ref());
        }
    }

    pub fn new(request: Request, flight: InFlight, site: Arc<Site>) -> Exchange {
        Exchange {
            site,
            origin_form: crate::http::framing::origin_form(request.url()).map(Into::into),
            request,
            body: Cursor::new(Vec::new()),
            declared: None,
            started: Instant::now(),
            seen: Seen::default(),
            repeated: None,
            journal: None,
            listing: None,
            flight,
        }
    }

    /// Its access line (the status is set once answered), naming the fault that took it.
    pub fn access_line(&self) -> AccessLine {
        let mut line = AccessLine::of(
            self.request.method().as_str(),
            self.url(),
            self.started,
            self.seen.principal.clone(),
        );
        line.fault = self.seen.fault.as_ref().map(|f| f.id().to_owned());
        line
    }

    pub fn set_body(&mut self, body: Vec<u8>) {
        self.body = Cursor::new(body);
    }

    /// The declared body length as the gate read it: a `Content-Length` past `usize`
    /// (4 GiB on a 32-bit target, 2^64 on others) is `usize::MAX`, too large, where
    /// tiny_http reads it as none and the route would take an empty body for the whole.
    pub fn declared(&mut self, length: Option<usize>) {
        self.declared = length;
    }
}

impl Incoming for Exchange {
    fn method(&self) -> &str {
        self.request.method().as_str()
    }
    fn url(&self) -> &str {
        self.origin_form.as_deref().unwrap_or(self.request.url())
    }
    fn header(&self, name: &str) -> Option<&str> {
        self.request.headers().get(name).map(|v| v.as_str())
    }
    fn repeated(&self, name: &str) -> bool {
        self.repeated.is_some_and(|h| h.eq_ignore_ascii_case(name))
    }
    fn body_length(&self) -> Option<usize> {
        self.declared
    }
    fn body(&mut self) -> &mut dyn Read {
        // Test control's journal keeps the body the route reads.
        self.journal_body();
        &mut self.body
    }
    fn sent_body(&self) -> &[u8] {
        self.body.get_ref()
    }
}

enum Body {
    Fixed(Cow<'static, [u8]>),
    /// A fixed answer after which the connection ends, with the head we write ourselves
    /// (tiny_http drops a `Connection` header, and this one must say `close`); the body
    /// is left out for HEAD.
    Last(Cow<'static, [u8]>, Vec<u8>),
    /// A list streamed as it is read: chunked, or (with the head we write ourselves, see
    /// `close_delimited`) until the connection closes.
    Stream(PlantList, Option<Vec<u8>>),
    /// An event stream, with the head we write ourselves (it ends when the connection
    /// closes) and its place among `--max-streams`; then kept by `feed`.
    Events(EventStream, Vec<u8>, feed::Slot),
}

const EVENT_STREAM: &str = "text/event-stream";

/// True when a streamed answer to `request` cannot be chunked: HTTP/1.0, or a `TE`
/// header (tiny_http would honour `TE: identity` by buffering the whole body to count
/// it). Such a body ends when the connection closes.
fn close_delimited(request: &Request) -> bool {
    *request.http_version() <= (1, 0) || request.headers().contains("TE")
}

/// Answers the exchange with the reply, or with the error (the one place an `ApiError`
/// becomes a response), and writes its access log line.
pub fn send(mut exchange: Exchange, reply: Result<Reply, ApiError>) {
    let line = exchange.access_line();
    let mut content_type = JSON;
    // A fault's answer may have a media type of its own.
    let own_type = reply.as_ref().err().and_then(ApiError::content_type);
    let refuse = |error: ApiError| {
        if let Some(cause) = error.cause() {
            log::error!("{} {}: {cause}", line.method, line.url);
        }
        (
            error.status(),
            error.headers(),
            Body::Fixed(error.body().into_bytes().into()),
        )
    };
    let (status, extra, body) = match reply {
        Ok(Reply::Json(body)) => (200, Vec::new(), Body::Fixed(body.into())),
        Ok(Reply::Created(body)) => (201, Vec::new(), Body::Fixed(body.into())),
        Ok(Reply::Static(text)) => (200, Vec::new(), Body::Fixed(text.as_bytes().into())),
        Ok(Reply::Metrics(text)) => {
            content_type = PROMETHEUS_TEXT;
            (200, Vec::new(), Body::Fixed(text.into_bytes().into()))
        }
        Ok(Reply::NoContent) => (204, Vec::new(), Body::Fixed(Cow::Borrowed(&[]))),
        Ok(Reply::NotModified) => (304, Vec::new(), Body::Fixed(Cow::Borrowed(&[]))),
        Ok(Reply::List(list)) if list.is_complete() => {
            (200, Vec::new(), Body::Fixed(list.into_buffer().into()))
        }
        Ok(Reply::List(list)) => (200, Vec::new(), Body::Stream(list, None)),
        Ok(Reply::Events(stream)) => match exchange.site.streams.reserve(&stream.principal) {
            Ok(slot) => {
                content_type = EVENT_STREAM;
                (200, Vec::new(), Body::Events(stream, Vec::new(), slot))
            }
            Err(feed::Full::Off) => refuse(ApiError::StreamsOff),
            Err(full) => refuse(ApiError::TooManyStreams {
                yours: full == feed::Full::Principal,
            }),
        },
        Err(error) => refuse(error),
    };
    content_type = own_type.as_deref().unwrap_or(content_type);
    // A 204, 205 or 304 has neither a body nor its type; a 204 or 304 no length either.
    let bodiless = crate::api::error::no_content(status);
    let mut headers = Headers::with_capacity(1 + extra.len() + exchange.seen.headers.len());
    if !bodiless {
        headers.push(header("Content-Type", content_type));
    }
    for (name, value) in extra.iter().chain(&exchange.seen.headers) {
        headers.push(header(name, value));
    }
    let line = AccessLine { status, ..line };
    let own_head = |length: Option<usize>| {
        let version = if *exchange.request.http_version() <= (1, 0) {
            "HTTP/1.0"
        } else {
            "HTTP/1.1"
        };
        let own = (!bodiless).then_some(("Content-Type", content_type));
        let rest = extra.iter().chain(&exchange.seen.headers);
        let pairs = own.into_iter().chain(rest.map(|(k, v)| (*k, v.as_ref())));
        head_bytes(
            version,
            status,
            pairs,
            length.filter(|_| !matches!(status, 204 | 304)),
        )
    };
    let body = match body {
        Body::Fixed(data) if exchange.flight.conn().closing() && !bodiless => {
            let head = own_head(Some(data.len()));
            if *exchange.request.method() == tiny_http::Method::Head {
                Body::Last(Cow::Borrowed(&[]), head)
            } else {
                Body::Last(data, head)
            }
        }
        Body::Stream(list, None) if close_delimited(&exchange.request) => {
            Body::Stream(list, Some(own_head(None)))
        }
        Body::Events(stream, _, slot) => Body::Events(stream, own_head(None), slot),
        body => body,
    };
    // Test control's journal: answered before the answer's first byte, and before the
    // connection's next request may start (`answered` below).
    if let Some(ticket) = exchange.journal.take() {
        let (principal, fault) = (line.principal.as_deref(), line.fault.as_deref());
        ticket.answered(Some(status), principal, fault);
    }
    // Test control's `truncate` and `trickle` (`http::fault_bytes`).
    if exchange.seen.fault.as_ref().is_some_and(Taken::shapes) {
        use fault_bytes::Body::{List, Whole};
        let (head, data) = match body {
            // A list is read as it is sent, on the writer thread (`fault_bytes::Wire`).
            Body::Stream(list, head) => {
                let chunked = head.is_none();
                let head = head.unwrap_or_else(|| fault_bytes::chunked(own_head(None)));
                (head, List { list, chunked })
            }
            Body::Fixed(data) => (own_head(Some(data.len())), Whole(data.into_owned())),
            Body::Last(data, head) => (head, Whole(data.into_owned())),
            Body::Events(_, head, _) => (head, Whole(Vec::new())),
        };
        let Exchange {
            request,
            flight,
            site,
            seen,
            ..
        } = exchange;
        return fault_bytes::send(request, flight, site, seen, line, head, data);
    }
    let fits = match &body {
        Body::Fixed(data) => Some(data.len()),
        Body::Last(data, head) => Some(data.len() + head.len()),
        Body::Events(_, head, _) => Some(head.len()),
        Body::Stream(..) => None,
    };
    if let Some(len) = fits {
        let unsent = socket::unsent_bytes(exchange.flight.conn().fd());
        if unsent.saturating_add(len + HEAD_BYTES) <= WORKER_WRITE_BYTES {
            // A stream's request stays in flight while the stream is open.
            if matches!(body, Body::Fixed(_) | Body::Last(..)) {
                exchange.flight.answered();
            }
            write(exchange, line, headers, body);
            return;
        }
    }
    let (site, fd) = (exchange.site.clone(), exchange.flight.conn().fd());
    let what = (exchange, line, headers, body);
    site.on_writer(fd, what, |(e, l, h, b)| write(e, l, h, b));
}

/// Writes the response. The access line goes out before the last byte does, so a
/// client that sends its next request after reading this answer always finds this line
/// before the next one in the log.
fn write(exchange: Exchange, line: AccessLine, headers: Headers, body: Body) {
    let status = StatusCode(line.status);
    let site = exchange.site.clone();
    let metrics = &site.metrics;
    let sent = match body {
        Body::Fixed(data) => {
            line.write(data.len() as u64, metrics);
            let len = Some(data.len());
            exchange
                .request
                .respond(Response::new(status, headers, &data[..], len, None))
        }
        Body::Last(data, head) => {
            line.write(data.len() as u64, metrics);
            let mut writer = exchange.request.into_writer();
            writer
                .write_all(&head)
                .and_then(|()| writer.write_all(&data))
                .and_then(|()| writer.flush())
        }
        Body::Stream(list, own_head) => {
            let (count, logged) = (Cell::new(0), Cell::new(false));
            let mut counting = Counting {
                inner: list,
                fd: exchange.flight.conn().fd(),
                count: &count,
                on_end: || {
                    if !logged.replace(true) {
                        line.write(count.get(), metrics);
                    }
                },
            };
            let sent = match own_head {
                None => exchange
                    .request
                    .respond(Response::new(status, headers, counting, None, None)),
                Some(head) => {
                    // Written through tiny_http's writer for this request (so it keeps
                    // its place among the connection's answers); the body ends at the
                    // close, so the connection ends after it.
                    let fd = exchange.flight.conn().fd();
                    // No request after this one is read or run.
                    exchange.flight.conn().close_after_answer();
                    let mut writer = exchange.request.into_writer();
                    let sent = writer
                        .write_all(&head)
                        .and_then(|()| io::copy(&mut counting, &mut writer))
                        .and_then(|_| writer.flush());
                    drop(writer);
                    socket::shutdown(fd, Shutdown::Write);
                    sent
                }
            };
            if !logged.get() {
                line.write(count.get(), metrics);
            }
            sent
        }
        Body::Events(spec, head, slot) => {
            let fd = exchange.flight.conn().fd();
            let cut_after = exchange.seen.fault.as_ref().and_then(Taken::cut_after);
            // No request after this one is read or run: the stream has the connection.
            exchange.flight.conn().close_after_answer();
            let Exchange {
                request, flight, ..
            } = exchange;
            let mut writer = request.into_writer();
            let sent = writer
                .write_all(&head)
                .and_then(|()| writer.write_all(STREAM_OPENED))
                .and_then(|()| writer.flush());
            match sent {
                Ok(()) => {
                    site.streams.open(feed::Stream {
                        writer,
                        fd,
                        spec,
                        line,
                        bytes: STREAM_OPENED.len() as u64,
                        slot,
                        flight,
                        cut_after,
                    });
                    return;
                }
                Err(e) => {
                    line.write(0, metrics);
                    drop(writer);
                    socket::shutdown(fd, Shutdown::Write);
                    Err(e)
                }
            }
        }
    };
    if let Err(e) = sent {
        log::debug!("{} {}: response not fully sent: {e}", line.method, line.url);
    }
}

/// The head of an answer we write ourselves (tiny_http writes the rest): the status line
/// in `version`, `headers`, then `Content-Length` when the length is known, else
/// `Connection: close` (the body ends when the connection does).
fn head_bytes<'h>(
    version: &str,
    status: u16,
    headers: impl IntoIterator<Item = (&'h str, &'h str)>,
    length: Option<usize>,
) -> Vec<u8> {
    let reason = StatusCode(status).default_reason_phrase();
    let mut out = format!("{version} {status} {reason}\r\n");
    for (name, value) in headers {
        out.push_str(&format!("{name}: {value}\r\n"));
    }
    match length {
        Some(n) => out.push_str(&format!("Connection: close\r\nContent-Length: {n}\r\n\r\n")),
        None => out.push_str("Connection: close\r\n\r\n"),
    }
    out.into_bytes()
}

/// The whole answer to a connection refused before tiny_http has a request for it (over
/// the connection cap, or refused by the gate): the same status, headers and body as
/// `send` gives the error, and `Connection: close`.
pub fn raw(error: &ApiError) -> Vec<u8> {
    let body = error.body();
    let extra = error.headers();
    let headers =
        std::iter::once(("Content-Type", JSON)).chain(extra.iter().map(|(k, v)| (*k, v.as_ref())));
    let mut out = head_bytes("HTTP/1.1", error.status(), headers, Some(body.len()));
    out.extend_from_slice(body.as_bytes());
    out
}

/// Answers a request the gate refused on `fd`, and writes its access line. The caller
/// bounds the time (`connection::CLOSE_WITHIN`).
pub fn refuse(conn: &Conn, error: &ApiError, started: Instant) {
    socket::send_all(conn.fd(), &raw(error));
    AccessLine {
        method: "-".into(),
        url: "-".into(),
        route: Route::Other,
        status: error.status(),
        started,
        principal: None,
        fault: None,
    }
    .write(error.body().len() as u64, conn.metrics());
}

fn header(name: &str, value: &str) -> Header {
    Header::from_bytes(name, value).expect("our headers are ASCII")
}

const JSON: &str = "application/json";
/// The Prometheus text exposition format.
const PROMETHEUS_TEXT: &str = "text/plain; version=0.0.4; charset=utf-8";

/// A reader that counts the bytes read through it and calls `on_end` at its end (or
/// its failure).
struct Counting<'c, R, F: FnMut()> {
    inner: R,
    count: &'c Cell<u64>,
    on_end: F,
    /// The connection's socket: a body that fails is cut there.
    fd: RawFd,
}

impl<R: Read, F: FnMut()> Read for Counting<'_, R, F> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf);
        match n {
            Ok(0) => (self.on_end)(),
            Err(_) => {
                // A body that cannot go on is cut: the socket's sending side is shut
                // before tiny_http's chunked encoder could write the body's end on its
                // way out, so the client sees an incomplete answer, never a complete one.
                socket::shutdown(self.fd, Shutdown::Write);
                (self.on_end)()
            }
            Ok(n) => self.count.set(self.count.get() + n as u64),
        }
        n
    }
}

#[cfg(test)]
mod tests;
