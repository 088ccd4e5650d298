//! The HTTP side: our own listener, tiny_http's connection threads, a dispatcher that
//! hands each request to a fixed pool of workers through a bounded queue (503 when it is
//! full), the access log, and shutdown on SIGTERM/SIGINT.
//!
//! listener → tiny_http (a thread per connection) → dispatcher → `WorkQueue` →
//! N workers → `routes::handle` → `Store`; a write goes on to the writer thread and
//! comes back through the queue, once committed, to be answered by a worker.

use crate::auth;
use crate::config::ServeConfig;
use crate::error::ApiError;
use crate::listing::PlantList;
use crate::queue::{Task, Turn, WorkQueue};
use crate::routes::{self, Context, Handled, Incoming, MAX_BODY_BYTES, Pending, Reply};
use crate::store::{Location, Outcome, Store, StoreResult};
use socket2::{Domain, Socket, Type};
use std::borrow::Cow;
use std::cell::Cell;
use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};
use tiny_http::{Header, Headers, ListenAddr, Request, Response, ServerConfig, StatusCode};

/// Pending connections the kernel holds before refusing new ones.
pub const LISTEN_BACKLOG: i32 = 1024;
/// A write to a client that does not read for this long fails and closes the connection.
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(10);
/// Connection threads tiny_http keeps ready, so a burst of new connections is not stalled.
pub const MIN_CONNECTION_THREADS: usize = 64;
/// Stack of each connection thread (they parse headers, nothing deeper).
pub const CONNECTION_STACK_BYTES: usize = 128 * 1024;
/// Stack of each worker (SQLite runs there).
pub const WORKER_STACK_BYTES: usize = 512 * 1024;
/// Requests with an oversized declared body whose rest is discarded on side threads, so a
/// worker never waits on it; beyond this many the worker discards it itself.
pub const MAX_DISCARDERS: usize = 64;
/// glibc malloc arenas (see `limit_malloc_arenas`).
pub const MALLOC_ARENAS: i32 = 2;
/// tiny_http servers kept after their accept loop died, for their open connections.
pub const MAX_RETIRED_SERVERS: usize = 4;
/// Heartbeats without any word from tiny_http after which its accept loop is taken for dead.
pub const MISSED_BEATS: u32 = 3;
/// How often the dispatcher looks at the stop flag.
const POLL: Duration = Duration::from_millis(100);

/// Runs the service until SIGTERM or SIGINT.
pub fn serve(config: ServeConfig) -> Result<(), String> {
    raise_fd_limit();
    limit_malloc_arenas();
    let store = Store::open(Location::parse(&config.db))
        .map_err(|e| format!("cannot open the database {}: {e}", config.db))?;
    let listener = bind(&config.addr, config.read_timeout)?;
    let addr = listener.local_addr().map_err(|e| e.to_string())?;

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

    let queue: Arc<Queue> = WorkQueue::new(config.queue);
    let mut workers = Vec::with_capacity(config.workers);
    for n in 0..config.workers {
        let cx = Context {
            db: store
                .connect()
                .map_err(|e| format!("cannot open the database: {e}"))?,
            env_token,
        };
        let queue = queue.clone();
        let worker = thread::Builder::new()
            .name(format!("worker-{n}"))
            .stack_size(WORKER_STACK_BYTES)
            .spawn(move || run_worker(&cx, &queue))
            .map_err(|e| format!("cannot start a worker thread: {e}"))?;
        workers.push(worker);
    }
    let beat = config.read_timeout / 4;
    let heartbeat = start_heartbeat(addr, beat, stop.clone());

    println!("listening on http://{addr}");
    io::stdout().flush().map_err(|e| e.to_string())?;
    log::info!(
        "serving {} with {} workers, queue {}, database {}",
        addr,
        config.workers,
        config.queue,
        config.db
    );

    dispatch(&listener, addr, beat, &queue, &stop);

    // Stopping: no new connections; what was received is answered.
    log::info!(
        "stopping: finishing requests in flight (at most {:?})",
        config.drain_timeout
    );
    queue.close();
    let deadline = Instant::now() + config.drain_timeout;
    while workers.iter().any(|w| !w.is_finished()) && Instant::now() < deadline {
        thread::sleep(Duration::from_millis(10));
    }
    let _ = heartbeat.join();
    if workers.iter().all(JoinHandle::is_finished) {
        store.close();
    } else {
        log::warn!(
            "drain timeout passed with requests still in flight; exiting without the final checkpoint"
        );
    }
    log::info!("stopped");
    Ok(())
}

