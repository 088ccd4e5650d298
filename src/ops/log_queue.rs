//! The log's hand-off: whole lines wait in one buffer of at most `LOG_QUEUE_BYTES` for the
//! one writer thread, which writes them out in batches through an `Output` that never
//! waits for a reader. A thread that logs only copies its line in: when the buffer is
//! full (the output has not taken what waits, because nobody reads it, the disk is full or
//! journald stalls), the line is dropped and counted (`lines_dropped`, on `/metrics`), and
//! once the output takes lines again one more line says how many were dropped.
//!
//! A batch goes out when `LOG_BUFFER_BYTES` have collected, `LOG_FLUSH_EVERY` after its
//! first line, at once after a warning or an error, and at `flush` (at exit), which waits
//! for it at most `LOG_STOP_WAIT` and counts what is still waiting then as dropped.
//! A `write` per line cost about a tenth of the time of a small GET (the access log has a
//! line per request).

use super::stdio::{Output, PIPE_BUF};
use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Lines waiting for the writer, in bytes, at most: beyond it a line is dropped.
pub const LOG_QUEUE_BYTES: usize = 256 * 1024;
/// Lines waiting that make the writer write at once.
pub const LOG_BUFFER_BYTES: usize = 32 * 1024;
/// Longest time a line waits for its batch (while the output takes lines).
pub const LOG_FLUSH_EVERY: Duration = Duration::from_millis(100);
/// Longest time the exit waits for the log to be written out.
pub const LOG_STOP_WAIT: Duration = Duration::from_secs(1);

/// Makes the line that says how many lines were dropped, in the log's format.
pub type Report = fn(dropped: u64, line: &mut Vec<u8>);

/// The buffer between the threads that log and the writer.
pub struct Queue {
    state: Mutex<State>,
    /// The writer waits on it for lines, for a batch to fill and for room in the output.
    wake: Condvar,
    /// `flush` waits on it for the writer to have written everything.
    written: Condvar,
    /// Set when `flush` gave up: nothing more is written, every line is dropped.
    closed: AtomicBool,
    /// Lines dropped because the output did not take them.
    dropped: AtomicU64,
    out: Output,
    report: Report,
}

#[derive(Default)]
struct State {
    /// Whole lines waiting.
    lines: Vec<u8>,
    /// How many.
    count: u64,
    /// A warning or an error waits: write at once.
    urgent: bool,
    /// Lines dropped and not yet reported.
    gap: u64,
    /// Lines the writer took and has not written yet.
    in_flight: u64,
    /// A `flush` waits.
    flushing: bool,
}

impl Queue {
    pub fn new(out: Output, report: Report) -> Queue {
        Queue {
            state: Mutex::new(State::default()),
            wake: Condvar::new(),
            written: Condvar::new(),
            closed: AtomicBool::new(false),
            dropped: AtomicU64::new(0),
            out,
            report,
        }
    }

