//! A server's life: `start` opens the store, starts the workers and the accept loop and
//! returns once it listens (a `Running`, `running.rs`); `Running::stop` (or its drop)
//! ends the accept loop, and the accept thread then drains, closes the store and joins
//! every thread the server started (`Parts::stop_and_close`). The binary and the library
//! both run it.
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
use crate::config::ServeConfig;
use crate::http::accept::{self, Connections, Shared};
use crate::http::conn::Limits;
use crate::http::delay::Delays;
use crate::http::feed::Streams;
use crate::http::response::Queue;
use crate::http::site::Site;
use crate::http::socket;
use crate::http::workers;
use crate::ops::clock::Clock;
use crate::ops::threads::Threads;
use crate::server::control::Slot;
use crate::server::open::Refused;
use crate::server::running::{Error, Running};
use crate::store::Store;
use std::net::TcpListener;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

/// What the accept thread holds, to drain and close once stopped.
struct Parts {
    config: ServeConfig,
    /// What every worker's `Context` shares: rate-limit budgets, the tokens found able
    /// to write, test control.
    callers: (Option<Arc<Limiter>>, Arc<Writers>, Option<Arc<Control>>),
    /// Where test control's calls in this process run (`Running::control`), emptied
    /// when the server stops.
    local: Slot,
    store: Store,
    listener: TcpListener,
    site: Arc<Site>,
    shared: Arc<Shared>,
    conns: Arc<Connections>,
    queue: Arc<Queue>,
    workers: Vec<JoinHandle<()>>,
    deliveries: crate::config::webhook::Deliveries,
    watchdog: (Arc<AtomicBool>, JoinHandle<()>),
}

/// Takes the port, opens the store (and loads `--seed`), starts the threads, and returns
/// once the server listens. A start refused at any step leaves no file it made. A bad
/// seed, or a database file the start's terms refuse, is `Error::Option` (the command
/// line's exit status 2).
pub fn start(config: ServeConfig) -> Result<Running, Error> {
    let listener = socket::bind(config.addr).map_err(Error::Start)?;
    let made = crate::store::NewFiles::note(&config.db);
    let started = crate::server::open::open(&config)
        .map_err(|refused| match refused {
            Refused::Usage(e) => Error::Option(e),
            Refused::Failed(e) => Error::Start(e),
        })
        .and_then(|(store, clock, random)| {
            launch(config, store, clock, random, listener).map_err(Error::Start)
        });
    if started.is_err() {
        made.remove();
    }
    started
}

fn launch(
    config: ServeConfig,
    store: Store,
    clock: Arc<Clock>,
    random: crate::ops::random::Random,
    listener: TcpListener,
) -> Result<Running, String> {
    let limiter = config.rate_limit.map(|l| Arc::new(Limiter::new(l)));
    let writers = Arc::new(Writers::default());
    let delays = Arc::new(Delays::default());
    let started =
        crate::server::control::start(&config, &store, random, &limiter, &writers, &clock, &delays);
    let control = match started {
        Ok(c) => c,
        Err(e) => {
            store.close();
            return Err(e);
        }
    };
    let metrics = store.metrics();
    metrics.start_time_ms.set(clock.unix_now_millis());
    metrics.connections_max.set(config.max_connections as i64);
    let addr = match listener.local_addr() {
        Ok(addr) => addr,
        Err(e) => {
            store.close();
            return Err(e.to_string());
        }
    };
    if !socket::reports_reads() {
        log::warn!(
            "the kernel does not answer TCP_INFO (an emulator?): each connection serves one request"
        );
    }
    let env_token = config.token.as_ref().map(|t| auth::hash_token(t.expose()));
    // Only where it is news: test control makes tokens at run time, and a seed stores them.
    if env_token.is_none() && !config.test_control && config.seed.is_none() {
        log::warn!(
            "{} is not set: only tokens stored in the database are accepted (`plant-store token add`)",
            config.named.token
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
        delays,
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
    let deliveries = match crate::config::webhook::start(
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
        local: Slot::default(),
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
    let door = crate::server::control::door(&parts.config, &parts.local);
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
    Ok(Running::new(addr, stop, waker, life, door))
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
        let context = || {
            Ok::<_, String>(Context {
                db: connect()?,
                metrics: self.site.metrics.clone(),
                env_token,
                limiter: limiter.clone(),
                writers: writers.clone(),
                control: control.clone(),
            })
        };
        for n in 0..self.config.workers {
            let worker =
                workers::spawn(n, context()?, self.queue.clone(), self.config.queue_timeout)
                    .map_err(|e| format!("cannot start a worker thread: {e}"))?;
            self.workers.push(worker);
        }
        // Test control's calls in this process (`Running::control`) run on a context
        // of their own.
        if control.is_some() {
            self.local = Slot::new(context()?);
        }
        Ok(())
    }

    /// Stopping: no new connections; idle ones are closed, what was received is
    /// answered within `--drain-timeout`, then what is still open is reset; every thread
    /// is joined and the store closed.
    fn stop_and_close(self) {
        let Parts {
            callers: _,
            local,
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
        // No control call in this process either; its connection goes before the store.
        local.close();
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
            log::warn!(
                "drain timeout passed with requests still in flight; resetting them, and closing without the final checkpoint"
            );
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
        if drained {
            store.close();
        } else {
            store.close_in_haste();
        }
        log::info!("stopped");
    }
}
