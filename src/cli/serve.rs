//! A server's life: `start` opens the store, starts the workers and the accept loop and
//! returns once it listens; `Running::stop` (or its drop) drains, closes the store and
//! joins every thread the server started. The binary and the library both run it.
//!
//! `http::accept` → a thread per connection (`http::connection`: head, framing, body)
//! → `WorkQueue` → N workers (`http::workers`) → `api::routes::handle` → `Store`; a write
//! goes on to the writer thread and comes back through the queue, once committed, to be
//! answered by a worker. Answers are written by the worker, or by a writer thread when
//! they would wait on the client (`http::response`).
//!
//! Nothing here is process-wide: no logger, no signal handler, no allocator setting
//! (the binary's `main` sets those), and every figure, stream slot and thread belongs to
//! the one server.

use crate::api::auth;
use crate::api::caller::{Context, Writers};
use crate::api::control::Control;
use crate::api::ratelimit::Limiter;
use crate::cli::options::ServeConfig;
use crate::http::accept::{self, Connections, Shared};
use crate::http::conn::Limits;
use crate::http::feed::Streams;
use crate::http::response::Queue;
use crate::http::site::Site;
use crate::http::socket;
use crate::http::workers;
use crate::ops::clock::Clock;
use crate::ops::threads::Threads;
use crate::store::Store;
use std::fmt;
use std::net::{SocketAddr, TcpListener};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

/// A server that listens: its address, and what stops it.
#[derive(Debug)]
pub struct Running {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    /// The listening socket, shut down by `stop` so that the accept loop wakes at once.
    listener: TcpListener,
    /// The thread that accepts, then drains and closes; `None` once joined.
    life: Option<JoinHandle<Result<(), String>>>,
}

impl Running {
    /// The address it listens on (the port picked when the address asked for port 0).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://IP:PORT` of `addr`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// A flag that stops the server once set (for a signal handler: the binary registers
    /// SIGTERM and SIGINT on it); `wait` then returns.
    pub fn stop_flag(&self) -> Arc<AtomicBool> {
        self.stop.clone()
    }

    /// Stops the server: no new connection is taken, requests in flight are answered
    /// (for at most `--drain-timeout`; past it, connections still open are reset), the
    /// database is closed, and every thread the server started has ended when it
    /// returns.
    pub fn stop(mut self) -> Result<(), Error> {
        self.halt();
        self.join()
    }

    /// Sets the stop flag and wakes the accept loop.
    fn halt(&self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = socket2::SockRef::from(&self.listener).shutdown(std::net::Shutdown::Read);
    }

    /// Waits until the stop flag is set, then stops as `stop` does.
    pub fn wait(mut self) -> Result<(), Error> {
        self.join()
    }

    fn join(&mut self) -> Result<(), Error> {
        match self.life.take().map(JoinHandle::join) {
            None => Ok(()),
            Some(Ok(ended)) => ended.map_err(Error::Failed),
            Some(Err(_)) => Err(Error::Failed("the server's thread panicked".into())),
        }
    }
}

impl Drop for Running {
    /// Stops the server as `stop` does.
    fn drop(&mut self) {
        self.halt();
        if let Err(e) = self.join() {
            log::error!("{e}");
        }
    }
}

/// Why a server did not start, or ended badly.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// An option is unknown, or its value is not one the command line would take; the
    /// message is the command line's.
    Option(String),
    /// The server could not start: its address, its database, or a thread.
    Start(String),
    /// The server failed while it ran (its accept loop ended, or a thread of its
    /// panicked).
    Failed(String),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Option(e) | Error::Start(e) | Error::Failed(e) => f.write_str(e),
        }
    }
}

impl std::error::Error for Error {}

/// What the accept thread holds, to drain and close once stopped.
struct Parts {
    config: ServeConfig,
    /// What every worker's `Context` shares: rate-limit budgets, the tokens found able
    /// to write, test control.
    callers: (Option<Arc<Limiter>>, Arc<Writers>, Option<Arc<Control>>),
    store: Store,
    listener: TcpListener,
    site: Arc<Site>,
    shared: Arc<Shared>,
    conns: Arc<Connections>,
    queue: Arc<Queue>,
    workers: Vec<JoinHandle<()>>,
    deliveries: crate::cli::webhook::Deliveries,
    watchdog: (Arc<AtomicBool>, JoinHandle<()>),
}

