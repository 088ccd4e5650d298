//! Test control's clock (docs/control.md, "The clock"): `/_control/clock` sets, freezes
//! and advances the server's clock, and what reads it follows: token expiry, event
//! timestamps (never going back within a log), the retention, rate-limit budgets, webhook
//! timestamps and retry waits, the journal's `at`; a reset (or `DELETE`) makes it real
//! again. SQLite only, as test control is.

use crate::control::{controlled, create_as, ctl, mint};
use crate::faults::{plant, principal};
use crate::support::*;
use crate::webhooks::{add_webhook, create};
use serde_json::{Value, json};
use std::time::Duration;

const T2030: &str = "2030-01-01T00:00:00.000Z";
/// 2030-01-01T00:00:00Z in seconds since the epoch.
const T2030_SECS: i64 = 1_893_456_000;

/// `PUT /_control/clock` with `body`: the clock it answers (200 asserted).
#[track_caller]
fn set_clock(s: &TestServer, body: &str) -> Value {
    let r = s.request(&ctl("PUT", "/_control/clock").json(body));
    assert_eq!(r.status, 200, "{}", r.text());
    r.json()
}

/// `POST /_control/clock/advance` by `by`: the clock it answers (200 asserted).
#[track_caller]
fn advance(s: &TestServer, by: &str) -> Value {
    let r = s.request(&ctl("POST", "/_control/clock/advance").json(&format!(r#"{{"by":"{by}"}}"#)));
    assert_eq!(r.status, 200, "{}", r.text());
    r.json()
}

/// `GET /_control/clock`.
fn clock(s: &TestServer) -> Value {
    let r = s.request(&ctl("GET", "/_control/clock"));
    assert_eq!(r.status, 200, "{}", r.text());
    r.json()
}

/// Milliseconds between the server's clock as shown and the system's.
fn off_real_ms(shown: &Value) -> i64 {
    let now = shown["now"].as_str().unwrap();
    let real = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    (unix_ms(now) - real).abs()
}

/// `YYYY-MM-DDTHH:MM:SS.mmmZ` in milliseconds since the epoch.
fn unix_ms(ts: &str) -> i64 {
    crate::clock::unix_of(ts) * 1000 + ts[20..23].parse::<i64>().unwrap()
}

/// The timestamps of `token`'s events.
fn timestamps(s: &TestServer, token: &str) -> Vec<String> {
    let r = events_as(s, token, "?after=0");
    assert_eq!(r.status, 200, "{}", r.text());
    r.json()
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["timestamp"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn the_clock_is_set_frozen_advanced_and_real_again_and_bad_bodies_name_the_member() {
    if no_test_control() {
        return;
    }
    let s = controlled(":memory:").start();
    let real = clock(&s);
    assert_eq!(real["frozen"], false, "{real}");
    assert!(off_real_ms(&real) < 5_000, "{real}");
    assert_eq!(
        set_clock(&s, r#"{"now":"2030-01-01T00:00:00Z","frozen":true}"#),
        json!({"now": T2030, "frozen": true})
    );
    std::thread::sleep(Duration::from_millis(50));
    let r = s.request(&ctl("GET", "/_control/clock"));
    assert_eq!(r.text(), format!(r#"{{"now":"{T2030}","frozen":true}}"#));
    assert_eq!(
        advance(&s, "90m"),
        json!({"now": "2030-01-01T01:30:00.000Z", "frozen": true})
    );
    // Not frozen: it runs on from what it was set to (an offset taken as UTC).
    let running = set_clock(&s, r#"{"now":"2030-06-01T02:00:00.250+02:00"}"#);
    assert_eq!(
        running,
        json!({"now": "2030-06-01T00:00:00.250Z", "frozen": false})
    );
    let later = clock(&s);
    assert!(unix_ms(later["now"].as_str().unwrap()) >= unix_ms("2030-06-01T00:00:00.250Z"));
    let r = s.request(&ctl("DELETE", "/_control/clock"));
    assert_eq!((r.status, r.text()), (204, String::new()));
    assert!(off_real_ms(&clock(&s)) < 5_000);
    // A reset makes it real again too.
    set_clock(&s, r#"{"now":"2030-01-01T00:00:00Z","frozen":true}"#);
    assert_eq!(s.request(&ctl("POST", "/_control/reset")).status, 204);
    let after_reset = clock(&s);
    assert_eq!(after_reset["frozen"], false);
    assert!(off_real_ms(&after_reset) < 5_000, "{after_reset}");
    let bad = |method: &str, path: &str, body: &str, message: &str| {
        (
            ctl(method, path).json(body),
            400,
            &[][..],
            err(400, message),
        )
    };
    let put = |body: &str, message: &str| bad("PUT", "/_control/clock", body, message);
    let by = |body: &str, message: &str| bad("POST", "/_control/clock/advance", body, message);
    check(
        &s,
        &[
            put(r#"{"frozen":true}"#, "now: is required"),
            put(
                r#"{"now":"2030-01-01 00:00:00Z"}"#,
                "now: must be an RFC 3339 time such as 2030-01-01T00:00:00Z, not `2030-01-01 00:00:00Z`",
            ),
            put(
                r#"{"now":1893456000}"#,
                "now: must be a string such as \"2030-01-01T00:00:00Z\"",
            ),
            put(
                r#"{"now":"2030-01-01T00:00:00Z","frozen":"yes"}"#,
                "frozen: must be true or false",
            ),
            put(
                r#"{"now":"2030-01-01T00:00:00Z","offset":1}"#,
                "offset: unknown member (known: now, frozen)",
            ),
            put("[]", "the body must be a JSON object"),
            by("{}", "by: is required"),
            by(
                r#"{"by":"1w"}"#,
                "by: must be a duration of at least 1s (such as 90, 90s, 15m, 2h, 7d), not `1w`",
            ),
            by(
                r#"{"by":"0s"}"#,
                "by: must be a duration of at least 1s (such as 90, 90s, 15m, 2h, 7d), not `0s`",
            ),
            by(r#"{"by":7200}"#, "by: must be a string such as \"2h\""),
            by(r#"{"by":"2h","at":1}"#, "at: unknown member (known: by)"),
            (
                ctl("POST", "/_control/clock"),
                405,
                &[("Allow", "GET, PUT, DELETE")],
                err(405, "method not allowed here; allowed: GET, PUT, DELETE"),
            ),
            (
                ctl("GET", "/_control/clock/advance"),
                405,
                &[("Allow", "POST")],
                err(405, "method not allowed here; allowed: POST"),
            ),
            (
                Req::get("/_control/clock").token("not-the-control-token"),
                401,
                &[],
                err(401, "the bearer token is unknown or revoked"),
            ),
        ],
    );
    // Nothing bad moved it.
    assert!(off_real_ms(&clock(&s)) < 5_000);
}

#[test]
fn a_token_expires_when_the_clock_passes_its_time_and_lives_again_on_the_real_clock() {
    if no_test_control() {
        return;
    }
    let s = controlled(":memory:").start();
    let t = mint(&s, r#"{"principal":"p-exp","expires_in":"1h"}"#);
    let token = t["token"].as_str().unwrap();
    assert_eq!(s.request(&Req::get("/plants").token(token)).status, 200);
    let mut stream = Sse::open(&s, token, "/events", &[]);
    assert_eq!(stream.next(), Some(Message::Comment("events".into())));
    advance(&s, "2h");
    let r = s.request(&Req::get("/plants").token(token));
    assert_eq!(r.status, 401, "{}", r.text());
    // Its open event stream ends too, within seconds (keep-alives come after 10 s).
    let started = std::time::Instant::now();
    stream.set_timeout(Duration::from_secs(15));
    while started.elapsed() < Duration::from_secs(9) && stream.next().is_some() {}
    assert!(
        started.elapsed() < Duration::from_secs(9),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(r.text(), err(401, "the bearer token has expired"));
    // A token minted now expires by the test clock: an hour after it.
    let minted = mint(&s, r#"{"principal":"p-exp","expires_in":"1h"}"#);
    let shown = unix_ms(clock(&s)["now"].as_str().unwrap());
    let expires = minted["expires_at"].as_str().unwrap();
    let left = unix_ms(&format!("{}.000Z", &expires[..19])) - shown;
    assert!((3_590_000..=3_600_000).contains(&left), "{minted}");
    assert_eq!(s.request(&ctl("DELETE", "/_control/clock")).status, 204);
    assert_eq!(s.request(&Req::get("/plants").token(token)).status, 200);
}

#[test]
fn event_times_read_the_test_clock_and_never_go_back_and_the_journal_reads_it_too() {
    if no_test_control() {
        return;
    }
    let s = controlled(":memory:").start();
    let me = mint(&s, r#"{"principal":"p-time"}"#)["token"]
        .as_str()
        .unwrap()
        .to_owned();
    set_clock(&s, r#"{"now":"2030-01-01T00:00:00Z","frozen":true}"#);
    for id in [1, 2] {
        let r = s.request(&create_as(&me, &format!(r#"{{"id":{id},"name":"p"}}"#)));
        assert_eq!(r.status, 200, "{}", r.text());
    }
    assert_eq!(timestamps(&s, &me), [T2030, T2030]);
    // Set back a year, and back further than `clock::STEP`: the log's times hold.
    set_clock(&s, r#"{"now":"2029-01-01T00:00:00Z","frozen":true}"#);
    let r = s.request(&create_as(&me, r#"{"id":3,"name":"p"}"#));
    assert_eq!(r.status, 200);
    assert_eq!(timestamps(&s, &me), [T2030, T2030, T2030]);
    // Forward again: times follow it.
    advance(&s, "400d");
    let r = s.request(&create_as(&me, r#"{"id":4,"name":"p"}"#));
    assert_eq!(r.status, 200);
    assert_eq!(timestamps(&s, &me)[3], "2030-02-05T00:00:00.000Z");
    // The journal's `at` is on the test clock (frozen: exactly its reading).
    let journal = s
        .request(&ctl("GET", "/_control/requests?method=POST"))
        .json();
    let last = journal.as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["at"], "2030-02-05T00:00:00.000Z", "{journal}");
    assert_eq!(journal.as_array().unwrap()[0]["at"], T2030, "{journal}");
}

#[test]
fn advancing_past_the_retention_lets_the_sweep_remove_the_events() {
    if no_test_control() {
        return;
    }
    let s = controlled(":memory:").arg("--event-retention 1h").start();
    for id in 1..=3 {
        assert_eq!(s.post(&format!(r#"{{"id":{id},"name":"p"}}"#)).status, 200);
    }
    // Expected absence: the sweep runs every 2 s and leaves events younger than an hour.
    std::thread::sleep(Duration::from_millis(2500));
    assert_eq!(timestamps(&s, TOKEN).len(), 3);
    advance(&s, "2h");
    eventually(Duration::from_secs(15), || {
        events_as(&s, TOKEN, "?after=0").status == 410
    });
    let r = events_as(&s, TOKEN, "?after=3");
    assert_eq!((r.status, r.text()), (200, "[]".to_owned()));
}

#[test]
fn advancing_the_clock_refills_a_spent_rate_limit_budget() {
    if no_test_control() {
        return;
    }
    let s = controlled(":memory:")
        .arg("--rate-limit 1/h --rate-burst 2")
        .start();
    for _ in 0..2 {
        assert_eq!(s.get("/plants").status, 200);
    }
    let r = s.get("/plants");
    assert_eq!(r.status, 429, "{}", r.text());
    assert_eq!(r.header("Retry-After"), Some("3600"));
    advance(&s, "1h");
    let r = s.get("/plants");
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(s.get("/plants").status, 429);
}

#[test]
fn webhook_timestamps_read_the_test_clock_and_a_retry_comes_once_it_passes_its_time() {
    if no_test_control() || without(Feature::Webhooks) {
        return;
    }
    let dir = TempDir::new();
    let db = dir.db();
    let s = controlled(db.to_str().unwrap())
        .arg("--webhook-schedule 1h")
        .start();
    let rx = Receiver::start();
    rx.push(Answer::status(500));
    let (_, secret) = add_webhook(&db, "default", &rx.url());
    set_clock(&s, r#"{"now":"2030-01-01T00:00:00Z","frozen":true}"#);
    create(&s, TOKEN, 1);
    let first = rx.wait_for(1, Duration::from_secs(30));
    assert_eq!(
        first[0].header("webhook-timestamp"),
        Some(&*T2030_SECS.to_string())
    );
    assert!(verify(&secret, &first[0]));
    // Expected absence: the retry is due in an hour of the test clock, which stands.
    std::thread::sleep(Duration::from_millis(2500));
    assert_eq!(rx.count(), 1);
    advance(&s, "59m");
    std::thread::sleep(Duration::from_millis(2500));
    assert_eq!(rx.count(), 1, "not due before the hour has passed");
    advance(&s, "1m");
    let got = rx.wait_for(2, Duration::from_secs(10));
    assert_eq!(got[1].status, 200);
    assert_eq!(got[1].seq(), 1);
    assert_eq!(
        got[1].header("webhook-timestamp"),
        Some(&*(T2030_SECS + 3600).to_string())
    );
    assert!(verify(&secret, &got[1]));
}

/// A running test clock set just before the latest time it may read stops there: the
/// clock, an event's `timestamp` and a minted token's `expires_at` keep four-digit years.
#[test]
fn a_running_clock_stops_at_9999_12_31() {
    if no_test_control() {
        return;
    }
    let s = controlled(":memory:").start();
    let p = principal(&s, "late");
    let set = set_clock(&s, r#"{"now":"9999-12-31T23:59:59.500Z"}"#);
    assert_eq!(
        set,
        json!({"now":"9999-12-31T23:59:59.500Z","frozen":false})
    );
    std::thread::sleep(Duration::from_millis(1000));
    assert_eq!(
        clock(&s),
        json!({"now":"9999-12-31T23:59:59.999Z","frozen":false})
    );
    assert_eq!(s.request(&create_as(&p, &plant(1))).status, 200);
    let events: Value = s.request(&Req::get("/events").token(&p)).json();
    assert_eq!(
        events[0]["timestamp"], "9999-12-31T23:59:59.999Z",
        "{events}"
    );
    // A token would expire at once: refused, not made expired (`control_tokens`).
    let r = s.request(
        &ctl("POST", "/_control/tokens").json(r#"{"principal":"late","expires_in":"3650d"}"#),
    );
    assert_eq!(r.status, 400, "{}", r.text());
}

/// A `PUT` back and forth across the whole range, 30,000 times: the ticks count the move
/// ahead once (they would overflow otherwise: the writer thread panicked, every later
/// write was 500, in a debug build), and the server goes on writing.
#[test]
fn the_ticks_survive_the_clock_put_back_and_forth() {
    use std::io::{Read, Write};
    // Pipelined on one connection: under qemu each connection serves one request.
    if no_test_control() || native_only(EMULATED_TCP_INFO) {
        return;
    }
    let s = controlled(":memory:").start();
    let put = |now: &str| {
        ctl("PUT", "/_control/clock")
            .json(&format!(r#"{{"now":"{now}","frozen":true}}"#))
            .keep_alive()
            .bytes()
    };
    let mut batch = Vec::new();
    for _ in 0..500 {
        batch.extend(put("0000-01-01T00:00:00Z"));
        batch.extend(put("9999-12-31T23:59:59Z"));
    }
    for _ in 0..60 {
        let mut c = s.connect();
        c.write_all(&batch).unwrap();
        let (mut got, mut buf) = (Vec::new(), [0u8; 65536]);
        while got.windows(12).filter(|w| w == b"HTTP/1.1 200").count() < 1000 {
            let n = c.read(&mut buf).unwrap();
            assert!(
                n > 0,
                "closed early: {}",
                String::from_utf8_lossy(&got[got.len().saturating_sub(400)..])
            );
            got.extend_from_slice(&buf[..n]);
        }
    }
    assert_eq!(s.request(&ctl("POST", "/_control/reset")).status, 204);
    let p = principal(&s, "ticks");
    let r = s.request(&create_as(&p, &plant(1)));
    assert_eq!(r.status, 200, "{}", r.text());
}

/// The test clocks since the last reset may put the server's time (the ticks what waits
/// goes by) at most 100,000 years ahead: a `PUT` or an advance past that is 400 naming
/// its member, so that no number of control requests brings the ticks to where they stand
/// (a spent rate-limit budget would never refill again); a reset brings them back.
#[test]
fn a_clock_past_its_ceiling_is_refused_and_a_reset_brings_the_ticks_back() {
    if no_test_control() {
        return;
    }
    let s = controlled(":memory:")
        .arg("--rate-limit 2/s --rate-burst 2")
        .start();
    let latest = r#"{"now":"9999-12-31T23:59:59.999Z","frozen":true}"#;
    let put = || s.request(&ctl("PUT", "/_control/clock").json(latest));
    let ceiling = |member: &str| {
        err(
            400,
            &format!(
                "{member}: the test clocks since the last reset would move the server's time \
                 more than 100000 years ahead in all; POST /_control/reset brings it back"
            ),
        )
    };
    // Each clock put ahead anew (after a DELETE) counts its move again: about 7,970
    // years from now, twelve times.
    let mut accepted = 0;
    loop {
        let r = put();
        if r.status == 400 {
            assert_eq!(r.text(), ceiling("now"));
            break;
        }
        assert_eq!(r.status, 200, "{}", r.text());
        accepted += 1;
        assert!(accepted < 100, "never refused");
        assert_eq!(s.request(&ctl("DELETE", "/_control/clock")).status, 204);
    }
    assert_eq!(accepted, 12);
    let far = ctl("POST", "/_control/clock/advance").json(r#"{"by":"1826250d"}"#);
    let r = s.request(&far);
    assert_eq!((r.status, r.text()), (400, ceiling("by")));
    assert_eq!(clock(&s)["frozen"], false, "a refused move moves nothing");
    // What waits goes on: a spent budget refills with the real clock.
    let refills = || {
        for _ in 0..2 {
            assert_eq!(s.get("/plants").status, 200);
        }
        assert_eq!(s.get("/plants").status, 429);
        eventually(Duration::from_secs(10), || s.get("/plants").status == 200);
    };
    refills();
    // A reset: the real clock, its ticks the monotonic clock's; moves count from there.
    assert_eq!(s.request(&ctl("POST", "/_control/reset")).status, 204);
    refills();
    assert_eq!(put().status, 200);
}