    /// Lines dropped so far because the output did not take them.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Relaxed)
    }

    /// The output the writer writes to.
    pub fn output(&self) -> &Output {
        &self.out
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Hands over one whole line (ending in a newline), or drops and counts it when the
    /// buffer has no room for it. Never waits for the output.
    pub fn push(&self, line: &[u8], urgent: bool) {
        let mut st = self.lock();
        if st.lines.len() + line.len() > LOG_QUEUE_BYTES || self.closed.load(Relaxed) {
            st.gap += 1;
            self.dropped.fetch_add(1, Relaxed);
            return;
        }
        let was_empty = st.lines.is_empty();
        st.lines.extend_from_slice(line);
        st.count += 1;
        // Waking the writer is a system call: only when it has something new to do.
        let full =
            st.lines.len() >= LOG_BUFFER_BYTES && st.lines.len() - line.len() < LOG_BUFFER_BYTES;
        if urgent && !st.urgent || was_empty || full {
            st.urgent |= urgent;
            self.wake.notify_one();
        }
    }

    /// Hands the lines waiting to the writer and waits until it has written them, at
    /// most `within`. What is still unwritten then is counted as dropped, and nothing more
    /// is written (the process is about to exit).
    pub fn flush(&self, within: Duration) {
        let deadline = Instant::now() + within;
        let mut st = self.lock();
        st.flushing = true;
        self.wake.notify_one();
        while st.count + st.in_flight > 0 && !self.closed.load(Relaxed) {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                self.closed.store(true, Relaxed);
                let lost = st.count + std::mem::take(&mut st.in_flight);
                self.dropped.fetch_add(lost, Relaxed);
                st.lines.clear();
                st.count = 0;
                break;
            }
            st = self
                .written
                .wait_timeout(st, left)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        st.flushing = false;
    }

    /// Writes the lines waiting now, from the calling thread, without waiting for the
    /// output: what it does not take at once is lost (the panic hook of a build whose
    /// panics abort, just before the process ends).
    pub fn write_waiting_now(&self) {
        let Ok(mut st) = self.state.try_lock() else {
            return;
        };
        let lines = std::mem::take(&mut st.lines);
        st.count = 0;
        let mut rest = &lines[..];
        while !rest.is_empty() {
            match self.out.try_write(&rest[..whole_lines(rest, PIPE_BUF)]) {
                Ok(n) if n > 0 => rest = &rest[n..],
                _ => return,
            }
        }
    }

    /// The writer thread's loop: forever takes a batch, writes it, reports a gap.
    pub fn run_writer(&self) {
        let mut batch = Vec::with_capacity(LOG_BUFFER_BYTES * 2);
        loop {
            let gap = self.take(&mut batch);
            let lost = self.write_out(&batch);
            // A gap is reported once the output has taken everything before it.
            let reported = gap > 0 && lost == 0 && {
                batch.clear();
                (self.report)(gap, &mut batch);
                self.write_out_uncounted(&batch)
            };
            batch.clear();
            if batch.capacity() > LOG_QUEUE_BYTES / 2 {
                batch.shrink_to(LOG_BUFFER_BYTES * 2);
            }
            let mut st = self.lock();
            st.in_flight = 0;
            st.gap += lost + if reported { 0 } else { gap };
            if st.flushing && st.count == 0 {
                self.written.notify_all();
            }
        }
    }

    /// Waits for lines, then until the batch is due, and takes it into `batch`; returns
    /// the gap to report after it.
    fn take(&self, batch: &mut Vec<u8>) -> u64 {
        let mut st = self.lock();
        while st.count == 0 && st.gap == 0 {
            st = self.wake.wait(st).unwrap_or_else(|e| e.into_inner());
        }
        // Only a gap to report: tried again with the next line or LOG_FLUSH_EVERY later
        // (the output may have failed for good).
        let st = self.wait_for_lines(st, |st| st.count == 0);
        // A batch goes when it fills, a warning or a flush comes, or LOG_FLUSH_EVERY after.
        let mut st = self.wait_for_lines(st, |st| {
            st.count > 0 && !st.urgent && !st.flushing && st.lines.len() < LOG_BUFFER_BYTES
        });
        std::mem::swap(batch, &mut st.lines);
        st.in_flight = std::mem::take(&mut st.count);
        st.urgent = false;
        if st.lines.capacity() < LOG_BUFFER_BYTES {
            st.lines.reserve(LOG_BUFFER_BYTES * 2);
        }
        std::mem::take(&mut st.gap)
    }

    /// Waits on `wake` while `waiting` holds, `LOG_FLUSH_EVERY` at most.
    fn wait_for_lines<'a>(
        &self,
        mut st: MutexGuard<'a, State>,
        waiting: impl Fn(&State) -> bool,
    ) -> MutexGuard<'a, State> {
        let due = Instant::now() + LOG_FLUSH_EVERY;
        while waiting(&st) {
            let left = due.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            st = self
                .wake
                .wait_timeout(st, left)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        st
    }

    /// Writes `bytes` (whole lines) out, waiting for room as long as the output takes
    /// nothing; returns how many of its lines were dropped (the output failed, or `flush`
    /// gave up) and counts them.
    fn write_out(&self, bytes: &[u8]) -> u64 {
        let Err(rest) = self.write_all(bytes, true) else {
            return 0;
        };
        let mut st = self.lock();
        // After `flush` gave up, it counted them.
        if self.closed.load(Relaxed) {
            return 0;
        }
        let lost = lines(rest);
        st.in_flight = st.in_flight.saturating_sub(lost);
        self.dropped.fetch_add(lost, Relaxed);
        lost
    }

    /// `done` lines of the batch taken are out: no longer in flight, or, when `flush`
    /// gave up meanwhile and counted them as dropped, not dropped after all.
    fn written_out(&self, done: u64) {
        let mut st = self.lock();
        if self.closed.load(Relaxed) {
            self.dropped.fetch_sub(done, Relaxed);
        } else {
            st.in_flight = st.in_flight.saturating_sub(done);
        }
    }

    /// `write_out` of a line that is no log line of its own (the gap's report): whether
    /// it was written.
    fn write_out_uncounted(&self, bytes: &[u8]) -> bool {
        self.write_all(bytes, false).is_ok()
    }

    /// Writes `bytes`, in pieces of whole lines of at most `PIPE_BUF` where the output
    /// takes those whole (so the panic hook's line never lands inside another); waits
    /// while the output takes nothing. `Err` holds what was not written.
    fn write_all<'a>(&self, mut bytes: &'a [u8], counted: bool) -> Result<(), &'a [u8]> {
        while !bytes.is_empty() {
            if self.closed.load(Relaxed) {
                return Err(bytes);
            }
            let piece = if self.out.takes_whole_writes() {
                &bytes[..whole_lines(bytes, PIPE_BUF)]
            } else {
                bytes
            };
            match self.out.try_write(piece) {
                Ok(n) => {
                    if counted {
                        self.written_out(lines(&bytes[..n]));
                    }
                    bytes = &bytes[n..];
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    self.out.wait_writable(LOG_FLUSH_EVERY);
                }
                Err(_) => return Err(bytes),
            }
        }
        Ok(())
    }
}

/// The lines in `bytes` (its newlines; a line cut short counts as one when its end is
/// there).
fn lines(bytes: &[u8]) -> u64 {
    bytes.iter().filter(|&&b| b == b'\n').count() as u64
}

/// The length of the longest run of whole lines at the start of `bytes` that fits in
/// `max`, or of the first line when it alone is longer.
fn whole_lines(bytes: &[u8], max: usize) -> usize {
    if bytes.len() <= max {
        return bytes.len();
    }
    match bytes[..max].iter().rposition(|&b| b == b'\n') {
        Some(end) => end + 1,
        None => bytes
            .iter()
            .position(|&b| b == b'\n')
            .map_or(bytes.len(), |end| end + 1),
    }
}

#[cfg(test)]
mod tests;
