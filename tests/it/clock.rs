//! Time that steps (docs/design.md, "Time"): the server's wall clock is stepped
//! through the test-only `/__clock?offset=SECONDS` (the `fault-injection` feature). Event
//! times follow the wall clock but not a reading that stepped ahead; the retention never
//! removes what this process committed less than the retention ago by its monotonic
//! clock; a step is logged. And the retention around held webhook endpoints: what is
//! removed, and the hold's bound (`--webhook-hold`).

use crate::support::*;
use crate::webhooks::{ENDPOINT_SEEN, add_webhook, create, endpoints, row};
use std::time::{Duration, Instant};

const DAY: i64 = 86_400;

/// Steps the server's wall clock to `offset` seconds from the system's.
#[cfg(feature = "fault-injection")]
fn step_to(s: &TestServer, offset: i64) {
    let r = s.get(&format!("/__clock?offset={offset}"));
    assert_eq!(r.status, 200, "{}", r.text());
}

/// `YYYY-MM-DDTHH:MM:SS.mmmZ` in seconds since the epoch.
pub(crate) fn unix_of(ts: &str) -> i64 {
    let n = |r: std::ops::Range<usize>| ts[r].parse::<i64>().unwrap();
    let (y, m, d) = (n(0..4), n(5..7), n(8..10));
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * ((m + 9) % 12) + 2) / 5 + d - 1;
    let days = era * 146_097 + yoe * 365 + yoe / 4 - yoe / 100 + doy - 719_468;
    days * DAY + n(11..13) * 3600 + n(14..16) * 60 + n(17..19)
}

#[cfg(feature = "fault-injection")]
fn real_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

/// The events of the test token's log after `after`, as JSON (200 asserted).
#[track_caller]
fn events_after(s: &TestServer, after: i64) -> Vec<serde_json::Value> {
    let r = events_as(s, TOKEN, &format!("?after={after}"));
    assert_eq!(r.status, 200, "{}", r.text());
    r.json().as_array().unwrap().clone()
}

#[cfg(feature = "fault-injection")]
#[test]
fn after_a_year_ahead_and_back_later_events_take_the_real_time_and_the_sweep_removes_them_all() {
    let s = Launch::memory().arg("--event-retention 3s").start();
    step_to(&s, 365 * DAY);
    for id in 1..=3 {
        create(&s, TOKEN, id);
    }
    step_to(&s, 0);
    for id in 4..=5 {
        create(&s, TOKEN, id);
    }
    s.log_when(|l| {
        l.contains("the wall clock stepped forward by 3153") && l.contains("stepped back by 3153")
    });
    let log = events_after(&s, 0);
    assert_eq!(log.len(), 5);
    let times: Vec<i64> = log
        .iter()
        .map(|e| unix_of(e["timestamp"].as_str().unwrap()))
        .collect();
    for t in &times[..3] {
        assert!((t - real_now() - 365 * DAY).abs() < 60, "{log:?}");
    }
    for t in &times[3..] {
        assert!(
            (t - real_now()).abs() < 60,
            "a later event is stamped with the real time: {log:?}"
        );
    }
    // The retention passes for events 4 and 5; the ones stamped a year ahead, committed
    // before them, go with them.
    eventually(Duration::from_secs(20), || {
        events_as(&s, TOKEN, "?after=0").status == 410
    });
    assert_eq!(events_after(&s, 5), Vec::<serde_json::Value>::new());
    create(&s, TOKEN, 6);
    assert_eq!(events_after(&s, 5)[0]["seq"], 6);
}

#[cfg(feature = "fault-injection")]
#[test]
fn a_clock_30_days_behind_then_corrected_sweeps_nothing_committed_seconds_before() {
    let s = Launch::memory().arg("--event-retention 15s").start();
    step_to(&s, -30 * DAY);
    for id in 1..=2 {
        create(&s, TOKEN, id);
    }
    let committed = Instant::now();
    step_to(&s, 0);
    s.log_when(|l| {
        l.contains("the wall clock stepped back by 259") && l.contains("forward by 259")
    });
    let log = events_after(&s, 0);
    for e in &log {
        let t = unix_of(e["timestamp"].as_str().unwrap());
        assert!((t - real_now() + 30 * DAY).abs() < 60, "{log:?}");
    }
    // Sweeps run every 2 s: none removes them while they are younger than the retention
    // by the monotonic clock.
    while committed.elapsed() < Duration::from_secs(6) {
        assert_eq!(events_after(&s, 0).len(), 2, "no 410 for a consumer");
        std::thread::sleep(Duration::from_millis(200));
    }
    // Once the retention has passed, they go.
    eventually(Duration::from_secs(30), || {
        events_as(&s, TOKEN, "?after=0").status == 410
    });
    assert!(committed.elapsed() >= Duration::from_secs(15));
}

