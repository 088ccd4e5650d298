//! Event streams (GET /events as Server-Sent Events): one thread, "events", keeps every
//! open stream. A worker checks the request and writes the answer's head; the stream
//! then holds its connection (as a request in flight), never a worker.
//!
//! The thread waits on the store's board. When a principal's events are announced (or
//! every `RESCAN_EVERY` in any case), it reads the log once for all the streams of that
//! principal that stand at the same place, and appends the events to each stream's
//! buffer; it writes buffers without waiting (a client that does not read keeps at most
//! `STREAM_BUFFER_BYTES`, and the watchdog's delivery rule resets it). A stream ends on
//! shutdown, when its token is revoked or expires (or cannot be looked up for
//! `TOKEN_CHECK_TRIES` checks in a row), when its client goes away, or when the
//! retention removed events it had not sent yet (the client resumes and is told 410), or
//! when the store was restored (test control) after the stream checked its position: a
//! stream carries the store's generation of its check, and a read whose generation
//! changed while it ran is dropped.
//! At most `--max-streams` are open at once: a slot is taken before the head is written.

mod slots;

use crate::api::auth::TokenHash;
use crate::api::events::{self, Contiguous, EventStream, KEEP_ALIVE};
use crate::http::access::AccessLine;
use crate::http::conn::InFlight;
use crate::http::socket;
use crate::ops::metrics::Metrics;
use crate::ops::threads::Threads;
use crate::store::Readers;
use crate::store::feed::{Board, Woken};
use slots::Slots;
pub use slots::{Full, Slot};
use std::collections::{HashMap, HashSet};
use std::io::{self, Write};
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// A comment goes out on a stream that has sent nothing for this long.
pub const KEEP_ALIVE_EVERY: Duration = Duration::from_secs(10);
/// How often the tokens behind open streams are looked up again (a revoked or expired
/// token ends its streams within this and a second).
pub const TOKEN_CHECK_EVERY: Duration = Duration::from_secs(2);
/// Looks at a token that fail in a row (the database does not answer) before its streams
/// end: a revocation is never outlived for long.
const TOKEN_CHECK_TRIES: u32 = 3;
/// Default of `--max-streams`: half the default connection cap. Whatever the flag says,
/// streams take at most half of `--max-connections`, so they always leave connections
/// for requests.
pub const DEFAULT_MAX_STREAMS: usize = 1024;
/// Default of `--max-streams-per-principal`: one principal cannot take every stream.
pub const DEFAULT_MAX_STREAMS_PER_PRINCIPAL: usize = 64;
/// How often the thread looks whether the clients of open streams have gone (a stream
/// whose client closed its connection ends within this and a second).
pub const HANGUP_CHECK_EVERY: Duration = Duration::from_secs(1);
/// Every stream reads its log this often even without an announcement.
pub const RESCAN_EVERY: Duration = Duration::from_secs(5);
/// A stream reads no further events while this much waits for its client.
pub const STREAM_BUFFER_BYTES: usize = 16 * 1024;
/// The shortest time between two passes over the streams: events committed meanwhile go
/// out together, in one write per stream, rather than one write per commit.
const PASS_GAP: Duration = Duration::from_millis(5);
/// Events read per look at a log.
const PAGE_EVENTS: u32 = 256;
/// How often a stream whose client has not taken everything is written to again.
const RETRY_WRITE: Duration = Duration::from_millis(20);
/// The longest the thread sleeps.
const TICK: Duration = Duration::from_secs(1);

struct Hub {
    board: Arc<Board>,
    metrics: Arc<Metrics>,
    readers: Readers,
    /// Streams opened since the thread last looked; `true` once the thread has ended
    /// (a stream handed over later ends at once).
    new: Mutex<(Vec<Stream>, bool)>,
    stopped: AtomicBool,
}

/// A stream as a worker hands it over, its head written.
pub struct Stream {
    /// tiny_http's writer for this answer: held until the stream ends (its drop lets the
    /// connection's writer go).
    pub writer: Box<dyn Write + Send>,
    pub fd: RawFd,
    pub spec: EventStream,
    pub line: AccessLine,
    pub bytes: u64,
    pub slot: Slot,
    /// Test control's `cut_stream`: the stream ends after this many events.
    pub cut_after: Option<u64>,
    /// Declared last: the connection is released after the writer is gone.
    pub flight: InFlight,
}

