//! The accept loop over tiny_http's public `Server::accept_connection`: the connection
//! cap (503 and close over it), backing off when descriptors run out, a thread per
//! connection (`connection.rs`), the registry of open connections, and the watchdog that
//! enforces deadlines by shutting sockets down.

use crate::api::error::ApiError;
use crate::http::conn::{Conn, Limits};
use crate::http::connection::serve_connection;
use crate::http::response;
use crate::http::site::Site;
use crate::http::socket::{self, Accepted};
use crate::ops::metrics::Metrics;
use crate::ops::process::catch_quietly;
use std::collections::{HashMap, HashSet};
use std::io;
use std::net::TcpListener;
use std::os::fd::AsRawFd;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread;
use std::time::{Duration, Instant};
use tiny_http::{Server, SslContextWrap};

/// Default of `--max-connections`: 2,000 idle connections still leave room for clients,
/// and RSS with all of them open stays near 40 MB (about 16 kB a connection on musl, 21
/// on glibc: docs/device.md, "Memory").
pub const DEFAULT_MAX_CONNECTIONS: usize = 2048;
/// How long the accept loop pauses when descriptors or memory run out.
pub const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);
/// How often the watchdog looks at the deadlines (and the accept loop at the stop flag).
pub const WATCH_EVERY: Duration = Duration::from_millis(50);
/// Stack of each connection thread (tiny_http's parsing and our body read; the body
/// buffer is on the heap).
pub const CONNECTION_STACK_BYTES: usize = 128 * 1024;

/// Every open connection, for the cap, the watchdog and shutdown.
pub struct Connections {
    live: Mutex<HashMap<u64, Arc<Conn>>>,
    limits: Limits,
    metrics: Arc<Metrics>,
}

impl Connections {
    pub fn new(limits: Limits, metrics: Arc<Metrics>) -> Arc<Connections> {
        Arc::new(Connections {
            live: Mutex::new(HashMap::new()),
            limits,
            metrics,
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

    /// Resets every connection still open (the drain's time is up).
    pub fn abort(&self) {
        for conn in self.snapshot() {
            conn.abort();
        }
    }

    /// Closes the connection's descriptors (by dropping tiny_http's connection) and
    /// forgets it; in that order, so its socket is known until it is gone.
    fn remove<C>(&self, conn: &Conn, client: C) {
        conn.mark_closed();
        drop(client);
        self.forget(conn);
    }

    fn forget(&self, conn: &Conn) {
        let mut live = self.lock();
        live.remove(&conn.ino());
        self.metrics.connections_open.set(live.len() as i64);
    }

    /// The watchdog: shuts down every connection whose deadline passed, until `quit`.
    pub fn watch(self: &Arc<Self>, quit: Arc<AtomicBool>) -> io::Result<thread::JoinHandle<()>> {
        let conns = self.clone();
        thread::Builder::new()
            .name("watchdog".into())
            .stack_size(CONNECTION_STACK_BYTES)
            .spawn(move || {
                while !quit.load(Ordering::Relaxed) {
                    // Unparked when the server stops.
                    thread::park_timeout(WATCH_EVERY);
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
    pub site: Arc<Site>,
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
                    shared
                        .site
                        .metrics
                        .connections_refused
                        .fetch_add(1, Ordering::Relaxed);
                    log::debug!("connection refused: {} open", shared.conns.limits.max);
                }
            }
            continue;
        }
        // tiny_http unwraps a `try_clone` of the new socket: out of descriptors it panics
        // (the socket is closed as the panic unwinds; in a build whose panics abort, the
        // process would end), so a connection is accepted only while two are free.
        let Some(predicted) = socket::lowest_free_fd(listener.as_raw_fd()) else {
            warn("accept failed: out of file descriptors".into());
            continue;
        };
        let accepted = catch_quietly(|| Server::accept_connection(&tiny, &ssl));
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
        let Some(Accepted { fd, ino }) = socket::find_accepted(Some(predicted), port, &known)
        else {
            drop(live);
            log::debug!("an accepted connection closed before it could be served");
            continue;
        };
        let conn = Arc::new(Conn::new(
            shared.site.metrics.clone(),
            fd,
            ino,
            shared.conns.limits,
        ));
        live.insert(ino, conn.clone());
        shared.site.metrics.connections_open.set(live.len() as i64);
        drop(live);
        let (for_thread, thread_conn) = (shared.clone(), conn.clone());
        let spawned = shared
            .site
            .threads
            .spawn("connection", CONNECTION_STACK_BYTES, move || {
                let mut client = client;
                let _ = catch_unwind(AssertUnwindSafe(|| {
                    serve_connection(
                        &thread_conn,
                        &mut client,
                        &for_thread.queue,
                        &for_thread.site,
                    )
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
