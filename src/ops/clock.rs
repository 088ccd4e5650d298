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
/// The most the ticks count (milliseconds, about 73 million years): there they stand.
/// Far below `i64::MAX`, so that a due time counted from them cannot overflow. A server
/// reaches it only through thousands of test clocks each set ahead by thousands of years
/// (docs/testing.md, "The clock").
pub const MAX_TICKS: i64 = i64::MAX / 4;

/// A server's clock: every reading of time that the server shows or stores goes through
/// it (`cli::serve::start` makes one per server and hands it down). It keeps its last
/// reading beside the monotonic clock's, to see a step between two readings, and it can
/// be set, frozen and advanced by test control (`/_control/clock`, docs/testing.md).
///
/// Besides the wall clock it counts *ticks*: milliseconds since the server started by
/// the monotonic clock, plus every forward move of the test clock, and standing still
/// while it is frozen. The ticks never go back; what waits on time (webhook due times
/// and leases, rate-limit budgets, the retention's guard) goes by them, so that moving
/// the test clock forward moves what waits, and no move ever makes it wait longer. A
/// forward move counts only past the furthest the test clock has read since it was set
/// (a `set` back and forth moves them once), and the ticks stand at `MAX_TICKS`.
pub struct Clock {
    start: Instant,
    start_wall_ms: i64,
    /// Event times never go back within a log, whatever the clock did (a server with test
    /// control: its clock is moved at will).
    holds_times: bool,
    state: Mutex<State>,
    /// Whether a test clock is set (`State::test`): without one, the ticks are read with
    /// no lock.
    testing: AtomicBool,
    /// Ticks less the monotonic milliseconds since the start, while no test clock is set:
    /// what the test clocks set since moved them forward, less the time they stood frozen.
    skew_ms: AtomicI64,
    /// The highest ticks any reader was given: a reader without the lock that read the
    /// real ticks just as a test clock was set may be a millisecond ahead of it; every
    /// reading is at least this, so that the ticks never go back.
    last_ticks: AtomicI64,
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
            last_ticks: AtomicI64::new(0),
            offset_ms: AtomicI64::new(0),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The ticks at `now` (not before any reading given out: `seen`).
    fn ticks_at(&self, s: &State, now: Instant) -> i64 {
        let reading = match s.test {
            Some(t) if t.frozen => t.ticks,
            Some(t) => t
                .ticks
                .saturating_add(millis(now.saturating_duration_since(t.since))),
            None => self.real_ticks(now),
        };
        self.seen(reading)
    }

    fn real_ticks(&self, now: Instant) -> i64 {
        millis(now.saturating_duration_since(self.start))
            .saturating_add(self.skew_ms.load(Ordering::Acquire))
    }

    /// `reading`, or the highest reading given out before if that is more; at most
    /// `MAX_TICKS`.
    fn seen(&self, reading: i64) -> i64 {
        let reading = reading.min(MAX_TICKS);
        reading.max(self.last_ticks.fetch_max(reading, Ordering::AcqRel))
    }