/// On SQLite a retry's due time is taken by the steady clock: a step of the wall clock
/// neither makes a waiting retry due at once nor puts it off by the step. (PostgreSQL
/// takes them by the database's clock.)
#[cfg(feature = "fault-injection")]
#[test]
fn a_step_of_the_wall_clock_neither_fires_a_waiting_retry_nor_delays_it() {
    if without(Feature::Webhooks) {
        return;
    }
    if sqlite_only("due times are the database's clock on PostgreSQL") {
        return;
    }
    let dir = TempDir::new();
    let db = dir.db();
    let s = Launch::new(&db).arg("--webhook-schedule 4s,1h").start();
    let rx = Receiver::start();
    rx.set_default(Answer::status(500));
    add_webhook(&db, "default", &rx.url());
    eventually(ENDPOINT_SEEN, || endpoints(&s, "active") == 1.0);
    create(&s, TOKEN, 1);
    rx.wait_for(1, Duration::from_secs(5));
    // A year back: the retry, due 4 s after the failure, still comes then.
    step_to(&s, -365 * DAY);
    rx.wait_for(2, Duration::from_secs(10));
    // A year ahead: the next retry, due in an hour, does not come at once.
    step_to(&s, 365 * DAY);
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(rx.count(), 2, "a step forward made the retry due at once");
}

/// An endpoint that fails (and asks, by `Retry-After`, for a day between attempts) holds
/// its events past the retention only for `--webhook-hold`: then it is disabled, says why,
/// and its events are the sweep's.
#[test]
fn an_endpoint_holding_an_event_past_the_retention_and_the_hold_is_disabled_and_released() {
    if without(Feature::Webhooks) {
        return;
    }
    let dir = TempDir::new();
    let db = dir.db();
    let s = Launch::new(&db)
        .arg("--event-retention 2s --webhook-hold 3s")
        .start();
    let rx = Receiver::start();
    rx.set_default(Answer::status(503).header("Retry-After", "86400"));
    let (id, _) = add_webhook(&db, "default", &rx.url());
    eventually(ENDPOINT_SEEN, || endpoints(&s, "active") == 1.0);
    let created = Instant::now();
    create(&s, TOKEN, 1);
    create(&s, TOKEN, 2);
    rx.wait_for(1, Duration::from_secs(5));
    eventually(Duration::from_secs(30), || endpoints(&s, "disabled") == 1.0);
    assert!(
        created.elapsed() >= Duration::from_secs(5),
        "held for the retention and the hold first"
    );
    let r = row(&db, &id);
    assert_eq!(
        (r.state.as_str(), r.error.as_str()),
        (
            "disabled",
            "the event at seq 1 was held past the retention and --webhook-hold: disabled"
        )
    );
    eventually(Duration::from_secs(10), || {
        events_as(&s, TOKEN, "?after=0").status == 410
    });
    assert_eq!(
        rx.count(),
        1,
        "Retry-After kept the only retry past the hold"
    );
}

/// Around held endpoints the sweep removes exactly the prefix of each log that no active
/// endpoint has still to get: what was delivered, and every log without an endpoint.
#[test]
fn the_sweep_removes_up_to_the_lowest_cursor_of_the_active_endpoints() {
    if without(Feature::Webhooks) {
        return;
    }
    let dir = TempDir::new();
    let db = dir.db();
    let s = Launch::new(&db)
        .arg("--event-retention 1s --webhook-schedule 1h")
        .start();
    let alice = add_token(&db, "alice", false);
    let (ahead, behind) = (Receiver::start(), Receiver::start());
    // One endpoint gets events 1 and 2, then fails; the other gets 1 to 4, then fails.
    behind.push(Answer::ok());
    behind.push(Answer::ok());
    behind.set_default(Answer::status(500));
    for _ in 0..4 {
        ahead.push(Answer::ok());
    }
    ahead.set_default(Answer::status(500));
    add_webhook(&db, "default", &behind.url());
    add_webhook(&db, "default", &ahead.url());
    eventually(Duration::from_secs(5), || endpoints(&s, "active") == 2.0);
    for id in 1..=6 {
        create(&s, TOKEN, id);
    }
    for id in 1..=3 {
        create(&s, &alice, id);
    }
    behind.wait_for(3, Duration::from_secs(10));
    ahead.wait_for(5, Duration::from_secs(10));
    eventually(Duration::from_secs(15), || {
        events_as(&s, TOKEN, "?after=1").status == 410
            && events_as(&s, &alice, "?after=0").status == 410
    });
    // Events 1 and 2 went; 3 to 6 are kept, and stay so, sweep after sweep.
    for _ in 0..3 {
        let kept: Vec<i64> = events_after(&s, 2)
            .iter()
            .map(|e| e["seq"].as_i64().unwrap())
            .collect();
        assert_eq!(kept, [3, 4, 5, 6]);
        std::thread::sleep(Duration::from_secs(1));
    }
    assert_eq!(events_as(&s, &alice, "?after=3").text(), "[]");
}