/// Opens the store (and loads `--seed`), starts the threads, and returns once the server
/// listens. A bad seed is `Error::Option` (the command line's exit status 2).
pub fn start(config: ServeConfig) -> Result<Running, Error> {
    let retention = crate::store::retention::Retention {
        keep: config.event_retention,
        hold: config.webhook_hold,
    };
    // The server's one clock, handed to everything that reads time (test control moves
    // it; with test control, event times never go back).
    let clock = Arc::new(Clock::new(config.test_control));
    let random = crate::ops::random::Random::new(config.test_seed);
    let store = Store::open(
        &config.db,
        config.db_pool,
        retention,
        clock.clone(),
        random.clone(),
    )
    .map_err(|e| Error::Start(format!("cannot open the database {}: {e}", config.db)))?;
    if let Some(path) = &config.seed {
        // The control token is no principal's: a seeded token equal to it is refused.
        let control = config
            .control_token
            .as_ref()
            .map(|t| auth::hash_token(t.expose()));
        let loaded = crate::api::control::seed::read(path, clock.unix_now()).and_then(|seed| {
            if let Some(i) = seed.tokens.iter().position(|t| Some(t.hash) == control) {
                return Err(format!(
                    "tokens[{i}].token: the control token is no principal's, and may not be seeded"
                ));
            }
            store
                .seed(seed)
                .map_err(|e| format!("seed file {}: {e}", path.display()))
        });
        if let Err(e) = loaded {
            store.close();
            return Err(Error::Option(format!("{e}; nothing of it was loaded")));
        }
    }
    launch(config, store, clock, random).map_err(Error::Start)
}

/// Test control, when on: its state, with the store as it is before the server listens
/// (what a reset goes back to).
fn control(
    config: &ServeConfig,
    store: &Store,
    random: crate::ops::random::Random,
    limiter: &Option<Arc<Limiter>>,
    writers: &Arc<Writers>,
    clock: &Arc<Clock>,
) -> Result<Option<Arc<Control>>, String> {
    let (true, Some(token)) = (config.test_control, &config.control_token) else {
        return Ok(None);
    };
    let (limiter, writers) = (limiter.clone(), writers.clone());
    let forget = move || {
        if let Some(limiter) = &limiter {
            limiter.clear();
        }
        writers.clear();
    };
    if random.seeded() {
        log::warn!("--test-seed: ids and tokens made at run time are predictable from the seed");
    }
    let control = Control::new(
        token.expose(),
        (config.journal_size, config.journal_bytes),
        random,
        Box::new(forget),
        clock.clone(),
    );
    control.started(
        store
            .snapshot()
            .map_err(|e| format!("cannot copy the store for test control: {e}"))?,
    );
    log::warn!(
        "test control is on: /_control/ can reset the store, make tokens and read the journal; never in production"
    );
    Ok(Some(Arc::new(control)))
}

fn launch(
    config: ServeConfig,
    store: Store,
    clock: Arc<Clock>,
    random: crate::ops::random::Random,
) -> Result<Running, String> {
    let limiter = config.rate_limit.map(|l| Arc::new(Limiter::new(l)));
    let writers = Arc::new(Writers::default());
    let control = match control(&config, &store, random, &limiter, &writers, &clock) {
        Ok(c) => c,
        Err(e) => {
            store.close();
            return Err(e);
        }
    };
    let metrics = store.metrics();
    metrics.start_time_ms.set(clock.unix_now_millis());
    metrics.connections_max.set(config.max_connections as i64);
    let listener = socket::bind(config.addr)?;
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    if !socket::reports_reads() {
        log::warn!(
            "the kernel does not answer TCP_INFO (an emulator?): each connection serves one request"
        );
    }
    let env_token = config.token.as_ref().map(|t| auth::hash_token(t.expose()));
    if env_token.is_none() {
        log::warn!(
            "PLANT_STORE_TOKEN is not set: only tokens made by `plant-store token add` are accepted"
        );
    }
    // Streams leave at least half the connections to requests.
    let max_streams = config.max_streams.min(config.max_connections / 2);
    if max_streams < config.max_streams {
        log::info!(
            "at most {max_streams} event streams: half of --max-connections {}",
            config.max_connections
        );
    }
    let site = Arc::new(Site {
        streams: Streams::new(
            max_streams,
            config.max_streams_per_principal,
            metrics.clone(),
        ),
        metrics: metrics.clone(),
        threads: Threads::default(),
        control: control.clone(),
        delays: Default::default(),
    });
    // From here on, a failure stops what was started (`Parts`' drain) before it returns.
    let queue: Arc<Queue> = Arc::new(Queue::new(metrics.clone()));
    let conns = Connections::new(
        Limits {
            max: config.max_connections,
            head: config.read_timeout,
            body: config.body_timeout,
            write: config.write_timeout,
        },
        metrics.clone(),
    );
    let watchdog_quit = Arc::new(AtomicBool::new(false));
    let watchdog = conns
        .watch(watchdog_quit.clone())
        .map_err(|e| format!("cannot start the watchdog thread: {e}"))?;
    let deliveries = match crate::cli::webhook::start(
        &store,
        config.webhooks.clone(),
        &site.threads,
        clock.clone(),
        site.control.clone(),
    ) {
        Ok(d) => d,
        Err(e) => {
            watchdog_quit.store(true, Ordering::Relaxed);
            let _ = watchdog.join();
            site.threads.join_all();
            store.close();
            return Err(format!("cannot start the webhook deliveries: {e}"));
        }
    };
    let shared = Arc::new(Shared {
        conns: conns.clone(),
        queue: queue.clone(),
        site: site.clone(),
    });
    let mut parts = Parts {
        callers: (limiter, writers, control),
        store,
        listener,
        site,
        shared,
        conns,
        queue,
        workers: Vec::with_capacity(config.workers),
        deliveries,
        watchdog: (watchdog_quit, watchdog),
        config,
    };
    if let Err(e) = parts.start_threads(env_token) {
        parts.stop_and_close();
        return Err(e);
    }
    log::info!(
        "serving {} with {} workers, at most {} connections, database {}",
        addr,
        parts.config.workers,
        parts.config.max_connections,
        parts.config.db
    );
    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    let waker = parts
        .listener
        .try_clone()
        .map_err(|e| format!("cannot share the listening socket: {e}"));
    let waker = match waker {
        Ok(w) => w,
        Err(e) => {
            parts.stop_and_close();
            return Err(e);
        }
    };
    let life = thread::Builder::new()
        .name("accept".into())
        .stack_size(256 * 1024)
        .spawn(move || {
            let accepted = accept::accept_loop(&parts.listener, &parts.shared, &flag);
            parts.stop_and_close();
            accepted
        })
        .map_err(|e| format!("cannot start the accept thread: {e}"))?;
    Ok(Running {
        addr,
        stop,
        listener: waker,
        life: Some(life),
    })
}