/// One server's event streams: their slots (at most `max` open, `per_principal` of one
/// principal), and the thread that keeps them once `start`ed.
pub struct Streams {
    slots: Slots,
    metrics: Arc<Metrics>,
    hub: OnceLock<Arc<Hub>>,
}

impl Streams {
    pub fn new(max: usize, per_principal: usize, metrics: Arc<Metrics>) -> Streams {
        Streams {
            slots: Slots::new(max, per_principal),
            metrics,
            hub: OnceLock::new(),
        }
    }

    /// A slot for one more stream of `principal`, if both caps allow it.
    pub fn reserve(&self, principal: &str) -> Result<Slot, Full> {
        self.slots.reserve(principal)
    }

    /// Starts the thread that keeps the streams, on the store's board and readers.
    pub fn start(&self, board: Arc<Board>, readers: Readers, threads: &Threads) -> io::Result<()> {
        let hub = Arc::new(Hub {
            board,
            metrics: self.metrics.clone(),
            readers,
            new: Mutex::new((Vec::new(), false)),
            stopped: AtomicBool::new(false),
        });
        if self.hub.set(hub.clone()).is_err() {
            return Err(io::Error::other("the event streams' thread runs already"));
        }
        threads.spawn("events", 256 * 1024, move || run(&hub))
    }

    /// The server is stopping: every stream ends now, and any opened later at once.
    pub fn stop(&self) {
        if let Some(hub) = self.hub.get() {
            hub.stopped.store(true, Ordering::SeqCst);
            hub.board.kick();
        }
    }

    /// Hands a stream to the thread.
    pub fn open(&self, stream: Stream) {
        // Test builds: a stream held here was checked before a restore that may come now
        // (its request no longer holds test control's barrier).
        #[cfg(feature = "fault-injection")]
        crate::store::fault::hold_stream_check();
        let Some(hub) = self.hub.get() else {
            end(stream, "no event streams' thread");
            return;
        };
        let mut new = hub.new.lock().unwrap_or_else(|e| e.into_inner());
        if new.1 {
            drop(new);
            end(stream, "the server is stopping");
            return;
        }
        hub.metrics.streams_open.add(1);
        hub.board.set_listening(true);
        new.0.push(stream);
        drop(new);
        hub.board.kick();
    }
}

/// An open stream and what waits for its client.
struct Open {
    stream: Stream,
    pending: Vec<u8>,
    sent: usize,
    last_write: Instant,
    /// Its log may hold events it has not read.
    behind: bool,
    /// Why it is to end.
    ended: Option<&'static str>,
    /// Token look-ups that failed in a row.
    unchecked: u32,
}

impl Open {
    fn waiting(&self) -> usize {
        self.pending.len() - self.sent
    }
}