/// The listener we own: TCP_NODELAY (tiny_http writes through a 1 KiB buffer and would
/// otherwise stall on Nagle), read and write timeouts that accepted sockets inherit. The
/// read timeout closes a connection that sends nothing for that long, idle or mid-request;
/// it bounds each read, so a client that trickles a byte at a time is not cut off by it.
fn bind(addr: &str, read_timeout: Duration) -> Result<TcpListener, String> {
    let addr: SocketAddr = addr
        .to_socket_addrs()
        .map_err(|e| format!("bad --addr `{addr}`: {e}"))?
        .next()
        .ok_or(format!("--addr `{addr}` names no address"))?;
    let fail = |e: io::Error| format!("cannot listen on {addr}: {e}");
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, None).map_err(fail)?;
    socket.set_reuse_address(true).map_err(fail)?;
    socket.bind(&addr.into()).map_err(fail)?;
    socket.listen(LISTEN_BACKLOG).map_err(fail)?;
    socket.set_tcp_nodelay(true).map_err(fail)?;
    socket
        .set_write_timeout(Some(WRITE_TIMEOUT))
        .map_err(fail)?;
    // Also times out accept(): the heartbeat connects often enough that it never does.
    socket.set_read_timeout(Some(read_timeout)).map_err(fail)?;
    Ok(socket.into())
}

/// Connects to the server every `every` (a quarter of the read timeout), so tiny_http's
/// accept(), which inherits the listener's read timeout, never times out.
fn start_heartbeat(addr: SocketAddr, every: Duration, stop: Arc<AtomicBool>) -> JoinHandle<()> {
    let target = match addr {
        SocketAddr::V4(a) if a.ip().is_unspecified() => {
            SocketAddr::from(([127, 0, 0, 1], a.port()))
        }
        SocketAddr::V6(a) if a.ip().is_unspecified() => {
            SocketAddr::from(([0u16, 0, 0, 0, 0, 0, 0, 1], a.port()))
        }
        a => a,
    };
    thread::Builder::new()
        .name("heartbeat".into())
        .stack_size(CONNECTION_STACK_BYTES)
        .spawn(move || {
            let mut last: Option<Instant> = None;
            while !stop.load(Ordering::Relaxed) {
                if last.is_none_or(|t| t.elapsed() >= every) {
                    let _ = TcpStream::connect_timeout(&target, every);
                    last = Some(Instant::now());
                }
                thread::sleep(POLL);
            }
        })
        .expect("cannot start the heartbeat thread")
}

/// Starts tiny_http on a clone of the listener.
fn http_server(listener: &TcpListener, addr: SocketAddr) -> io::Result<tiny_http::Server> {
    // tiny_http spawns its connection threads with the default stack size.
    let config = ServerConfig::new_http(addr)?.set_min_threads(MIN_CONNECTION_THREADS);
    tiny_http::Server::from_listener(listener.try_clone()?, ListenAddr::IP(addr), config)
        .map_err(io::Error::other)
}

/// Moves requests from tiny_http to the workers until the stop flag is set. When the
/// queue is full the request is answered 503 at once. If tiny_http's accept loop dies
/// (it stops on an accept error, and its thread panics when EMFILE hits just after an
/// accept), a new one is started on the listener; the old one is kept (at most
/// `MAX_RETIRED_SERVERS`) so requests on its open connections are still answered. A loop
/// that died silently is noticed because the heartbeat, every `beat`, makes tiny_http
/// report something: nothing for `MISSED_BEATS` beats means it is gone.
fn dispatch(
    listener: &TcpListener,
    addr: SocketAddr,
    beat: Duration,
    queue: &Queue,
    stop: &AtomicBool,
) {
    let mut server: Option<tiny_http::Server> = None;
    let mut retired: VecDeque<tiny_http::Server> = VecDeque::new();
    let mut last_heard = Instant::now();
    while !stop.load(Ordering::Relaxed) {
        for old in &retired {
            while let Ok(Some(request)) = old.try_recv() {
                hand_over(queue, request, ApiError::Overloaded);
            }
        }
        let Some(http) = &server else {
            match http_server(listener, addr) {
                Ok(http) => {
                    server = Some(http);
                    last_heard = Instant::now();
                }
                Err(e) => {
                    log::error!("cannot start the HTTP server: {e}; retrying");
                    thread::sleep(POLL);
                }
            }
            continue;
        };
        let died = match http.recv_timeout(POLL) {
            Ok(Ok(Some(request))) => {
                last_heard = Instant::now();
                hand_over(queue, request, ApiError::Overloaded);
                None
            }
            Ok(Ok(None)) if last_heard.elapsed() > beat * MISSED_BEATS => {
                Some(format!("nothing heard for {:?}", last_heard.elapsed()))
            }
            Ok(Ok(None)) => None,
            // A connection that broke off or sent something unparsable (the heartbeat's
            // among them); tiny_http has answered it already.
            Ok(Err(e)) => {
                last_heard = Instant::now();
                log::debug!("connection error: {e}");
                None
            }
            Err(e) => Some(e.to_string()),
        };
        if let Some(why) = died {
            log::error!("the accept loop stopped ({why}); starting a new one");
            retired.extend(server.take());
            if retired.len() > MAX_RETIRED_SERVERS {
                retired.pop_front();
            }
        }
    }
    // New connections are refused from here on; requests tiny_http has already read are
    // still handed to the workers.
    let _ = socket2::SockRef::from(listener).shutdown(std::net::Shutdown::Read);
    for http in server.iter().chain(&retired) {
        while let Ok(Ok(Some(request))) = http.recv_timeout(Duration::from_millis(50)) {
            hand_over(queue, request, ApiError::ShuttingDown);
        }
    }
}

