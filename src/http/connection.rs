//! Our connection loop over tiny_http's public `Server::accept_connection`: the accept
//! loop (the connection cap, backing off when descriptors run out), one thread per
//! connection (waits for a request whole and checked in the socket (`gate.rs`), lets
//! tiny_http parse it, reads its body, hands it to the workers), and the watchdog that
//! enforces deadlines by shutting sockets down.
//!
//! A connection has at most one request with the workers and one read ahead: the
//! connection thread hands a request over and goes straight back to reading the next
//! one, and waits for the first to be answered only when the client has already sent the
//! next (so pipelined requests run one at a time, in order). tiny_http parses every
//! request and writes every response.
//!
//! Deadlines, each from the moment the connection is ready for that phase:
//! - the next request head (which includes idle time between requests) must be complete
//!   within `--read-timeout`, counted from when the previous answer was sent: past it the
//!   connection is closed without an answer;
//! - a body must arrive whole within `--body-timeout`: past it, 408 and close;
//! - after an answer that ends the connection, it is gone within `CLOSE_WITHIN`.
//!
//! A connection that is closed after an answer (bad framing, a body left unread or late)
//! is closed gently: its write side first, then what the client still sends is read and
//! dropped for a moment (`LINGER`), so the close does not reset the answer away.

use crate::api::error::ApiError;
use crate::http::gate::{self, Admit, Framing, Gate, Refusal};
use crate::ops::metrics::METRICS;
use crate::http::response::{self, Exchange};
use crate::api::routes::MAX_BODY_BYTES;
use crate::http::socket::{self, Accepted};
use std::collections::{HashMap, HashSet};
use std::io::{self, Read};
use std::net::{Shutdown, TcpListener};
use std::os::fd::{AsRawFd, RawFd};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread;
use std::time::{Duration, Instant};
use tiny_http::{Request, Server, SslContextWrap};

/// Default of `--max-connections`: 2,000 idle connections still leave room for clients,
/// and RSS with all of them open stays near 40 MB (about 16 KB a connection).
pub const DEFAULT_MAX_CONNECTIONS: usize = 2048;
/// How long the accept loop pauses when descriptors or memory run out.
pub const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);
/// How often the watchdog looks at the deadlines (and the accept loop at the stop flag).
pub const WATCH_EVERY: Duration = Duration::from_millis(50);
/// Stack of each connection thread (tiny_http's parsing and our body read; the body
/// buffer is on the heap).
pub const CONNECTION_STACK_BYTES: usize = 128 * 1024;
/// How long, and how much, a connection closed after an answer is still read from.
pub const LINGER: Duration = Duration::from_secs(1);
pub const LINGER_BYTES: usize = 256 * 1024;
/// After an answer that ends its connection, the connection is closed within this
/// (the answer written, what the client still sends read and dropped for `LINGER`);
/// past it the watchdog shuts the socket down, whatever is still reading or writing.
pub const CLOSE_WITHIN: Duration = Duration::from_secs(1);
/// Once a connection is to close, a read of an unread body waits at most this long.
const DRAIN_WAIT: Duration = Duration::from_millis(1);

struct ConnState {
    /// Waiting for (or reading) the next request head: the watchdog's concern.
    in_head: bool,
    /// A request has been handed over and its answer is not yet settled: the next
    /// request waits (see `InFlight::answered`).
    busy: bool,
    /// Requests of this connection that still exist (with tiny_http's handles on the
    /// socket): at most two, an answered one being written and the next.
    held: usize,
    /// The connection thread waits for `busy` or `held` to clear.
    waiting: bool,
    deadline: Option<Instant>,
    /// A deadline passed and the socket was shut down.
    fired: bool,
    /// The descriptors are about to be closed: the watchdog must not touch them.
    closed: bool,
    /// The server is stopping: no further request is read.
    stopping: bool,
    /// The connection ends after the answer in flight: once it is answered, it has
    /// `CLOSE_WITHIN` to be gone.
    closing: bool,
}

/// One open connection, shared by its thread, the worker answering it, and the watchdog.
pub struct Conn {
    fd: RawFd,
    ino: u64,
    limits: Limits,
    state: Mutex<ConnState>,
    idle: Condvar,
}

