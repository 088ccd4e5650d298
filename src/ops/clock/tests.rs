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
    let set = clock.set(T2030, true);
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
    assert_eq!(
        clock.millis_at(Instant::now() - Duration::from_secs(5)),
        T2030
    );
    let advanced = clock.advance(7_200_000);
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
    clock.set(T2030, false);
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
    clock.advance(3_600_000);
    assert!(clock.monotonic_millis() >= t0 + 3_600_000);
    assert!(clock.steady_millis() >= s0 + 3_600_000);
    // Set back a year: the ticks do not go back.
    let before = clock.monotonic_millis();
    clock.set(clock.unix_now_millis() - 365 * 86_400_000, true);
    let frozen = clock.monotonic_millis();
    assert!(frozen >= before);
    std::thread::sleep(Duration::from_millis(20));
    assert_eq!(clock.monotonic_millis(), frozen, "frozen: the ticks stand");
    // Forward by set: the ticks move as far.
    clock.set(clock.unix_now_millis() + 86_400_000, true);
    assert_eq!(clock.monotonic_millis(), frozen + 86_400_000);
    // The real clock again: the ticks go on from there.
    clock.clear();
    assert!(clock.monotonic_millis() >= frozen + 86_400_000);
    assert!((clock.unix_now_millis() - system_millis()).abs() < 5_000);
}

#[test]
fn two_clocks_are_independent() {
    let (a, b) = (Clock::new(true), Clock::new(false));
    a.set(T2030, true);
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
