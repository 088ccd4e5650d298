//! Times written and parsed, and the test clock's moves (`Clock::set`, `advance`,
//! `clear`) and the ticks they move.

use super::*;

#[test]
fn utc_millis_keeps_the_milliseconds() {
    assert_eq!(utc_millis(1_700_000_000_123), "2023-11-14T22:13:20.123Z");
    assert_eq!(utc_millis(-1), "1969-12-31T23:59:59.999Z");
}

#[test]
fn utc_formats_known_instants() {
    assert_eq!(utc(0), "1970-01-01T00:00:00Z");
    assert_eq!(utc(951_782_400), "2000-02-29T00:00:00Z");
    assert_eq!(utc(1_795_367_045), "2026-11-22T17:04:05Z");
    assert!(utc_millis_now().ends_with('Z') && utc_millis_now().len() == 24);
}

#[test]
fn rfc3339_times_parse_to_utc_seconds() {
    assert_eq!(parse_rfc3339("1970-01-01T00:00:00Z"), Some(0));
    assert_eq!(parse_rfc3339("2000-03-01T00:00:00Z"), Some(951_868_800));
    assert_eq!(parse_rfc3339("2027-01-31T12:00:00Z"), Some(1_801_396_800));
    assert_eq!(
        parse_rfc3339("2027-01-31T14:00:00.999+02:00"),
        Some(1_801_396_800)
    );
    assert_eq!(
        parse_rfc3339("2027-01-31t11:30:00-00:30"),
        Some(1_801_396_800)
    );
    for bad in [
        "2027-01-31",
        "2027-01-31 12:00:00Z",
        "2027-02-29T00:00:00Z",
        "2027-13-01T00:00:00Z",
        "2027-01-31T24:00:00Z",
        "2027-01-31T12:00:00",
        "2027-01-31T12:00:00+2:00",
        "2027-01-31T12:00:00.Z",
    ] {
        assert_eq!(parse_rfc3339(bad), None, "{bad:?}");
    }
}

const T2030: i64 = 1_893_456_000_000;

#[test]
fn a_frozen_clock_reads_what_it_was_set_to_until_advanced() {
    let clock = Clock::new(true);
    let set = clock.set(T2030, true).unwrap();
    assert_eq!(
        set,
        Reading {
            now_ms: T2030,
            frozen: true
        }
    );
    std::thread::sleep(Duration::from_millis(20));
    assert_eq!(clock.unix_now_millis(), T2030);
    assert_eq!(clock.unix_now(), T2030 / 1000);
    let advanced = clock.advance(7_200_000).unwrap();
    assert_eq!(
        advanced,
        Reading {
            now_ms: T2030 + 7_200_000,
            frozen: true
        }
    );
    assert_eq!(clock.reading(), advanced);
}

#[test]
fn a_running_test_clock_runs_on_from_what_it_was_set_to() {
    let clock = Clock::new(true);
    clock.set(T2030, false).unwrap();
    std::thread::sleep(Duration::from_millis(20));
    let now = clock.unix_now_millis();
    assert!((T2030 + 20..T2030 + 5_000).contains(&now), "{now}");
    assert!(!clock.reading().frozen);
}

#[test]
fn ticks_follow_forward_moves_stand_while_frozen_and_never_go_back() {
    let clock = Clock::new(true);
    let t0 = clock.monotonic_millis();
    let s0 = clock.steady_millis();
    clock.advance(3_600_000).unwrap();
    assert!(clock.monotonic_millis() >= t0 + 3_600_000);
    assert!(clock.steady_millis() >= s0 + 3_600_000);
    // Set back a year: the ticks do not go back.
    let before = clock.monotonic_millis();
    let furthest = clock.unix_now_millis();
    clock.set(furthest - 365 * 86_400_000, true).unwrap();
    let frozen = clock.monotonic_millis();
    assert!(frozen >= before);
    std::thread::sleep(Duration::from_millis(20));
    assert_eq!(clock.monotonic_millis(), frozen, "frozen: the ticks stand");
    // Forward again: only what passes the furthest reading counts.
    clock.set(furthest - 86_400_000, true).unwrap();
    assert_eq!(clock.monotonic_millis(), frozen, "not past the furthest");
    clock.set(furthest + 86_400_000, true).unwrap();
    assert_eq!(clock.monotonic_millis(), frozen + 86_400_000);
    // The real clock again: the ticks go on from there.
    clock.clear();
    assert!(clock.monotonic_millis() >= frozen + 86_400_000);
    assert!((clock.unix_now_millis() - system_millis()).abs() < 5_000);
}

#[test]
fn two_clocks_are_independent() {
    let (a, b) = (Clock::new(true), Clock::new(false));
    a.set(T2030, true).unwrap();
    assert_eq!(a.unix_now_millis(), T2030);
    assert!((b.unix_now_millis() - system_millis()).abs() < 5_000);
    assert!(!b.reading().frozen);
    assert!(a.holds_times() && !b.holds_times());
}

