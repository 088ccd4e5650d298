//! Time as plant-store shows and reads it: seconds since the Unix epoch, UTC, written
//! and parsed as RFC 3339 (proleptic Gregorian civil dates, no leap seconds).

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// A wall clock reading further than this from where the monotonic clock says it should
/// be is a step (an operator's or NTP's correction, a suspend): it is logged once. Event
/// times follow a step back within this and ignore a step of more (docs/api.md, "Events").
pub const STEP: Duration = Duration::from_secs(60);
/// `STEP` in milliseconds.
pub const STEP_MS: i64 = STEP.as_millis() as i64;
/// The earliest time a test clock may read: 0000-01-01T00:00:00Z, in milliseconds since
/// the Unix epoch (RFC 3339 has four-digit years).
pub const EARLIEST_MS: i64 = -62_167_219_200_000;
/// The latest: 9999-12-31T23:59:59.999Z. A running test clock stops here.
pub const LATEST_MS: i64 = 253_402_300_799_999;
/// The most the ticks count (milliseconds, about 73 million years): never reached, since
/// test clocks put them at most `MAX_AHEAD_MS` ahead of the monotonic clock; far below
/// `i64::MAX`, so that a due time counted from them cannot overflow.
pub const MAX_TICKS: i64 = i64::MAX / 4;
/// The most the test clock's forward moves may put the ticks ahead of the monotonic
/// clock between two resets: 100,000 years of 365.2425 days (about twelve test clocks
/// each put ahead from now to 9999). A set or an advance past it is refused
/// (`TooFarAhead`); a reset brings the ticks back to the monotonic clock's.
pub const MAX_AHEAD_MS: i64 = MAX_AHEAD_YEARS * 31_556_952_000;
/// `MAX_AHEAD_MS` in years.
pub const MAX_AHEAD_YEARS: i64 = 100_000;

/// A set or an advance refused: it would put the ticks more than `MAX_AHEAD_MS` ahead.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TooFarAhead;

/// A server's clock: every reading of time that the server shows or stores goes through
/// it (`server::serve::start` makes one per server and hands it down). It keeps its last
/// reading beside the monotonic clock's, to see a step between two readings, and it can
/// be set, frozen and advanced by test control (`/_control/clock`, docs/testing.md).
///
/// Besides the wall clock it counts *ticks*: milliseconds since the server started by
/// the monotonic clock, plus every forward move of the test clock, and standing still
/// while it is frozen. The ticks never go back but at a reset (`reset`, which puts back
/// all that waits on them); what waits on time (webhook due times and leases, rate-limit
/// budgets, the retention's guard) goes by them, so that moving the test clock forward
/// moves what waits, and no move ever makes it wait longer. A forward move counts only
/// past the furthest the test clock has read since it was set (a `set` back and forth
/// moves them once), and never past `MAX_AHEAD_MS` ahead of the monotonic clock.
pub struct Clock {
    start: Instant,
    start_wall_ms: i64,
    /// Event times never go back within a log, whatever the clock did (a server with test
    /// control: its clock is moved at will).
    holds_times: bool,
    state: Mutex<State>,
    /// Whether a test clock is set (`State::test`), or is being set: without one, the
    /// ticks are read with no lock. Raised before a setter reads the monotonic clock, so
    /// that a reader without the lock read it before the setter did (`move_test`).
    testing: AtomicBool,
    /// Ticks less the monotonic milliseconds since the start, while no test clock is set:
    /// what the test clocks set since moved them forward, less the time they stood frozen.
    skew_ms: AtomicI64,
    /// Added to every wall reading: 0, except in a test build (`fault-injection`).
    offset_ms: AtomicI64,
}

struct State {
    /// The last reading of the real wall clock: monotonic, wall.
    last: (Instant, i64),
    /// The test clock, while one is set.
    test: Option<TestTime>,
    /// The furthest the test clocks read since one was set (at a move): a forward move
    /// counts in the ticks only past it. `None` with the real clock.
    furthest_ms: Option<i64>,
}

/// A test clock: it read `wall_ms` and counted `ticks` at `since`, and runs on from
/// there with the monotonic clock unless frozen.
#[derive(Clone, Copy)]
struct TestTime {
    wall_ms: i64,
    ticks: i64,
    since: Instant,
    frozen: bool,
}

/// What test control shows of a clock: its reading now, and whether it stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reading {
    pub now_ms: i64,
    pub frozen: bool,
}

fn system_ms() -> i64 {
    match SystemTime::now().duration_since(UNIX_EPOCH) {
        Ok(d) => d.as_millis() as i64,
        Err(e) => -(e.duration().as_millis() as i64),
    }
}

fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX / 4)
}

impl std::fmt::Debug for Clock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Clock")
            .field("reading", &self.reading())
            .finish_non_exhaustive()
    }
}