impl Conn {
    fn new(fd: RawFd, ino: u64, limits: Limits) -> Conn {
        Conn {
            fd,
            ino,
            limits,
            state: Mutex::new(ConnState {
                in_head: false,
                busy: false,
                held: 0,
                waiting: false,
                deadline: None,
                fired: false,
                closed: false,
                stopping: false,
                closing: false,
            }),
            idle: Condvar::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, ConnState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The socket's descriptor; valid while a request of this connection is in flight.
    pub fn fd(&self) -> RawFd {
        self.fd
    }

    /// A request is handed over (see `InFlight`).
    fn begin(&self) {
        let mut s = self.lock();
        s.busy = true;
        s.held += 1;
    }

    /// The request handed over is answered (`dropped` false), or gone altogether
    /// (`answered` tells whether `settled` was called for it already).
    fn settled(&self, answered: bool, dropped: bool) {
        let mut s = self.lock();
        if !answered {
            s.busy = false;
            if s.closing {
                s.deadline = Some(Instant::now() + CLOSE_WITHIN);
            } else if s.in_head {
                s.deadline = Some(Instant::now() + self.limits.head);
            }
        }
        if dropped {
            s.held -= 1;
            if s.held == 0 && s.stopping && s.in_head && !s.closed {
                // Answered, and the server is stopping: the next request is not awaited.
                socket::shutdown(self.fd, Shutdown::Both);
            }
        }
        if s.waiting {
            self.idle.notify_one();
        }
    }

    /// No request follows: once the request in flight (if any) is answered, the
    /// connection has `CLOSE_WITHIN` to be closed, or the watchdog shuts it down.
    pub fn close_after_answer(&self) {
        // What is left of a body is not waited for: tiny_http's drop of the request
        // drains it, and stops at the first read that would wait.
        socket::set_read_timeout(self.fd, Some(DRAIN_WAIT));
        let mut s = self.lock();
        s.closing = true;
        if !s.busy {
            s.deadline = Some(Instant::now() + CLOSE_WITHIN);
        }
    }

    /// Waits until the request in flight (if any) is answered: the next may start.
    fn wait_answered(&self) {
        self.wait_until(|s| !s.busy);
    }

    /// Waits until the request in flight (if any) is gone, its answer written.
    fn wait_released(&self) {
        self.wait_until(|s| s.held == 0);
    }

    fn wait_until(&self, ready: impl Fn(&ConnState) -> bool) {
        let mut s = self.lock();
        while !ready(&s) {
            s.waiting = true;
            s = self.idle.wait(s).unwrap_or_else(|e| e.into_inner());
        }
        s.waiting = false;
    }

    /// Runs `read` (of a request head) under the head deadline, which starts now or,
    /// while a request is in flight, once it is answered (`settled`). `None` when the
    /// deadline passed (the socket is then shut down) or the server is stopping.
    fn head<T>(&self, read: impl FnOnce() -> T) -> Option<T> {
        if self.lock().stopping {
            return None;
        }
        self.under_head_deadline(read)
    }

    /// Runs `read` under the head deadline, as `head` does, even while stopping.
    fn under_head_deadline<T>(&self, read: impl FnOnce() -> T) -> Option<T> {
        {
            let mut s = self.lock();
            if s.closing {
                return None;
            }
            s.in_head = true;
            s.deadline = (!s.busy).then(|| Instant::now() + self.limits.head);
        }
        let out = read();
        let mut s = self.lock();
        s.in_head = false;
        s.deadline = None;
        (!std::mem::take(&mut s.fired)).then_some(out)
    }

    /// Shuts the connection down if its deadline (for the next head, or for closing) has
    /// passed.
    fn expire(&self, now: Instant) {
        let mut s = self.lock();
        if s.closed || s.deadline.is_none_or(|d| d > now) {
            return;
        }
        s.deadline = None;
        s.fired = true;
        socket::shutdown(self.fd, Shutdown::Both);
    }

    /// At shutdown: reads no further request, and closes the connection now if it is
    /// idle between requests (else once its request is answered, in `settled`).
    fn stop(&self) {
        let mut s = self.lock();
        s.stopping = true;
        if !s.closed && s.held == 0 && s.in_head {
            socket::shutdown(self.fd, Shutdown::Both);
        }
    }
}

/// A request's hold on its connection from hand-over until it is dropped, however it
/// ends (answered, refused, or a panic).
pub struct InFlight {
    conn: Arc<Conn>,
    answered: bool,
}

impl InFlight {
    fn new(conn: Arc<Conn>) -> InFlight {
        conn.begin();
        METRICS.in_flight.add(1);
        InFlight {
            conn,
            answered: false,
        }
    }

    pub fn conn(&self) -> &Conn {
        &self.conn
    }

    /// The answer is settled and about to be written by a worker, without waiting (it
    /// fits the socket's buffer): the connection's next request may start now. Its own
    /// answer cannot overtake this one (tiny_http writes a connection's answers in
    /// order), and a client that waits for this answer before sending the next request
    /// finds its connection thread free, not waiting for this drop.
    pub fn answered(&mut self) {
        if !std::mem::replace(&mut self.answered, true) {
            METRICS.in_flight.add(-1);
            self.conn.settled(false, false);
        }
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        if !self.answered {
            METRICS.in_flight.add(-1);
        }
        self.conn.settled(self.answered, true);
    }
}

/// The bounds of a connection (`--max-connections`, `--read-timeout`, `--body-timeout`).
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub max: usize,
    pub head: Duration,
    pub body: Duration,
}

/// Every open connection, for the cap, the watchdog and shutdown.
pub struct Connections {
    live: Mutex<HashMap<u64, Arc<Conn>>>,
    limits: Limits,
}

impl Connections {
    pub fn new(limits: Limits) -> Arc<Connections> {
        Arc::new(Connections {
            live: Mutex::new(HashMap::new()),
            limits,
        })
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<u64, Arc<Conn>>> {
        self.live.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Open connections now.
    pub fn count(&self) -> usize {
        self.lock().len()
    }

    fn snapshot(&self) -> Vec<Arc<Conn>> {
        self.lock().values().cloned().collect()
    }

    /// Closes what is idle, and has every connection thread stop after its current
    /// request.
    pub fn stop(&self) {
        for conn in self.snapshot() {
            conn.stop();
        }
    }

    /// Closes the connection's descriptors (by dropping tiny_http's connection) and
    /// forgets it; in that order, so its socket is known until it is gone.
    fn remove<C>(&self, conn: &Conn, client: C) {
        conn.lock().closed = true;
        drop(client);
        self.forget(conn);
    }

    fn forget(&self, conn: &Conn) {
        let mut live = self.lock();
        live.remove(&conn.ino);
        METRICS.connections_open.set(live.len() as i64);
    }

    /// The watchdog: shuts down every connection whose deadline passed, until `quit`.
    pub fn watch(self: &Arc<Self>, quit: Arc<AtomicBool>) -> io::Result<thread::JoinHandle<()>> {
        let conns = self.clone();
        thread::Builder::new()
            .name("watchdog".into())
            .stack_size(CONNECTION_STACK_BYTES)
            .spawn(move || {
                while !quit.load(Ordering::Relaxed) {
                    thread::sleep(WATCH_EVERY);
                    let now = Instant::now();
                    for conn in conns.snapshot() {
                        conn.expire(now);
                    }
                }
            })
    }
}

/// What the connection threads share.
pub struct Shared {
    pub conns: Arc<Connections>,
    pub queue: Arc<response::Queue>,
}

/// Accepts connections until `stop` is set. Over the cap, a connection is answered 503
/// and closed at once. Out of descriptors (or memory) the loop pauses and retries; it
/// never ends the process.
pub fn accept_loop(
    listener: &TcpListener,
    shared: &Arc<Shared>,
    stop: &AtomicBool,
) -> Result<(), String> {
    let port = listener.local_addr().map_err(|e| e.to_string())?.port();
    let ssl = SslContextWrap::build_ssl_capabilities(None).map_err(|e| e.to_string())?;
    let tiny = tiny_http::Listener::from(
        listener
            .try_clone()
            .map_err(|e| format!("cannot share the listener with tiny_http: {e}"))?,
    );
    let mut last_warning: Option<Instant> = None;
    let mut warn = |what: String| {
        if last_warning.is_none_or(|t| t.elapsed() > Duration::from_secs(5)) {
            log::warn!("{what}; pausing accepts for {ACCEPT_BACKOFF:?}");
            last_warning = Some(Instant::now());
        }
        thread::sleep(ACCEPT_BACKOFF);
    };
    while !stop.load(Ordering::Relaxed) {
        if !socket::wait_readable(listener.as_raw_fd(), WATCH_EVERY) {
            continue;
        }
        if shared.conns.count() >= shared.conns.limits.max {
            match socket::refuse(listener, &response::raw(&ApiError::TooManyConnections)) {
                Err(e) if socket::is_resource_error(&e) => warn(format!("accept failed: {e}")),
                Err(e) => log::debug!("accept failed: {e}"),
                Ok(()) => {
                    METRICS.connections_refused.fetch_add(1, Ordering::Relaxed);
                    log::debug!("connection refused: {} open", shared.conns.limits.max);
                }
            }
            continue;
        }
        let predicted = socket::lowest_free_fd(listener.as_raw_fd());
        // tiny_http unwraps a `try_clone` of the new socket: out of descriptors it panics
        // (the socket is closed as the panic unwinds).
        let accepted = crate::cli::serve::catch_quietly(|| Server::accept_connection(&tiny, &ssl));
        let client = match accepted {
            Ok(Ok(Some(client))) => client,
            Ok(Ok(None)) => continue,
            Ok(Err(e)) if socket::is_resource_error(&e) => {
                warn(format!("accept failed: {e}"));
                continue;
            }
            Ok(Err(e)) => {
                log::debug!("accept failed: {e}");
                continue;
            }
            Err(_) => {
                warn("accept failed: out of file descriptors".into());
                continue;
            }
        };
        let mut live = shared.conns.lock();
        let known: HashSet<u64> = live.keys().copied().collect();
        let Some(Accepted { fd, ino }) = socket::find_accepted(predicted, port, &known) else {
            drop(live);
            log::debug!("an accepted connection closed before it could be served");
            continue;
        };
        let conn = Arc::new(Conn::new(fd, ino, shared.conns.limits));
        live.insert(ino, conn.clone());
        METRICS.connections_open.set(live.len() as i64);
        drop(live);
        let (for_thread, thread_conn) = (shared.clone(), conn.clone());
        let spawned = thread::Builder::new()
            .name("connection".into())
            .stack_size(CONNECTION_STACK_BYTES)
            .spawn(move || {
                let mut client = client;
                let _ = catch_unwind(AssertUnwindSafe(|| {
                    serve_connection(&thread_conn, &mut client, &for_thread)
                }));
                thread_conn.wait_released();
                for_thread.conns.remove(&thread_conn, client);
            });
        if let Err(e) = spawned {
            // The closure, and tiny_http's connection with it, is gone: the socket is closed.
            shared.conns.forget(&conn);
            warn(format!("cannot start a connection thread: {e}"));
        }
    }
    Ok(())
}

/// Serves one connection's requests in order until it ends, breaks a rule, or the
/// server stops. Each request passes the gate (whole and strict in the socket) before
/// tiny_http parses it.
fn serve_connection<C, E>(conn: &Arc<Conn>, client: &mut C, shared: &Shared)
where
    C: Iterator<Item = Result<Request, E>>,
    E: std::fmt::Display,
{
    let mut gate = Gate::new(conn.fd);
    loop {
        let gone = || {
            let s = conn.lock();
            s.fired || s.stopping
        };
        // The head, under the head deadline (the watchdog's).
        let head = match conn.head(|| gate.head(gone)) {
            Some(Admit::Request(head)) => head,
            Some(Admit::Refuse(refusal)) => return refuse(conn, refusal),
            // The deadline shut the socket, the server is stopping, or the client is done.
            Some(Admit::Close) | None => return,
        };
        let started = Instant::now();
        // Its head was whole before the server began to stop: it is served.
        let stopping = conn.lock().stopping;
        // Its body, under the body deadline.
        let deadline = started + conn.limits.body;
        let body = match gate.body(&head, MAX_BODY_BYTES, deadline, false) {
            Ok(body) => body,
            Err(refusal) => return refuse(conn, refusal),
        };
        // tiny_http parses what the gate let through (it is in the socket already; the
        // head deadline bounds it all the same), and the body is read at once: every
        // read of tiny_http's follows the gate's last look (`refresh`), so that what it
        // reads ahead is what the gate has seen.
        gate.refresh();
        let mut request = match conn.under_head_deadline(|| client.next()) {
            Some(Some(Ok(request))) => request,
            Some(Some(Err(e))) => {
                // tiny_http answered it itself (an `Expect` it does not know: 417).
                log::debug!("connection ends: {e}");
                return;
            }
            Some(None) | None => return,
        };
        let body = match body {
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
        // The previous request (if the client pipelined this one) is answered first;
        // when that answer ends the connection, this one is not run.
        conn.wait_answered();
        if conn.lock().closing {
            return;
        }
        let mut exchange = Exchange::new(request, InFlight::new(conn.clone()));
        if stopping {
            // Read just as the server began to stop.
            conn.close_after_answer();
            response::send(exchange, Err(ApiError::ShuttingDown));
            return;
        }
        match body {
            Body::Complete(data) => exchange.set_body(data),
            Body::Refused(error) => {
                conn.close_after_answer();
                response::send(exchange, Err(error));
                return linger(conn);
            }
            unread => {
                // Too long: answered (413) by the route after its checks; the rest of the
                // body is never read as a request.
                conn.close_after_answer();
                let not_read = matches!(unread, Body::NotRead);
                if let Body::TooLong(data) = unread {
                    exchange.set_body(data);
                }
                if let Err(exchange) = shared.queue.offer(exchange) {
                    response::send(exchange, Err(ApiError::ShuttingDown));
                }
                if not_read {
                    return; // shut for reading already: nothing to linger for
                }
                return linger(conn);
            }
        }
        if let Err(exchange) = shared.queue.offer(exchange) {
            conn.close_after_answer();
            response::send(exchange, Err(ApiError::ShuttingDown));
            return;
        }
        // Without `TCP_INFO` the gate cannot find the next request (gate.rs): one per
        // connection.
        if head.last || !socket::reports_reads() {
            return;
        }
    }
}

impl From<Refusal> for ApiError {
    fn from(refusal: Refusal) -> ApiError {
        match refusal {
            Refusal::Malformed(why) => ApiError::BadRequest(why),
            Refusal::HeadTooLarge => ApiError::HeadTooLarge,
            Refusal::BodyTooLarge => ApiError::PayloadTooLarge,
            Refusal::Version => ApiError::VersionNotSupported,
            Refusal::Late => ApiError::RequestTimeout,
        }
    }
}

/// Answers a request the gate refused, and closes gently.
fn refuse(conn: &Conn, refusal: Refusal) {
    let error = ApiError::from(refusal);
    conn.close_after_answer();
    conn.wait_released();
    response::refuse(conn.fd, &error, Instant::now());
    socket::linger(conn.fd, LINGER, LINGER_BYTES);
}

/// Closes gently once the answers in flight are written.
fn linger(conn: &Conn) {
    conn.wait_released();
    socket::linger(conn.fd, LINGER, LINGER_BYTES);
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
        socket::shutdown(conn.fd, Shutdown::Read);
        return Body::NotRead;
    }
    let mut body = Vec::with_capacity(declared.unwrap_or(1024).min(MAX_BODY_BYTES + 1));
    let read = Deadline {
        inner: request.as_reader(),
        fd: conn.fd,
        deadline,
    }
    .take(declared.map_or(MAX_BODY_BYTES as u64 + 1, |n| n as u64))
    .read_to_end(&mut body);
    socket::set_read_timeout(conn.fd, None);
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

#[cfg(test)]
mod tests {
    use super::*;

    fn conn() -> Arc<Conn> {
        Arc::new(Conn::new(
            -1,
            0,
            Limits {
                max: 1,
                head: Duration::from_secs(10),
                body: Duration::from_secs(10),
            },
        ))
    }

    #[test]
    fn an_answered_request_lets_the_next_go_but_its_late_drop_does_not_free_that_one() {
        let c = conn();
        let mut first = InFlight::new(c.clone());
        first.answered();
        assert!(
            !c.lock().busy,
            "the next request may start once the first is answered"
        );
        let second = InFlight::new(c.clone());
        drop(first); // its answer is written only now
        let s = c.lock();
        assert!(s.busy, "the second request is still in flight");
        assert_eq!(s.held, 1);
        drop(s);
        drop(second);
        let s = c.lock();
        assert_eq!((s.busy, s.held), (false, 0));
    }

    #[test]
    fn the_head_deadline_starts_when_the_request_in_flight_is_answered() {
        let c = conn();
        let flight = InFlight::new(c.clone());
        let waiter = {
            let c = c.clone();
            thread::spawn(move || {
                c.head(|| {
                    // In the head phase with a request in flight: no deadline yet.
                    assert!(c.lock().deadline.is_none());
                    c.wait_answered();
                    c.lock().deadline.is_some()
                })
            })
        };
        thread::sleep(Duration::from_millis(50));
        drop(flight);
        assert_eq!(waiter.join().unwrap(), Some(true));
        assert!(c.lock().deadline.is_none(), "cleared once the head is read");
    }
}
