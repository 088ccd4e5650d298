//! One open connection's shared state (`Conn`), seen by its thread, the worker answering
//! its request (through `InFlight`), and the watchdog: whether it waits for a head (and
//! until when), whether a request is in flight, and whether it is closing or stopping.
//!
//! Deadlines, each from the moment the connection is ready for that phase:
//! - the next request head (which includes idle time between requests) must be complete
//!   within `--read-timeout`, counted from when the previous answer was sent: past it the
//!   connection is closed without an answer;
//! - a body must arrive whole within `--body-timeout` (the gate's and the body reader's);
//! - after an answer that ends the connection, it is gone within `CLOSE_WITHIN`;
//! - while an answer waits on its client, the client must take in at least
//!   `MIN_DELIVERY_BYTES` of it per `--write-timeout`, or the connection is reset.

use crate::http::socket;
use crate::ops::metrics::Metrics;
use std::net::Shutdown;
use std::os::fd::RawFd;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// After an answer that ends its connection, the connection is closed within this
/// (the answer written, what the client still sends read and dropped for `LINGER`);
/// past it the watchdog shuts the socket down, whatever is still reading or writing.
pub const CLOSE_WITHIN: Duration = Duration::from_secs(1);
/// While an answer waits on its client (this much unacknowledged in the socket), the client
/// must acknowledge at least this many bytes per `--write-timeout`: a client that reads a
/// long list a few bytes at a time cannot hold its connection and writer thread for hours.
pub const MIN_DELIVERY_BYTES: u64 = 16 * 1024;
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
    /// The drain's time ran out and the socket was reset: nothing more is sent.
    aborted: bool,
    /// The connection ends after the answer in flight: once it is answered, it has
    /// `CLOSE_WITHIN` to be gone.
    closing: bool,
    /// While a request is held: when the current delivery window began, the bytes the
    /// client had acknowledged then, and whether the answer was waiting on it then.
    delivery: Option<(Instant, u64, bool)>,
}

/// One open connection, shared by its thread, the worker answering it, and the watchdog.
pub struct Conn {
    /// The figures of the server this connection belongs to.
    metrics: Arc<Metrics>,
    fd: RawFd,
    ino: u64,
    limits: Limits,
    state: Mutex<ConnState>,
    idle: Condvar,
}

impl Conn {
    pub fn new(metrics: Arc<Metrics>, fd: RawFd, ino: u64, limits: Limits) -> Conn {
        Conn {
            metrics,
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
                aborted: false,
                closing: false,
                delivery: None,
            }),
            idle: Condvar::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, ConnState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The socket's descriptor; valid while a request of this connection is in flight.
    /// The figures of its server.
    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    pub fn fd(&self) -> RawFd {
        self.fd
    }

    /// A request is handed over (see `InFlight`).
    fn begin(&self) {
        let mut s = self.lock();
        s.busy = true;
        s.held += 1;
    }

    /// The request handed over is answered: the next may start, and the deadline of
    /// the phase the connection is in (the next head, or closing) starts now.
    fn answered(&self) {
        let mut s = self.lock();
        s.busy = false;
        if s.closing {
            s.deadline = Some(Instant::now() + CLOSE_WITHIN);
        } else if s.in_head {
            s.deadline = Some(Instant::now() + self.limits.head);
        }
        self.wake(&s);
    }

    /// The request handed over is gone, its answer written (or not to be).
    fn released(&self) {
        let mut s = self.lock();
        s.held -= 1;
        if s.held == 0 && s.stopping && s.in_head && !s.closed {
            // Answered, and the server is stopping: the next request is not awaited.
            socket::shutdown(self.fd, Shutdown::Both);
        }
        self.wake(&s);
    }

    fn wake(&self, s: &ConnState) {
        if s.waiting {
            self.idle.notify_one();
        }
    }

    /// The limits it was opened with.
    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// Its key among the open connections (the socket's inode).
    pub fn ino(&self) -> u64 {
        self.ino
    }

    /// A deadline shut the socket down, or the server is stopping: read no further.
    pub fn gone(&self) -> bool {
        let s = self.lock();
        s.fired || s.stopping
    }

    pub fn stopping(&self) -> bool {
        self.lock().stopping
    }

    /// The drain's time ran out and the socket was reset (`abort`): the client gets
    /// nothing more, and what it sent is not answered (nor logged as answered).
    pub fn aborted(&self) -> bool {
        self.lock().aborted
    }

