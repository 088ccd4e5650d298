//! The service's life: opens the store, starts the workers, runs the accept loop until
//! SIGTERM/SIGINT, then drains and stops.
//!
//! `http::accept` → a thread per connection (`http::connection`: head, framing, body)
//! → `WorkQueue` → N workers (`http::workers`) → `api::routes::handle` → `Store`; a write
//! goes on to the writer thread and comes back through the queue, once committed, to be
//! answered by a worker. Answers are written by the worker, or by a writer thread when
//! they would wait on the client (`http::response`).

use crate::api::auth;
use crate::api::caller::{Context, Writers};
use crate::api::ratelimit::Limiter;
use crate::cli::options::ServeConfig;
use crate::http::accept::{self, Connections, Shared};
use crate::http::conn::Limits;
use crate::http::feed;
use crate::http::response::Queue;
use crate::http::socket;
use crate::http::workers;
use crate::ops::clock;
use crate::ops::metrics::METRICS;
use crate::ops::process;
use crate::store::Store;
use std::io::{self, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

/// Runs the service until SIGTERM or SIGINT.
pub fn serve(config: ServeConfig) -> Result<(), String> {
    METRICS.start_time_ms.set(clock::unix_now_millis());
    METRICS.connections_max.set(config.max_connections as i64);
    socket::raise_fd_limit();
    process::limit_malloc_arenas();
    process::log_panics();
    let retention = crate::store::retention::Retention {
        keep: config.event_retention,
        hold: config.webhook_hold,
    };
    let store = Store::open(&config.db, config.db_pool, retention)
        .map_err(|e| format!("cannot open the database {}: {e}", config.db))?;
    let listener = socket::bind(config.addr)?;
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    if !socket::reports_reads() {
        log::warn!(
            "the kernel does not answer TCP_INFO (an emulator?): each connection serves one request"
        );
    }

    let stop = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT] {
        signal_hook::flag::register(signal, stop.clone()).map_err(|e| e.to_string())?;
    }
    let env_token = config.token.as_deref().map(auth::hash_token);
    if env_token.is_none() {
        log::warn!(
            "PLANT_STORE_TOKEN is not set: only tokens made by `plant-store token add` are accepted"
        );
    }

    let queue: Arc<Queue> = Arc::new(Queue::new());
    let readers = store
        .connect()
        .map_err(|e| format!("cannot open the database: {e}"))?
        .readers();
    // Streams leave at least half the connections to requests.
    let max_streams = config.max_streams.min(config.max_connections / 2);
    if max_streams < config.max_streams {
        log::info!(
            "at most {max_streams} event streams: half of --max-connections {}",
            config.max_connections
        );
    }
    feed::start(
        store.board(),
        readers,
        max_streams,
        config.max_streams_per_principal,
    )
    .map_err(|e| format!("cannot start the event streams' thread: {e}"))?;
    let deliveries = crate::webhooks::start(&store, config.webhooks.clone())
        .map_err(|e| format!("cannot start the webhook deliveries: {e}"))?;
    let limiter = config.rate_limit.map(|l| Arc::new(Limiter::new(l)));
    let writers = Arc::new(Writers::default());
    let mut workers = Vec::with_capacity(config.workers);
    for n in 0..config.workers {
        let cx = Context {
            db: store
                .connect()
                .map_err(|e| format!("cannot open the database: {e}"))?,
            env_token,
            limiter: limiter.clone(),
            writers: writers.clone(),
        };
        let worker = workers::spawn(n, cx, queue.clone(), config.queue_timeout)
            .map_err(|e| format!("cannot start a worker thread: {e}"))?;
        workers.push(worker);
    }
    let conns = Connections::new(Limits {
        max: config.max_connections,
        head: config.read_timeout,
        body: config.body_timeout,
        write: config.write_timeout,
    });
    let watchdog_quit = Arc::new(AtomicBool::new(false));
    let watchdog = conns
        .watch(watchdog_quit.clone())
        .map_err(|e| format!("cannot start the watchdog thread: {e}"))?;
    let shared = Arc::new(Shared {
        conns: conns.clone(),
        queue: queue.clone(),
    });

    println!("listening on http://{addr}");
    io::stdout().flush().map_err(|e| e.to_string())?;
    log::info!(
        "serving {} with {} workers, at most {} connections, database {}",
        addr,
        config.workers,
        config.max_connections,
        config.db
    );

    accept::accept_loop(&listener, &shared, &stop)?;

    // Stopping: no new connections; idle ones are closed, what was received is answered.
    log::info!(
        "stopping: finishing requests in flight (at most {:?})",
        config.drain_timeout
    );
    let _ = socket2::SockRef::from(&listener).shutdown(std::net::Shutdown::Read);
    drop(listener);
    // Event streams end now: they would hold their connections through the drain. No
    // webhook attempt starts any more; one under way finishes (below) within the drain.
    feed::stop();
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
    watchdog_quit.store(true, Ordering::Relaxed);
    let _ = watchdog.join();
    if conns.count() == 0 && workers.iter().all(JoinHandle::is_finished) {
        store.close();
    } else {
        log::warn!(
            "drain timeout passed with requests still in flight; exiting without the final checkpoint"
        );
    }
    log::info!("stopped");
    Ok(())
}