fn run(hub: &Hub) {
    let mut open: Vec<Open> = Vec::new();
    let mut next_check = Instant::now() + TOKEN_CHECK_EVERY;
    let mut next_rescan = Instant::now() + RESCAN_EVERY;
    let mut next_hangup_check = Instant::now() + HANGUP_CHECK_EVERY;
    let mut last_pass = Instant::now();
    loop {
        if let Some(rest) = PASS_GAP.checked_sub(last_pass.elapsed()) {
            std::thread::sleep(rest);
        }
        // A stream behind its log with room is read again at the next pass; one whose
        // client has not taken everything is written again soon.
        let timeout = if open
            .iter()
            .any(|o| o.ended.is_none() && o.behind && room(o))
        {
            Duration::ZERO
        } else if open.iter().any(|o| o.waiting() > 0) {
            RETRY_WRITE
        } else {
            // Up to the next timer at the latest: a wait that ended just before a timer
            // must not let it slip by a whole tick (that made the keep-alives of a
            // half-closed client 2 s apart).
            let next = next_check.min(next_rescan).min(next_hangup_check);
            TICK.min(next.saturating_duration_since(Instant::now()))
        };
        let stopped = hub.stopped.load(Ordering::SeqCst);
        let woken = if stopped {
            Woken::default()
        } else {
            hub.board.wait(timeout)
        };
        let now = Instant::now();
        last_pass = now;
        let new = {
            let mut new = hub.new.lock().unwrap_or_else(|e| e.into_inner());
            // Once stopping, nothing more is taken in: `open` ends it at once.
            new.1 = stopped;
            std::mem::take(&mut new.0)
        };
        open.extend(new.into_iter().map(|stream| Open {
            stream,
            pending: Vec::new(),
            sent: 0,
            last_write: now,
            behind: true,
            ended: None,
            unchecked: 0,
        }));
        if stopped {
            // Every stream ends now, before any read that could wait on the database,
            // and the thread with them.
            for o in open.drain(..) {
                hub.metrics.streams_open.add(-1);
                end(o.stream, "the server is stopping");
            }
            hub.board.set_listening(false);
            return;
        }
        // A stream checked against another store than the current one (a restore came
        // between its check and now, or is under way) ends.
        let generation = hub.board.replacements();
        for o in &mut open {
            if o.stream.spec.generation != generation || generation % 2 == 1 {
                o.ended = Some("the store was restored");
            }
        }
        // Announcements wanted from before the reads below on, so none falls between.
        hub.board.set_listening(!open.is_empty());
        let rescan = now >= next_rescan;
        if rescan {
            next_rescan = following(next_rescan, now, RESCAN_EVERY);
        }
        let named: HashSet<&str> = woken.principals.iter().map(String::as_str).collect();
        for o in &mut open {
            if rescan || woken.all || named.contains(o.stream.spec.principal.as_str()) {
                o.behind = true;
            }
        }
        if now >= next_check {
            next_check = following(next_check, now, TOKEN_CHECK_EVERY);
            check_tokens(hub, &mut open);
        }
        if now >= next_hangup_check {
            next_hangup_check = following(next_hangup_check, now, HANGUP_CHECK_EVERY);
            for o in &mut open {
                match socket::peer(o.stream.fd) {
                    socket::Peer::Reset => o.ended = Some("its client went away"),
                    // Closed, or only its sending side (it may still read): writes tell
                    // them apart, as a closed client answers the first with a reset and
                    // the next one fails. A half-closed client gets a keep-alive a look.
                    socket::Peer::Ended if o.waiting() == 0 => {
                        o.pending.extend_from_slice(KEEP_ALIVE);
                    }
                    socket::Peer::Ended | socket::Peer::Open => {}
                }
            }
        }
        let unix_now = hub.readers.clock().unix_now();
        for o in &mut open {
            if o.stream.spec.expires_at.is_some_and(|t| t <= unix_now) {
                o.ended = Some("its token expired");
            }
        }
        read(hub, &mut open, generation);
        for o in &mut open {
            if o.ended.is_none() && o.waiting() == 0 && now >= o.last_write + KEEP_ALIVE_EVERY {
                o.pending.extend_from_slice(KEEP_ALIVE);
            }
            flush(o);
            // Test control's `cut_stream`: once its events are written, it ends.
            if o.stream.cut_after == Some(0) && o.waiting() == 0 && o.ended.is_none() {
                o.ended = Some("a fault of test control cut it");
            }
        }
        let mut i = 0;
        while i < open.len() {
            match open[i].ended {
                Some(why) => {
                    let o = open.swap_remove(i);
                    hub.metrics.streams_open.add(-1);
                    end(o.stream, why);
                }
                None => i += 1,
            }
        }
    }
}

/// A timer's next time, `every` after the one just reached (`due`, at or before `now`),
/// so that its period holds however late each pass comes; never at or before `now`.
fn following(due: Instant, now: Instant, every: Duration) -> Instant {
    let next = due + every;
    if next > now { next } else { now + every }
}

