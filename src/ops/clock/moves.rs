//! The test clock's moves (`Clock::set`, `advance`, `clear`) and the ticks they move.

use super::*;

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