impl Parts {
    /// The event streams' thread and the workers.
    fn start_threads(&mut self, env_token: Option<auth::TokenHash>) -> Result<(), String> {
        let connect = || {
            self.store
                .connect()
                .map_err(|e| format!("cannot open the database: {e}"))
        };
        let readers = connect()?.readers();
        self.site
            .streams
            .start(self.store.board(), readers, &self.site.threads)
            .map_err(|e| format!("cannot start the event streams' thread: {e}"))?;
        let (limiter, writers, control) = &self.callers;
        for n in 0..self.config.workers {
            let cx = Context {
                db: connect()?,
                metrics: self.site.metrics.clone(),
                env_token,
                limiter: limiter.clone(),
                writers: writers.clone(),
                control: control.clone(),
            };
            let worker = workers::spawn(n, cx, self.queue.clone(), self.config.queue_timeout)
                .map_err(|e| format!("cannot start a worker thread: {e}"))?;
            self.workers.push(worker);
        }
        Ok(())
    }

    /// Stopping: no new connections; idle ones are closed, what was received is
    /// answered within `--drain-timeout`, then what is still open is reset; every thread
    /// is joined and the store closed.
    fn stop_and_close(self) {
        let Parts {
            callers: _,
            config,
            store,
            listener,
            site,
            shared,
            conns,
            queue,
            workers,
            deliveries,
            watchdog: (watchdog_quit, watchdog),
        } = self;
        log::info!(
            "stopping: finishing requests in flight (at most {:?})",
            config.drain_timeout
        );
        let _ = socket2::SockRef::from(&listener).shutdown(std::net::Shutdown::Read);
        drop(listener);
        // Event streams end now: they would hold their connections through the drain. No
        // webhook attempt starts any more; one under way finishes (below) within the drain.
        site.streams.stop();
        site.delays.stop();
        deliveries.stop();
        let deadline = Instant::now() + config.drain_timeout;
        conns.stop();
        while conns.count() > 0 && Instant::now() < deadline {
            thread::sleep(Duration::from_millis(10));
        }
        queue.close();
        while workers.iter().any(|w| !w.is_finished()) && Instant::now() < deadline {
            thread::sleep(Duration::from_millis(10));
        }
        deliveries.finish(deadline);
        let drained = conns.count() == 0 && workers.iter().all(JoinHandle::is_finished);
        if !drained {
            log::warn!("drain timeout passed with requests still in flight; resetting them");
            conns.abort();
        }
        watchdog_quit.store(true, Ordering::Relaxed);
        watchdog.thread().unpark();
        let _ = watchdog.join();
        for worker in workers {
            let _ = worker.join();
        }
        site.threads.join_all();
        drop(shared);
        store.close();
        log::info!("stopped");
    }
}