/// Reads the logs of the streams that are behind: once per principal and place, for
/// every stream standing there with room in its buffer. A read that a restore may have
/// met (the store's generation is no longer `generation`) is dropped, and its streams end.
fn read(hub: &Hub, open: &mut [Open], generation: u64) {
    let mut done = vec![false; open.len()];
    for k in 0..open.len() {
        if done[k] || !open[k].behind || open[k].ended.is_some() || !room(&open[k]) {
            continue;
        }
        let (principal, after) = (
            open[k].stream.spec.principal.clone(),
            open[k].stream.spec.after,
        );
        let group: Vec<usize> = (k..open.len())
            .filter(|&j| {
                !done[j]
                    && open[j].behind
                    && open[j].ended.is_none()
                    && room(&open[j])
                    && open[j].stream.spec.after == after
                    && open[j].stream.spec.principal == principal
            })
            .collect();
        let mut frames = Vec::new();
        // Per event: its seq, where its frame ends, its commit time.
        let mut ends: Vec<(i64, usize, i64)> = Vec::new();
        let mut contiguous = Contiguous::after(after);
        let seen = hub
            .readers
            .events_page(&principal, after, PAGE_EVENTS, |row| {
                events::write_sse(row, &mut frames);
                contiguous.see(row.seq);
                ends.push((row.seq, frames.len(), row.at_ms));
            });
        if !hub.board.same_store(generation) {
            for j in group {
                done[j] = true;
                open[j].ended = Some("the store was restored");
            }
            continue;
        }
        let seen = match seen {
            Ok(seen) => seen,
            Err(e) => {
                log::warn!("an event stream could not read its log: {e}");
                // Read again at the next announcement or rescan, not at once.
                for j in group {
                    done[j] = true;
                    open[j].behind = false;
                }
                continue;
            }
        };
        // Seqs have no gap: a gap means the retention removed events this stream had
        // not sent.
        let mut delivered = 0;
        for j in group {
            done[j] = true;
            let o = &mut open[j];
            if !contiguous.whole {
                o.ended = Some("the retention removed events it had not sent");
                continue;
            }
            let mut start = 0;
            let mut taken = 0;
            for &(seq, end, _) in &ends {
                if o.waiting() >= STREAM_BUFFER_BYTES || o.stream.cut_after == Some(0) {
                    break;
                }
                o.pending.extend_from_slice(&frames[start..end]);
                o.stream.spec.after = seq;
                start = end;
                taken += 1;
                if let Some(left) = &mut o.stream.cut_after {
                    *left -= 1;
                }
            }
            delivered = delivered.max(taken);
            o.behind = (taken < ends.len() || seen == PAGE_EVENTS) && o.stream.cut_after != Some(0);
        }
        // The lag of each event that went to a stream, once.
        let now_ms = hub.readers.clock().unix_now_millis();
        for &(_, _, at_ms) in &ends[..delivered] {
            hub.metrics
                .event_lag
                .observe(now_ms.saturating_sub(at_ms).max(0) as u64 * 1000);
        }
    }
}

/// Whether a stream may take more events now.
fn room(o: &Open) -> bool {
    o.waiting() < STREAM_BUFFER_BYTES / 4
}

/// Writes what the socket takes now.
fn flush(o: &mut Open) {
    while o.ended.is_none() && o.waiting() > 0 {
        match socket::send_now(o.stream.fd, &o.pending[o.sent..]) {
            Ok(0) => break,
            Ok(n) => {
                o.sent += n;
                o.stream.bytes += n as u64;
                o.last_write = Instant::now();
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
            Err(_) => o.ended = Some("its client went away"),
        }
    }
    if o.waiting() == 0 {
        o.sent = 0;
        o.pending.clear();
        if o.pending.capacity() > STREAM_BUFFER_BYTES / 4 {
            o.pending = Vec::new();
        }
    }
}

/// Ends the streams whose token was revoked or no longer names their principal; each
/// token is looked up once. A database that cannot answer ends a stream only after
/// `TOKEN_CHECK_TRIES` looks in a row.
fn check_tokens(hub: &Hub, open: &mut [Open]) {
    let now = hub.readers.clock().unix_now();
    let mut verdicts: HashMap<TokenHash, Option<bool>> = HashMap::new();
    for o in open.iter_mut() {
        let Some(hash) = o.stream.spec.token else {
            continue;
        };
        let verdict = *verdicts.entry(hash).or_insert_with(|| {
            events::still_valid(
                hub.readers.token_owner(&hash),
                &o.stream.spec.principal,
                now,
            )
        });
        match verdict {
            Some(true) => o.unchecked = 0,
            Some(false) => o.ended = Some("its token was revoked"),
            None => {
                o.unchecked += 1;
                if o.unchecked >= TOKEN_CHECK_TRIES {
                    o.ended = Some("its token could not be looked up");
                }
            }
        }
    }
}

/// Ends a stream: the body ends with the connection, whose write side is shut now; the
/// access line is written; the connection is released.
fn end(stream: Stream, why: &str) {
    log::debug!("an event stream ends: {why}");
    socket::shutdown(stream.fd, std::net::Shutdown::Write);
    stream
        .line
        .write(stream.bytes, stream.flight.conn().metrics());
    // In this order: tiny_http's writer, then the connection's hold, then the slot.
    drop(stream.writer);
    drop(stream.flight);
    drop(stream.slot);
}
