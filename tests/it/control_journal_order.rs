//! Test control's journal in time (docs/control.md, "The journal"): entries listed from
//! their arrival and in its order, a listing that waits (holding no worker), a request in
//! flight across a reset, `at` whatever the clock does. SQLite only (test control is).

use crate::control::{controlled, ctl};
use crate::control_journal::{fingerprint, journal, ns};
use crate::faults::{fault, faults, principal};
use crate::support::*;
use serde_json::{Value, json};
use std::time::{Duration, Instant};

/// An entry is listed from its arrival, in the order of arrival, unanswered until its
/// answer goes out; a listing that waits returns once it is answered.
#[test]
fn entries_are_listed_by_arrival_and_a_listing_can_wait_for_their_answers() {
    if no_test_control() {
        return;
    }
    let s = controlled(":memory:").start();
    let me = principal(&s, "lou");
    fault(
        &s,
        json!({"match":{"method":"POST"},"when":"after","action":{"kind":"delay","ms":1500},"times":1}),
    );
    std::thread::scope(|scope| {
        let held = scope.spawn(|| {
            s.request(
                &Req::new("POST", "/plants")
                    .token(&me)
                    .json(r#"{"id":1,"name":"n"}"#),
            )
        });
        eventually(Duration::from_secs(10), || {
            !journal(&s, "?method=POST").is_empty()
        });
        let e = &journal(&s, "")[0];
        assert_eq!(
            (&e["n"], &e["answered"], &e["status"], &e["duration_ms"]),
            (&json!(1), &json!(false), &Value::Null, &Value::Null)
        );
        // The retry-like request that comes after it is after it, answered first.
        assert_eq!(s.request(&Req::get("/plants").token(&me)).status, 200);
        let all = journal(&s, "");
        assert_eq!(ns(&all), [1, 2]);
        assert_eq!(
            (&all[0]["answered"], &all[1]["answered"]),
            (&json!(false), &json!(true))
        );
        let asked = Instant::now();
        let waited = journal(&s, "?method=POST&wait=30s");
        assert!(
            asked.elapsed() < Duration::from_secs(25),
            "it waited out its 30 s"
        );
        assert_eq!(
            (&waited[0]["answered"], &waited[0]["status"]),
            (&json!(true), &json!(200))
        );
        assert!(
            waited[0]["duration_ms"].as_f64().unwrap() >= 1500.0,
            "{waited:?}"
        );
        assert_eq!(held.join().unwrap().status, 200);
    });
    // A wait that nothing ends lists what matches once it is over (200 either way).
    let asked = Instant::now();
    assert_eq!(journal(&s, "?path=/never&wait=1s"), Vec::<Value>::new());
    assert!(asked.elapsed() >= Duration::from_secs(1));
}

/// A listing that waits holds no worker: with one worker, the request it waits for is
/// answered while it waits, and it lists that request answered.
#[test]
fn a_waiting_listing_holds_no_worker() {
    if no_test_control() {
        return;
    }
    let s = controlled(":memory:").arg("--workers 1").start();
    std::thread::scope(|scope| {
        let waiting: Vec<_> = (0..3)
            .map(|_| scope.spawn(|| journal(&s, "?path=/plants/*&wait=30s&min=2")))
            .collect();
        for id in [7, 8] {
            assert_eq!(
                s.request(&Req::new("DELETE", &format!("/plants/{id}")))
                    .status,
                401
            );
        }
        for w in waiting {
            let listed = w.join().unwrap();
            let answered: Vec<_> = listed
                .iter()
                .map(|e| (e["path"].clone(), e["answered"].clone()))
                .collect();
            assert_eq!(
                answered,
                [
                    (json!("/plants/7"), json!(true)),
                    (json!("/plants/8"), json!(true))
                ]
            );
        }
    });
}

/// A request in flight when a reset comes is listed in the new journal, with a fresh
/// `n`; answered 503 by the reset (a delay held it), it names its principal.
#[test]
fn a_request_in_flight_across_a_reset_is_in_the_new_journal_with_its_principal() {
    if no_test_control() {
        return;
    }
    let s = controlled(":memory:").start();
    let held = principal(&s, "held");
    assert_eq!(s.request(&Req::get("/healthz")).status, 200);
    let id = fault(
        &s,
        json!({"match":{"principal":"held"},"action":{"kind":"delay","ms":1500},"times":1}),
    )["id"]
        .clone();
    std::thread::scope(|scope| {
        let waiting = scope.spawn(|| s.request(&Req::get("/plants").token(&held)));
        eventually(Duration::from_secs(10), || faults(&s)[0]["hits"] == 1);
        assert_eq!(ns(&journal(&s, "")), [1, 2]);
        assert_eq!(s.request(&ctl("POST", "/_control/reset")).status, 204);
        // The reset is a barrier: the held request is answered 503 within it, after the
        // journal was cleared, so the new journal lists it, answered.
        let now = journal(&s, "");
        assert_eq!(
            (ns(&now), &now[0]["path"], &now[0]["answered"]),
            (vec![1], &json!("/plants"), &json!(true))
        );
        let r = waiting.join().unwrap();
        assert_eq!(r.status, 503, "{}", r.text());
    });
    let e = &journal(&s, "?principal=held")[0];
    assert_eq!(
        (&e["n"], &e["status"], &e["fault"], &e["token"]),
        (&json!(1), &json!(503), &id, &json!(fingerprint(&held)))
    );
}

/// `at` is when the request arrived, on the test clock, whatever the clock does while
/// the request is in flight (moved to year 0 here).
#[test]
fn at_is_when_the_request_arrived_whatever_the_clock_does_meanwhile() {
    if no_test_control() {
        return;
    }
    let s = controlled(":memory:").start();
    let me = principal(&s, "ned");
    let clock = |body: &str| {
        let r = s.request(&ctl("PUT", "/_control/clock").json(body));
        assert_eq!(r.status, 200, "{}", r.text());
    };
    clock(r#"{"now":"2030-01-01T00:00:00Z","frozen":true}"#);
    fault(
        &s,
        json!({"match":{"principal":"ned"},"when":"after","action":{"kind":"delay","ms":1000},"times":1}),
    );
    std::thread::scope(|scope| {
        let held = scope.spawn(|| s.request(&Req::get("/plants").token(&me)));
        eventually(Duration::from_secs(10), || faults(&s)[0]["hits"] == 1);
        clock(r#"{"now":"0000-01-01T00:00:00Z","frozen":true}"#);
        assert_eq!(held.join().unwrap().status, 200);
    });
    let e = &journal(&s, "")[0];
    assert_eq!(
        (&e["at"], &e["answered"]),
        (&json!("2030-01-01T00:00:00.000Z"), &json!(true))
    );
}

/// A listing that waited is built by a worker, never by the delays thread, which times
/// every fault's delay: while one is held in its making (the `fault-injection` hook), a
/// request with a `delay` fault is answered on time.
#[cfg(feature = "fault-injection")]
#[test]
fn a_listing_that_waited_holds_no_delay_up() {
    if no_test_control() {
        return;
    }
    let s = controlled(":memory:").arg("--workers 4").start();
    fault(
        &s,
        json!({"match":{"path":"/healthz"},"action":{"kind":"delay","ms":50}}),
    );
    assert_eq!(s.request(&Req::get("/plants")).status, 401);
    let hold = |what: &str| {
        let r = s.send("GET", &format!("/__fault/{what}-listings"), &[], None);
        assert_eq!(r.status, 200, "{}", r.text());
    };
    hold("hold");
    std::thread::scope(|scope| {
        let listing = scope.spawn(|| journal(&s, "?wait=30s&min=1"));
        s.log_when(|l| l.contains("holding a journal listing"));
        let started = Instant::now();
        assert_eq!(s.request(&Req::get("/healthz")).status, 200);
        assert!(
            !listing.is_finished(),
            "the listing was let go before the delayed answer came ({:?})",
            started.elapsed()
        );
        hold("release");
        let listed = listing.join().unwrap();
        assert!(listed.iter().any(|e| e["path"] == "/healthz"), "{listed:?}");
    });
}
