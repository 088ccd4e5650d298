//! The service's life: opens the store, starts the workers, runs the accept loop until
//! SIGTERM/SIGINT, then drains and stops.
//!
//! accept loop → a thread per connection (head, framing, body) → `WorkQueue` →
//! N workers → `routes::handle` → `Store`; a write goes on to the writer thread and comes
//! back through the queue, once committed, to be answered by a worker. Answers are
//! written by the worker, or by a writer thread when they would wait on the client
//! (`response.rs`).

use crate::api::auth;
use crate::ops::clock;
use crate::cli::options::ServeConfig;
use crate::http::connection::{self, Connections, Limits, Shared};
use crate::api::error::ApiError;
use crate::ops::metrics::METRICS;
use crate::http::queue::Task;
use crate::api::ratelimit::Limiter;
use crate::http::response::{self, Exchange, Queue, Settled};
use crate::api::routes::{self, Context, Handled, Seen};
use crate::http::socket;
use crate::store::{self, Location, Store};
use std::io::{self, Write};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

/// Stack of each worker (SQLite runs there).
pub const WORKER_STACK_BYTES: usize = 512 * 1024;
/// glibc malloc arenas (see `limit_malloc_arenas`).
#[cfg(target_env = "gnu")]
pub const MALLOC_ARENAS: i32 = 2;

/// Runs the service until SIGTERM or SIGINT.
pub fn serve(config: ServeConfig) -> Result<(), String> {
    METRICS.start_time_ms.set(clock::unix_now_millis());
    METRICS.connections_max.set(config.max_connections as i64);
    socket::raise_fd_limit();
    limit_malloc_arenas();
    log_panics();
    let store = Store::open(Location::parse(&config.db), config.db_pool).map_err(|e| {
        format!(
            "cannot open the database {}: {e}",
            store::redacted(&config.db)
        )
    })?;
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
    let limiter = config.rate_limit.map(|l| Arc::new(Limiter::new(l)));
    let mut workers = Vec::with_capacity(config.workers);
    for n in 0..config.workers {
        let cx = Context {
            db: store
                .connect()
                .map_err(|e| format!("cannot open the database: {e}"))?,
            env_token,
            limiter: limiter.clone(),
        };
        let queue = queue.clone();
        let queue_timeout = config.queue_timeout;
        let worker = thread::Builder::new()
            .name(format!("worker-{n}"))
            .stack_size(WORKER_STACK_BYTES)
            .spawn(move || run_worker(&cx, &queue, queue_timeout))
            .map_err(|e| format!("cannot start a worker thread: {e}"))?;
        workers.push(worker);
    }
    let conns = Connections::new(Limits {
        max: config.max_connections,
        head: config.read_timeout,
        body: config.body_timeout,
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
        store::redacted(&config.db)
    );

    connection::accept_loop(&listener, &shared, &stop)?;

    // Stopping: no new connections; idle ones are closed, what was received is answered.
    log::info!(
        "stopping: finishing requests in flight (at most {:?})",
        config.drain_timeout
    );
    let _ = socket2::SockRef::from(&listener).shutdown(std::net::Shutdown::Read);
    drop(listener);
    let deadline = Instant::now() + config.drain_timeout;
    conns.stop();
    while conns.count() > 0 && Instant::now() < deadline {
        thread::sleep(Duration::from_millis(10));
    }
    queue.close();
    while workers.iter().any(|w| !w.is_finished()) && Instant::now() < deadline {
        thread::sleep(Duration::from_millis(10));
    }
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

fn run_worker(cx: &Context, queue: &Arc<Queue>, queue_timeout: Duration) {
    while let Some(task) = queue.take() {
        // A panic while handling answers 500 (in `start`); one while sending is caught
        // here so the worker lives on.
        let _ = catch_unwind(AssertUnwindSafe(|| match task {
            Task::Request(exchange, queued) if queued.elapsed() > queue_timeout => {
                response::send(exchange, Err(ApiError::Overloaded))
            }
            Task::Request(exchange, _) => start(cx, queue, exchange),
            Task::Settled(s) => response::send(s.exchange, routes::settle(s.pending, s.outcome)),
        }));
    }
}

/// Handles a request: answers it, or hands its change to the writer thread, which puts
/// it back on the queue once committed. No worker waits for a commit.
fn start(cx: &Context, queue: &Arc<Queue>, mut exchange: Exchange) {
    let mut seen = Seen::default();
    let handled = catch_unwind(AssertUnwindSafe(|| {
        routes::handle(cx, &mut exchange, &mut seen)
    }))
    .unwrap_or_else(|_| Err(ApiError::Internal("a handler panicked".into())));
    exchange.principal = seen.principal;
    exchange.headers = seen.headers;
    match handled {
        Ok(Handled::Write(change, pending)) => {
            let queue = queue.clone();
            let settle = move |outcome| {
                queue.settle(Settled {
                    exchange,
                    pending,
                    outcome,
                })
            };
            cx.db.submit(change, Box::new(settle));
        }
        Ok(Handled::Reply(reply)) => response::send(exchange, Ok(reply)),
        Err(error) => response::send(exchange, Err(error)),
    }
}

thread_local! {
    /// Set while a panic is expected and handled where it happens (`catch_quietly`).
    static QUIET: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Panics (a handler's, caught and answered 500) go to the log, not raw to standard error.
fn log_panics() {
    std::panic::set_hook(Box::new(|info| {
        if !QUIET.get() {
            log::error!("panic: {info}");
        }
    }));
}

/// Runs `f`, catching a panic that its caller handles and logs in its own words.
pub fn catch_quietly<T>(f: impl FnOnce() -> T) -> std::thread::Result<T> {
    QUIET.set(true);
    let result = catch_unwind(AssertUnwindSafe(f));
    QUIET.set(false);
    result
}

/// glibc gives threads their own malloc arenas (up to 8 per core), each holding freed
/// memory; with a thread per connection that is most of the resident memory. Two arenas
/// keep RSS flat at no measured cost in speed.
fn limit_malloc_arenas() {
    #[cfg(target_env = "gnu")]
    // SAFETY: mallopt only sets an allocator parameter; called before other threads start.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, MALLOC_ARENAS);
    }
}