/// Queues a request for the workers, or answers it with `refusal` when the queue is full.
fn hand_over(queue: &Queue, request: Request, refusal: ApiError) {
    if let Err(r) = queue.offer(request.remote_addr().copied(), request) {
        finish(r, Err(refusal), &Exchange::start());
    }
}

/// The workers' queue: requests by connection, and committed writes to be answered.
type Queue = WorkQueue<SocketAddr, Request, Settled>;
/// A request's hold on its connection (see `queue.rs`).
type ConnectionTurn = Turn<SocketAddr, Request, Settled>;

/// A write whose change the writer thread has committed (or failed to).
struct Settled {
    request: Request,
    exchange: Exchange,
    pending: Pending,
    outcome: StoreResult<Outcome>,
}

fn run_worker(cx: &Context, queue: &Arc<Queue>) {
    while let Some(task) = queue.take() {
        // A panic while handling answers 500 (in `start`); one while sending is caught
        // here so the worker lives on.
        let _ = catch_unwind(AssertUnwindSafe(|| match task {
            Task::Request(turn, request) => start(cx, turn, request),
            // The turn goes (the connection's next request may start) once this is sent.
            Task::Settled(_turn, s) => {
                finish(s.request, routes::settle(s.pending, s.outcome), &s.exchange)
            }
        }));
    }
}

/// Handles a request: answers it, or hands its change to the writer thread, which puts
/// it back on the queue once committed. No worker waits for a commit.
fn start(cx: &Context, turn: ConnectionTurn, mut request: Request) {
    let mut exchange = Exchange::start();
    let handled = catch_unwind(AssertUnwindSafe(|| {
        routes::handle(cx, &mut request, &mut exchange.principal)
    }))
    .unwrap_or_else(|_| Err(ApiError::Internal("a handler panicked".into())));
    match handled {
        Ok(Handled::Write(change, pending)) => {
            let settle = move |outcome| {
                turn.settle(Settled {
                    request,
                    exchange,
                    pending,
                    outcome,
                })
            };
            cx.db.submit(change, Box::new(settle));
        }
        Ok(Handled::Reply(reply)) => finish(request, Ok(reply), &exchange),
        Err(error) => finish(request, Err(error), &exchange),
    }
}

/// What the access log line needs besides the response.
struct Exchange {
    started: Instant,
    principal: Option<String>,
}

impl Exchange {
    fn start() -> Exchange {
        Exchange {
            started: Instant::now(),
            principal: None,
        }
    }
}

/// Sends the reply (or the error: the one place an `ApiError` becomes a response) and
/// writes the access log line.
fn finish(request: Request, reply: Result<Reply<'_>, ApiError>, exchange: &Exchange) {
    let method = request.method().as_str().to_owned();
    let url = loggable_url(request.url());
    let (status, extra, body) = match reply {
        Ok(Reply::Json(body)) => (200, Vec::new(), Body::Fixed(body.into())),
        Ok(Reply::Static(text)) => (200, Vec::new(), Body::Fixed(text.as_bytes().into())),
        Ok(Reply::NoContent) => (204, Vec::new(), Body::Fixed(Cow::Borrowed(&[]))),
        Ok(Reply::List(list)) if list.is_complete() => {
            (200, Vec::new(), Body::Fixed(list.into_buffer().into()))
        }
        Ok(Reply::List(list)) => (200, Vec::new(), Body::Stream(list)),
        Err(error) => {
            if let Some(cause) = error.cause() {
                log::error!("{method} {url}: {cause}");
            }
            (
                error.status(),
                error.headers(),
                Body::Fixed(error.body().into_bytes().into()),
            )
        }
    };
    let mut headers = Headers::with_capacity(1 + extra.len());
    if status != 204 {
        headers.push(header("Content-Type", "application/json"));
    }
    for (name, value) in extra {
        headers.push(header(name, value));
    }
    let (bytes, sent) = match body {
        Body::Fixed(data) => (
            data.len() as u64,
            send_fixed(request, status, headers, data),
        ),
        Body::Stream(list) => {
            let count = Cell::new(0);
            let counting = Counting {
                inner: list,
                count: &count,
            };
            let response = Response::new(StatusCode(status), headers, counting, None, None);
            let sent = request.respond(response);
            (count.get(), sent)
        }
    };
    if let Err(e) = sent {
        log::debug!("{method} {url}: response not fully sent: {e}");
    }
    log::info!(
        target: "access",
        "{method} {url} {status} {bytes} {}us {}",
        exchange.started.elapsed().as_micros(),
        exchange.principal.as_deref().unwrap_or("-")
    );
}