impl Default for Clock {
    fn default() -> Clock {
        Clock::new(false)
    }
}

impl Clock {
    /// A clock that reads the system's; `holds_times`: event times never go back (a
    /// server with test control).
    pub fn new(holds_times: bool) -> Clock {
        let (start, wall) = (Instant::now(), system_ms());
        Clock {
            start,
            start_wall_ms: wall,
            holds_times,
            state: Mutex::new(State {
                last: (start, wall),
                test: None,
                furthest_ms: None,
            }),
            testing: AtomicBool::new(false),
            skew_ms: AtomicI64::new(0),
            offset_ms: AtomicI64::new(0),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The ticks at `now` (at most `MAX_TICKS`).
    fn ticks_at(&self, s: &State, now: Instant) -> i64 {
        let reading = match s.test {
            Some(t) if t.frozen => t.ticks,
            Some(t) => t
                .ticks
                .saturating_add(millis(now.saturating_duration_since(t.since))),
            None => self.real_ticks(now),
        };
        reading.min(MAX_TICKS)
    }

    fn real_ticks(&self, now: Instant) -> i64 {
        millis(now.saturating_duration_since(self.start))
            .saturating_add(self.skew_ms.load(Ordering::Acquire))
    }

    /// The ticks now: without a test clock, with no lock; with one, read under the lock
    /// (the monotonic clock too, so that no reading is behind one given before).
    fn ticks(&self) -> i64 {
        if self.testing.load(Ordering::SeqCst) {
            let s = self.state();
            self.ticks_at(&s, Instant::now())
        } else {
            self.real_ticks(Instant::now()).min(MAX_TICKS)
        }
    }

    /// Milliseconds since the Unix epoch, now, by the wall clock (a step of the real
    /// clock is logged), or by the test clock while one is set.
    pub fn unix_now_millis(&self) -> i64 {
        let now = Instant::now();
        let mut s = self.state();
        if let Some(t) = s.test {
            return test_wall(&t, now);
        }
        let wall = system_ms() + self.offset_ms.load(Ordering::Relaxed);
        let expected = s.last.1 + millis(now.saturating_duration_since(s.last.0));
        s.last = (now.max(s.last.0), wall);
        drop(s);
        let stepped = wall - expected;
        if stepped.abs() > STEP_MS {
            // After the reading is kept: the log line's own reading sees no step.
            log::warn!(
                "the wall clock stepped {} by {} s (now {}); event times and the retention go by the monotonic clock where they can (docs/operating.md, \"Time\")",
                if stepped > 0 { "forward" } else { "back" },
                stepped.abs() / 1000,
                utc_millis(wall)
            );
        }
        wall
    }

    /// Seconds since the Unix epoch, now (UTC).
    pub fn unix_now(&self) -> i64 {
        self.unix_now_millis().div_euclid(1000)
    }

    /// The wall clock as the server first read it, advanced by its ticks since:
    /// milliseconds since the epoch that no step of the real clock moves and that never
    /// go back (but that drift from the wall clock by every step since the start).
    pub fn steady_millis(&self) -> i64 {
        self.start_wall_ms.saturating_add(self.ticks())
    }

    /// The ticks since the start (never 0, so that 0 can mean "none"): the monotonic
    /// clock's milliseconds, plus the test clock's forward moves, less its frozen time.
    pub fn monotonic_millis(&self) -> i64 {
        self.ticks().saturating_add(1)
    }

    /// Whether event times never go back within a log (`Clock::new`).
    pub fn holds_times(&self) -> bool {
        self.holds_times
    }

    /// The clock as test control shows it.
    pub fn reading(&self) -> Reading {
        let test = self.state().test;
        match test {
            Some(t) => Reading {
                now_ms: test_wall(&t, Instant::now()),
                frozen: t.frozen,
            },
            None => Reading {
                now_ms: self.unix_now_millis(),
                frozen: false,
            },
        }
    }

    /// Test control: from now on the wall clock reads `now_ms`, and stays there when
    /// `frozen`. A move forward moves the ticks as far (refused past `MAX_AHEAD_MS`).
    pub fn set(&self, now_ms: i64, frozen: bool) -> Result<Reading, TooFarAhead> {
        self.move_test(|_| (now_ms, frozen))
    }

    /// Test control: the clock (the test clock, or the real one, which becomes a test
    /// clock) moves forward by `by_ms`, frozen or running as it was (refused past
    /// `MAX_AHEAD_MS`).
    pub fn advance(&self, by_ms: i64) -> Result<Reading, TooFarAhead> {
        self.move_test(|t| (t.wall_ms.saturating_add(by_ms.max(0)), t.frozen))
    }

    /// Test control: the real clock again (the ticks go on from where they are).
    pub fn clear(&self) {
        let mut s = self.state();
        let now = Instant::now();
        let ticks = self.ticks_at(&s, now);
        self.skew_ms.store(
            ticks.saturating_sub(millis(now.saturating_duration_since(self.start))),
            Ordering::Release,
        );
        self.real_again(&mut s, now);
    }

    /// Test control's reset: the real clock again, and the ticks the monotonic clock's
    /// again (what the test clocks moved them ahead is undone). The one time they go
    /// back: the reset puts back what waits on them (the store's due times and leases,
    /// the rate-limit budgets, the retention's guard: `Commits::forget_ahead`).
    pub fn reset(&self) {
        let mut s = self.state();
        self.skew_ms.store(0, Ordering::Release);
        self.real_again(&mut s, Instant::now());
    }

    /// No test clock from now on.
    fn real_again(&self, s: &mut State, now: Instant) {
        s.test = None;
        s.furthest_ms = None;
        self.testing.store(false, Ordering::SeqCst);
        // The real clock's next reading is compared with this one: no step is seen.
        s.last = (now, system_ms() + self.offset_ms.load(Ordering::Relaxed));
    }

    /// Sets the test clock to what `to` makes of the clock as it is now (`wall_ms` and
    /// `frozen` read at this moment); refused when it would put the ticks more than
    /// `MAX_AHEAD_MS` ahead of the monotonic clock.
    fn move_test(&self, to: impl FnOnce(&TestTime) -> (i64, bool)) -> Result<Reading, TooFarAhead> {
        let mut s = self.state();
        // First: a reader without the lock that still saw no test clock read the
        // monotonic clock before this does, so its ticks are not ahead of these.
        self.testing.store(true, Ordering::SeqCst);
        let now = Instant::now();
        let ticks = self.ticks_at(&s, now);
        let current = match s.test {
            Some(t) => TestTime {
                wall_ms: test_wall(&t, now),
                ticks,
                since: now,
                frozen: t.frozen,
            },
            None => TestTime {
                wall_ms: system_ms() + self.offset_ms.load(Ordering::Relaxed),
                ticks,
                since: now,
                frozen: false,
            },
        };
        let (wall_ms, frozen) = to(&current);
        let wall_ms = wall_ms.clamp(EARLIEST_MS, LATEST_MS);
        // Only past the furthest reading so far: a move back and forth again counts once.
        let furthest = s
            .furthest_ms
            .map_or(current.wall_ms, |f| f.max(current.wall_ms));
        let forward = wall_ms.saturating_sub(furthest).max(0);
        let moved = ticks.saturating_add(forward);
        let real = millis(now.saturating_duration_since(self.start));
        if moved.saturating_sub(real) > MAX_AHEAD_MS {
            if s.test.is_none() {
                self.testing.store(false, Ordering::SeqCst);
            }
            return Err(TooFarAhead);
        }
        s.furthest_ms = Some(furthest.max(wall_ms));
        s.test = Some(TestTime {
            wall_ms,
            ticks: moved.min(MAX_TICKS),
            since: now,
            frozen,
        });
        Ok(Reading {
            now_ms: wall_ms,
            frozen,
        })
    }

    /// Test builds only (`GET /__clock?offset=SECONDS`): sets the wall clock to the
    /// system's plus `SECONDS` (a step).
    #[cfg(feature = "fault-injection")]
    pub fn step_for_test(&self, query: &str) -> Result<(), String> {
        let offset = query
            .strip_prefix("offset=")
            .and_then(|v| v.parse::<i64>().ok());
        let offset = offset.ok_or("/__clock?offset=SECONDS")?;
        self.offset_ms
            .store(offset.saturating_mul(1000), Ordering::Relaxed);
        Ok(())
    }
}

/// A test clock's reading at `now`: a running one stops at `LATEST_MS`.
fn test_wall(t: &TestTime, now: Instant) -> i64 {
    if t.frozen {
        t.wall_ms
    } else {
        t.wall_ms
            .saturating_add(millis(now.saturating_duration_since(t.since)))
            .min(LATEST_MS)
    }
}

/// The system's wall clock, milliseconds since the Unix epoch, read directly: for what
/// no server's clock covers (the command line's `token add`, the log lines' times).
pub fn system_millis() -> i64 {
    system_ms()
}

/// The system's wall clock in seconds since the Unix epoch (`system_millis`).
pub fn system_now() -> i64 {
    system_ms().div_euclid(1000)
}

/// Now by the system's clock, as `YYYY-MM-DDTHH:MM:SS.mmmZ` (log lines).
pub fn utc_millis_now() -> String {
    utc_millis(system_millis())
}

mod text;
pub use text::{
    duration_text, parse_duration, parse_rfc3339, parse_rfc3339_millis, utc, utc_millis,
};

#[cfg(test)]
mod tests;
