//! The board where committed events are announced: the writer thread names the
//! principals of each group it commits (and, on PostgreSQL, the listener those of other
//! instances), and the event streams' thread waits on it. It holds names, never events:
//! whoever wakes reads the log.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::Duration;

/// Principals remembered between two waits; past this the board says "all of them".
const MAX_NAMED: usize = 4096;

#[derive(Default)]
pub struct Board {
    state: Mutex<State>,
    woken: Condvar,
    /// Some stream is open: announcements are wanted (without one, a commit costs one
    /// atomic load).
    listening: AtomicBool,
    /// Where webhook deliveries wait for new events (of any principal).
    pub deliveries: Doorbell,
    /// The store's generation: raised by one as a whole-store replacement (a test-control
    /// restore) starts and again once it has ended, so it is odd while one is under way.
    /// What was read under another generation (a stream's position, a list's pages) is
    /// not the same store's.
    replacements: std::sync::atomic::AtomicU64,
}

/// A wake-up without names: rung after each commit that appended events, while someone
/// waits for it (`wanted`), and at the stop.
#[derive(Default)]
pub struct Doorbell {
    wanted: AtomicBool,
    rung: Mutex<(bool, bool)>,
    woken: Condvar,
}

impl Doorbell {
    /// The waiter says whether it wants rings (without, a commit costs one atomic load).
    pub fn want(&self, on: bool) {
        self.wanted.store(on, Ordering::Relaxed);
    }

    pub fn wanted(&self) -> bool {
        self.wanted.load(Ordering::Relaxed)
    }

    pub fn ring(&self) {
        self.rung.lock().unwrap_or_else(|e| e.into_inner()).0 = true;
        self.woken.notify_one();
    }

    pub fn stop(&self) {
        self.rung.lock().unwrap_or_else(|e| e.into_inner()).1 = true;
        self.woken.notify_all();
    }

    /// Waits up to `timeout` for a ring; false once stopped.
    pub fn wait(&self, timeout: Duration) -> bool {
        let mut s = self.rung.lock().unwrap_or_else(|e| e.into_inner());
        if !s.0 && !s.1 {
            s = self
                .woken
                .wait_timeout(s, timeout)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        s.0 = false;
        !s.1
    }
}

#[derive(Default)]
struct State {
    named: HashSet<String>,
    all: bool,
    kicked: bool,
    stopped: bool,
}

/// What a wait found.
#[derive(Debug, Default)]
pub struct Woken {
    /// Principals with new events.
    pub principals: Vec<String>,
    /// Any principal may have new events (too many to name, or a listener reconnected).
    pub all: bool,
}

impl Board {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether anyone waits for events now.
    pub fn listening(&self) -> bool {
        self.listening.load(Ordering::Relaxed)
    }

    /// The waiter says whether it has streams open.
    pub fn set_listening(&self, on: bool) {
        self.listening.store(on, Ordering::Relaxed);
    }

    /// New events were committed for these principals.
    pub fn announce<'a>(&self, principals: impl IntoIterator<Item = &'a str>) {
        let mut s = self.lock();
        for p in principals {
            if s.all || s.named.contains(p) {
                continue;
            }
            if s.named.len() >= MAX_NAMED {
                s.named.clear();
                s.all = true;
                continue;
            }
            s.named.insert(p.to_owned());
        }
        drop(s);
        self.woken.notify_one();
    }

    /// Any principal may have new events.
    #[cfg_attr(not(feature = "postgres"), allow(dead_code))]
    pub fn announce_all(&self) {
        let mut s = self.lock();
        s.named.clear();
        s.all = true;
        drop(s);
        self.woken.notify_one();
    }

    /// The whole store is about to be replaced: from now on until `replaced`, the
    /// generation is odd.
    pub fn replacing(&self) {
        self.replacements.fetch_add(1, Ordering::SeqCst);
    }

    /// The replacement `replacing` announced has ended (or failed): the generation is even
    /// again, and the waiter wakes, whose streams end.
    pub fn replaced(&self) {
        self.replacements.fetch_add(1, Ordering::SeqCst);
        self.kick();
    }

    /// The store's generation now (see `replacements`).
    pub fn replacements(&self) -> u64 {
        self.replacements.load(Ordering::SeqCst)
    }

    /// Whether what was read at or after generation `since` (taken before the read) is
    /// still the current store's: no replacement started since, nor was under way then.
    pub fn same_store(&self, since: u64) -> bool {
        since.is_multiple_of(2) && self.replacements() == since
    }

    /// Wakes the waiter to look at something else (a new stream).
    pub fn kick(&self) {
        self.lock().kicked = true;
        self.woken.notify_one();
    }

    /// The store is closing: every wait returns at once from now on, and the PostgreSQL
    /// listener ends.
    pub fn stop(&self) {
        self.lock().stopped = true;
        self.woken.notify_all();
        self.deliveries.stop();
    }

    #[cfg_attr(not(feature = "postgres"), allow(dead_code))]
    pub fn stopped(&self) -> bool {
        self.lock().stopped
    }

    /// Waits up to `timeout` for an announcement, a kick or the stop, and takes what was
    /// announced.
    pub fn wait(&self, timeout: Duration) -> Woken {
        let mut s = self.lock();
        if s.named.is_empty() && !s.all && !s.kicked && !s.stopped {
            s = self
                .woken
                .wait_timeout(s, timeout)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        s.kicked = false;
        Woken {
            principals: s.named.drain().collect(),
            all: std::mem::take(&mut s.all),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn announcements_are_taken_once_and_named_once() {
        let board = Board::default();
        board.announce(["a", "b", "a"]);
        let mut woken = board.wait(Duration::ZERO);
        woken.principals.sort();
        assert_eq!(woken.principals, ["a", "b"]);
        assert!(!woken.all);
        assert!(board.wait(Duration::ZERO).principals.is_empty());
    }

    #[test]
    fn too_many_names_become_all() {
        let board = Board::default();
        let names: Vec<String> = (0..MAX_NAMED + 1).map(|i| i.to_string()).collect();
        board.announce(names.iter().map(String::as_str));
        let woken = board.wait(Duration::ZERO);
        assert!(woken.all);
        assert!(woken.principals.is_empty());
    }

    #[test]
    fn a_doorbell_rung_before_the_wait_is_heard_once() {
        let bell = Doorbell::default();
        bell.ring();
        let started = std::time::Instant::now();
        assert!(bell.wait(Duration::from_secs(30)));
        assert!(started.elapsed() < Duration::from_secs(30));
        assert!(bell.wait(Duration::from_millis(10)));
        bell.stop();
        assert!(!bell.wait(Duration::from_secs(30)));
    }

    #[test]
    fn a_stop_ends_every_wait() {
        let board = std::sync::Arc::new(Board::default());
        let b = board.clone();
        let waiter = std::thread::spawn(move || {
            let started = std::time::Instant::now();
            b.wait(Duration::from_secs(30));
            started.elapsed()
        });
        std::thread::sleep(Duration::from_millis(20));
        board.stop();
        assert!(waiter.join().unwrap() < Duration::from_secs(30));
        assert!(board.stopped());
    }
}