#[test]
fn rfc3339_times_parse_to_the_millisecond() {
    assert_eq!(parse_rfc3339_millis("2030-01-01T00:00:00Z"), Some(T2030));
    assert_eq!(
        parse_rfc3339_millis("2030-01-01T00:00:00.25Z"),
        Some(T2030 + 250)
    );
    assert_eq!(
        parse_rfc3339_millis("2030-01-01T02:00:00.1239+02:00"),
        Some(T2030 + 123)
    );
    assert_eq!(parse_rfc3339_millis("1969-12-31T23:59:59.5Z"), Some(-500));
    assert_eq!(parse_rfc3339_millis("2030-01-01"), None);
}

#[test]
fn a_running_test_clock_stops_at_the_latest_time() {
    let clock = Clock::new(true);
    let r = clock.set(LATEST_MS - 5, false).unwrap();
    assert!(!r.frozen);
    std::thread::sleep(Duration::from_millis(30));
    assert_eq!(clock.unix_now_millis(), LATEST_MS);
    assert_eq!(clock.reading().now_ms, LATEST_MS);
    assert_eq!(
        utc_millis(clock.unix_now_millis()),
        "9999-12-31T23:59:59.999Z"
    );
    // Set or advanced past it: it reads the latest; before the earliest: the earliest.
    assert_eq!(clock.advance(i64::MAX).unwrap().now_ms, LATEST_MS);
    assert_eq!(clock.set(i64::MIN, true).unwrap().now_ms, EARLIEST_MS);
}

#[test]
fn the_ticks_count_a_move_back_and_forth_once() {
    let clock = Clock::new(true);
    let t0 = clock.monotonic_millis();
    let from = clock.unix_now_millis();
    for _ in 0..100_000 {
        clock.set(EARLIEST_MS, true).unwrap();
        clock.set(LATEST_MS, true).unwrap();
    }
    let moved = clock.monotonic_millis() - t0;
    let span = LATEST_MS - from;
    assert!((span..span + 60_000).contains(&moved), "{moved} {span}");
    assert!(clock.steady_millis() > 0);
}

#[test]
fn test_clocks_move_the_ticks_at_most_max_ahead_and_a_reset_brings_them_back() {
    let clock = Clock::new(true);
    // Each test clock set anew (after a clear) counts its move ahead again, up to the
    // ceiling; the move past it is refused and moves nothing.
    let mut last = clock.monotonic_millis();
    let mut refused = None;
    for n in 0..100 {
        match clock.set(LATEST_MS, false) {
            Ok(_) => {}
            Err(TooFarAhead) => {
                refused = Some(n);
                break;
            }
        }
        clock.clear();
        let now = clock.monotonic_millis();
        assert!(now >= last);
        last = now;
    }
    let per = LATEST_MS - system_millis();
    assert_eq!(refused, Some(MAX_AHEAD_MS / per), "{per}");
    assert!(
        clock.monotonic_millis() - last < 5_000,
        "the refused move moved nothing"
    );
    assert!(!clock.reading().frozen, "and set no test clock");
    assert_eq!(clock.advance(MAX_AHEAD_MS), Err(TooFarAhead));
    // Room left for a due time counted from them.
    assert!(clock.steady_millis().checked_add(i64::MAX / 2).is_some());
    // The ticks run on with the monotonic clock (what waits on them comes due).
    let before = clock.monotonic_millis();
    std::thread::sleep(Duration::from_millis(20));
    assert!(clock.monotonic_millis() >= before + 20);
    // A reset: the real clock, and the ticks the monotonic clock's again.
    clock.reset();
    let real = clock.start.elapsed().as_millis() as i64;
    assert!((clock.monotonic_millis() - 1 - real).abs() < 5_000);
    assert!((clock.unix_now_millis() - system_millis()).abs() < 5_000);
    assert!(
        clock.set(LATEST_MS, true).is_ok(),
        "moves count from there again"
    );
}

#[test]
fn a_reading_without_the_lock_is_never_ahead_of_a_test_clock_set_after_it() {
    let clock = Clock::new(true);
    // A reader without the lock that saw no test clock read the monotonic clock before
    // the setter did: its ticks are not ahead of those the test clock is set to.
    for _ in 0..1000 {
        let before = clock.monotonic_millis();
        let set = clock.unix_now_millis();
        clock.set(set, true).unwrap();
        let next = clock.monotonic_millis();
        assert!(next >= before, "the ticks went back: {before} then {next}");
        clock.clear();
        assert!(clock.monotonic_millis() >= next);
    }
    // And a move ahead counts from there.
    let late = clock.monotonic_millis();
    clock.advance(1_000).unwrap();
    assert!(clock.monotonic_millis() >= late + 1_000);
}