    /// The connection ends after the answer in flight.
    pub fn closing(&self) -> bool {
        self.lock().closing
    }

    /// Its descriptors are about to be closed: the watchdog must not touch them.
    pub fn mark_closed(&self) {
        self.lock().closed = true;
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
    pub fn wait_answered(&self) {
        self.wait_until(|s| !s.busy);
    }

    /// Waits until the request in flight (if any) is gone, its answer written.
    pub fn wait_released(&self) {
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
    /// while a request is in flight, once it is answered (`answered`). `None` when the
    /// deadline passed (the socket is then shut down) or the server is stopping.
    pub fn head<T>(&self, read: impl FnOnce() -> T) -> Option<T> {
        if self.lock().stopping {
            return None;
        }
        self.under_head_deadline(read)
    }

    /// Runs `read` under the head deadline, as `head` does, even while stopping.
    pub fn under_head_deadline<T>(&self, read: impl FnOnce() -> T) -> Option<T> {
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
    pub fn expire(&self, now: Instant) {
        let mut s = self.lock();
        if s.closed {
            return;
        }
        if s.deadline.is_some_and(|d| d <= now) {
            s.deadline = None;
            s.fired = true;
            socket::shutdown(self.fd, Shutdown::Both);
        } else if self.starved(&mut s, now) {
            s.fired = true;
            socket::abort(self.fd);
        }
    }

    /// Whether the client took in less than `MIN_DELIVERY_BYTES` of an answer in the
    /// last `--write-timeout`, while the answer waited on it (at least that much
    /// unacknowledged in the socket) at both ends of that time. A window starts when a
    /// request is held and again at each end; while the answer is still being made, or is
    /// small, the client is not to blame.
    /// Without `TCP_INFO` (as under qemu-user) nothing is checked.
    fn starved(&self, s: &mut ConnState, now: Instant) -> bool {
        if s.held == 0 {
            s.delivery = None;
            return false;
        }
        if s.delivery
            .is_some_and(|(since, ..)| now < since + self.limits.write)
        {
            return false;
        }
        let Some(acked) = socket::acked(self.fd) else {
            return false;
        };
        // Waiting on the client: at least a window's worth unacknowledged, so a small
        // answer held up by a delayed acknowledgement never counts.
        let waiting = socket::unsent_bytes(self.fd) >= MIN_DELIVERY_BYTES as usize;
        let window = s.delivery.replace((now, acked, waiting));
        let starved = window.is_some_and(|(_, from, was_waiting)| {
            was_waiting && waiting && acked.saturating_sub(from) < MIN_DELIVERY_BYTES
        });
        if starved {
            log::debug!(
                "a client took in under {MIN_DELIVERY_BYTES} bytes of an answer in {} s: its connection is reset",
                self.limits.write.as_secs()
            );
        }
        starved
    }

    /// At shutdown: reads no further request, and closes the connection now if it is
    /// idle between requests (else once its request is answered, in `released`).
    pub fn stop(&self) {
        let mut s = self.lock();
        s.stopping = true;
        if !s.closed && s.held == 0 && s.in_head {
            socket::shutdown(self.fd, Shutdown::Both);
        }
    }

    /// The drain's time is up: the connection is reset whatever it is doing, so that its
    /// threads end.
    pub fn abort(&self) {
        let mut s = self.lock();
        s.stopping = true;
        s.aborted = true;
        if !s.closed {
            s.fired = true;
            socket::abort(self.fd);
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
    pub fn new(conn: Arc<Conn>) -> InFlight {
        conn.begin();
        conn.metrics.in_flight.add(1);
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
            self.conn.metrics.in_flight.add(-1);
            self.conn.answered();
        }
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        if !self.answered {
            self.conn.metrics.in_flight.add(-1);
            self.conn.answered();
        }
        self.conn.released();
    }
}

/// The bounds of a connection (`--max-connections`, `--read-timeout`, `--body-timeout`,
/// `--write-timeout`).
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub max: usize,
    pub head: Duration,
    pub body: Duration,
    pub write: Duration,
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::thread;

    fn conn() -> Arc<Conn> {
        Arc::new(Conn::new(
            Arc::default(),
            -1,
            0,
            Limits {
                max: 1,
                head: Duration::from_secs(10),
                body: Duration::from_secs(10),
                write: Duration::from_secs(10),
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