    /// The ticks now: without a test clock, with no lock.
    fn ticks(&self) -> i64 {
        let now = Instant::now();
        if self.testing.load(Ordering::Acquire) {
            self.ticks_at(&self.state(), now)
        } else {
            self.seen(self.real_ticks(now))
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
    /// `frozen`. A move forward moves the ticks as far.
    pub fn set(&self, now_ms: i64, frozen: bool) -> Reading {
        self.move_test(|_| (now_ms, frozen))
    }

    /// Test control: the clock (the test clock, or the real one, which becomes a test
    /// clock) moves forward by `by_ms`, frozen or running as it was.
    pub fn advance(&self, by_ms: i64) -> Reading {
        self.move_test(|t| (t.wall_ms.saturating_add(by_ms.max(0)), t.frozen))
    }

    /// Test control: the real clock again (the ticks go on from where they are).
    pub fn clear(&self) {
        let now = Instant::now();
        let mut s = self.state();
        let ticks = self.ticks_at(&s, now);
        self.skew_ms.store(
            ticks.saturating_sub(millis(now.saturating_duration_since(self.start))),
            Ordering::Release,
        );
        s.test = None;
        s.furthest_ms = None;
        self.testing.store(false, Ordering::Release);
        // The real clock's next reading is compared with this one: no step is seen.
        s.last = (now, system_ms() + self.offset_ms.load(Ordering::Relaxed));
    }

    /// Sets the test clock to what `to` makes of the clock as it is now (`wall_ms` and
    /// `frozen` read at this moment).
    fn move_test(&self, to: impl FnOnce(&TestTime) -> (i64, bool)) -> Reading {
        let now = Instant::now();
        let mut s = self.state();
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
        s.furthest_ms = Some(furthest.max(wall_ms));
        let ticks = self.seen(ticks.saturating_add(forward));
        s.test = Some(TestTime {
            wall_ms,
            ticks,
            since: now,
            frozen,
        });
        self.testing.store(true, Ordering::Release);
        Reading {
            now_ms: wall_ms,
            frozen,
        }
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

/// Seconds since the epoch as `YYYY-MM-DDTHH:MM:SSZ` (civil-from-days, proleptic Gregorian).
pub fn utc(secs: i64) -> String {
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

/// Now by the system's clock, as `YYYY-MM-DDTHH:MM:SS.mmmZ` (log lines).
pub fn utc_millis_now() -> String {
    utc_millis(system_millis())
}

/// Milliseconds since the epoch as `YYYY-MM-DDTHH:MM:SS.mmmZ`.
pub fn utc_millis(ms: i64) -> String {
    let whole = utc(ms.div_euclid(1000));
    format!("{}.{:03}Z", &whole[..whole.len() - 1], ms.rem_euclid(1000))
}

/// A duration: a whole number of seconds (`90`), or a whole number and a unit, `s`, `m`,
/// `h` or `d` (`90s`, `15m`, `2h`, `7d`), in seconds. No sign, blank or fraction; `None`
/// when it is not one or does not fit.
pub fn parse_duration(v: &str) -> Option<i64> {
    let (digits, unit) = match v.bytes().last()? {
        b's' => (&v[..v.len() - 1], 1),
        b'm' => (&v[..v.len() - 1], 60),
        b'h' => (&v[..v.len() - 1], 3600),
        b'd' => (&v[..v.len() - 1], 86_400),
        _ => (v, 1),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse::<i64>().ok()?.checked_mul(unit)
}

/// An RFC 3339 time (`2027-01-31T12:00:00Z`, `2027-01-31t12:00:00.5+02:00`) in seconds
/// since the Unix epoch, UTC; a fraction of a second is dropped.
pub fn parse_rfc3339(v: &str) -> Option<i64> {
    let b = v.as_bytes();
    let num = |r: std::ops::Range<usize>| -> Option<i64> {
        let s = v.get(r)?;
        s.bytes()
            .all(|c| c.is_ascii_digit())
            .then(|| s.parse().ok())?
    };
    if b.len() < 20 || b[4] != b'-' || b[7] != b'-' || !matches!(b[10], b'T' | b't') {
        return None;
    }
    if b[13] != b':' || b[16] != b':' {
        return None;
    }
    let (year, month, day) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (hour, minute, second) = (num(11..13)?, num(14..16)?, num(17..19)?);
    let mut rest = &v[19..];
    if let Some(fraction) = rest.strip_prefix('.') {
        let digits = fraction.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return None;
        }
        rest = &fraction[digits..];
    }
    let offset = match rest.as_bytes() {
        [b'Z' | b'z'] => 0,
        [sign @ (b'+' | b'-'), h1, h2, b':', m1, m2] => {
            let digits = [*h1, *h2, *m1, *m2];
            if !digits.iter().all(u8::is_ascii_digit) {
                return None;
            }
            let d = |i: usize| i64::from(digits[i] - b'0');
            let (h, m) = (d(0) * 10 + d(1), d(2) * 10 + d(3));
            if h > 23 || m > 59 {
                return None;
            }
            if *sign == b'-' {
                -(h * 3600 + m * 60)
            } else {
                h * 3600 + m * 60
            }
        }
        _ => return None,
    };
    let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
    let month_days = [
        31,
        if leap { 29 } else { 28 },
        31,
        30,
        31,
        30,
        31,
        31,
        30,
        31,
        30,
        31,
    ];
    if !(1..=12).contains(&month)
        || day < 1
        || day > month_days[month as usize - 1]
        || hour > 23
        || minute > 59
        || second > 60
    {
        return None;
    }
    // Days from 1970-01-01 (days-from-civil, proleptic Gregorian).
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some(days * 86_400 + hour * 3600 + minute * 60 + second - offset)
}

/// An RFC 3339 time (`parse_rfc3339`) in milliseconds since the Unix epoch: its fraction
/// of a second kept to the millisecond (further digits dropped).
pub fn parse_rfc3339_millis(v: &str) -> Option<i64> {
    let secs = parse_rfc3339(v)?;
    let fraction = v.get(19..).and_then(|r| r.strip_prefix('.')).unwrap_or("");
    let ms = fraction
        .bytes()
        .take_while(u8::is_ascii_digit)
        .chain(std::iter::repeat(b'0'))
        .take(3)
        .fold(0, |ms, d| ms * 10 + i64::from(d - b'0'));
    secs.checked_mul(1000)?.checked_add(ms)
}

#[cfg(test)]
mod tests;