enum Body<'a> {
    /// In memory; borrowed from the reply where it can be (a list page, a static text).
    Fixed(Cow<'a, [u8]>),
    Stream(PlantList<'a>),
}

/// Sends a response whose body is in memory. Dropping a request whose declared body was
/// not read makes tiny_http read and discard the rest of it: for a body over the limit
/// that is done on a side thread (at most `MAX_DISCARDERS`), so no worker waits on it.
fn send_fixed(request: Request, status: u16, headers: Headers, data: Cow<[u8]>) -> io::Result<()> {
    static DISCARDERS: AtomicUsize = AtomicUsize::new(0);
    let len = Some(data.len());
    let oversized = request.body_length().is_some_and(|n| n > MAX_BODY_BYTES);
    if oversized && DISCARDERS.fetch_add(1, Ordering::Relaxed) < MAX_DISCARDERS {
        let body = io::Cursor::new(data.into_owned());
        let response = Response::new(StatusCode(status), headers, body, len, None);
        let discard = move || {
            let _ = request.respond(response);
            DISCARDERS.fetch_sub(1, Ordering::Relaxed);
        };
        return match thread::Builder::new()
            .stack_size(CONNECTION_STACK_BYTES)
            .spawn(discard)
        {
            Ok(_) => Ok(()),
            Err(e) => {
                DISCARDERS.fetch_sub(1, Ordering::Relaxed);
                Err(e)
            }
        };
    }
    if oversized {
        DISCARDERS.fetch_sub(1, Ordering::Relaxed);
    }
    let response = Response::new(StatusCode(status), headers, &data[..], len, None);
    request.respond(response)
}

fn header(name: &str, value: &str) -> Header {
    Header::from_bytes(name, value).expect("constant header is valid")
}

/// A reader that counts the bytes read through it, for the access log.
struct Counting<'c, R> {
    inner: R,
    count: &'c Cell<u64>,
}

impl<R: Read> Read for Counting<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.count.set(self.count.get() + n as u64);
        Ok(n)
    }
}

/// The URL as logged: the path (at most 200 characters, escaped) and the names of the
/// query parameters, never their values.
fn loggable_url(url: &str) -> String {
    let (path, query) = url.split_once('?').unwrap_or((url, ""));
    let mut out: String = path
        .chars()
        .take(200)
        .flat_map(char::escape_debug)
        .collect();
    for (i, pair) in query.split('&').filter(|p| !p.is_empty()).enumerate() {
        out.push(if i == 0 { '?' } else { '&' });
        let name = pair.split_once('=').map_or(pair, |p| p.0);
        out.extend(name.chars().take(50).flat_map(char::escape_debug));
        out.push_str("=…");
    }
    out
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

/// Lets the process hold as many connections as the hard limit allows (each uses 2 fds).
fn raise_fd_limit() {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit only read or write the struct passed to them.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) == 0 && lim.rlim_cur < lim.rlim_max {
            lim.rlim_cur = lim.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
        }
    }
}

impl Incoming for Request {
    fn method(&self) -> &str {
        Request::method(self).as_str()
    }
    fn url(&self) -> &str {
        Request::url(self)
    }
    fn header(&self, name: &str) -> Option<&str> {
        self.headers().get(name).map(|v| v.as_str())
    }
    fn body_length(&self) -> Option<usize> {
        Request::body_length(self)
    }
    fn body(&mut self) -> &mut dyn Read {
        self.as_reader()
    }
}

#[cfg(test)]
mod tests {
    use super::loggable_url;

    #[test]
    fn logged_urls_keep_no_query_values() {
        assert_eq!(
            loggable_url("/plants?limit=5&token=secret"),
            "/plants?limit=…&token=…"
        );
        assert_eq!(loggable_url("/plants/7"), "/plants/7");
        assert_eq!(loggable_url("/a\nb"), "/a\\nb");
    }
}
