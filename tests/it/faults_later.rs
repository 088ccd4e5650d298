//! Test control's faults that act later (docs/control.md, "Faults"): a delay holds no
//! worker, a stream cut after N events, and faults on webhook deliveries. SQLite only
//! (test control is). The rest is in `faults.rs`.

use crate::control::{ALICE, alice_seed, controlled, create_as, ctl, list_as};
use crate::faults::{fault, faults, plant, principal};
use crate::support::*;
use serde_json::{Value, json};
use std::time::{Duration, Instant};

/// A write a `before` delay holds when a reset comes is not carried out after it: the
/// store after the reset holds nothing of the test before, and the write is answered 503
/// naming the reset and the fault (the seeded token lives on through the reset).
#[test]
fn a_write_delayed_across_a_reset_is_refused_not_carried_out() {
    if no_test_control() {
        return;
    }
    let dir = TempDir::new();
    let seed = alice_seed(&dir, false);
    let s = controlled(":memory:")
        .arg(&format!("--seed {seed}"))
        .start();
    let id = fault(
        &s,
        json!({"match":{"method":"POST"},"action":{"kind":"delay","ms":1500},"times":1}),
    )["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let addr = s.addr.clone();
    let delayed = std::thread::spawn(move || create_as(ALICE, &plant(1)).send_to(&addr));
    eventually(Duration::from_secs(5), || faults(&s)[0]["hits"] == 1);
    assert_eq!(s.request(&ctl("POST", "/_control/reset")).status, 204);
    let r = delayed.join().unwrap().unwrap();
    assert_eq!(r.status, 503, "{}", r.text());
    assert_eq!(
        r.json(),
        json!({"error":503,"message":format!(
            "test control was reset or a snapshot restored while this request waited out the delay of fault {id}; \
             it was not carried out"
        )})
    );
    assert_eq!(
        list_as(&s, ALICE),
        "[]",
        "the store is as at start after a reset"
    );
    // Without a reset in between, the same delayed write is carried out.
    fault(
        &s,
        json!({"match":{"method":"POST"},"action":{"kind":"delay","ms":100},"times":1}),
    );
    assert_eq!(s.request(&create_as(ALICE, &plant(1))).status, 200);
    assert_ne!(list_as(&s, ALICE), "[]");
}

/// A reset clears the faults and the test clock before it restores the store: seen while
/// its restore waits (a read held open locks `:memory:`), no fault is left to take a
/// request committed before the restore, and the clock is already real.
#[cfg(feature = "fault-injection")]
#[test]
fn a_reset_clears_the_faults_and_the_clock_before_it_restores_the_store() {
    if no_test_control() {
        return;
    }
    let s = controlled(":memory:").arg("--workers 4").start();
    fault(
        &s,
        json!({"match":{"method":"POST"},"action":{"kind":"status","status":500}}),
    );
    let put = ctl("PUT", "/_control/clock").json(r#"{"now":"2030-01-01T00:00:00Z","frozen":true}"#);
    assert_eq!(s.request(&put).status, 200);
    std::thread::scope(|scope| {
        let holder = scope.spawn(|| s.send("GET", "/__fault/hold-read", &[], None).status);
        s.log_when(|l| l.contains("fault injection: holding a read"));
        let reset = scope.spawn(|| s.request(&ctl("POST", "/_control/reset")).status);
        // Well within the restore's wait for the lock (`BUSY_TIMEOUT`, 5 s).
        eventually(Duration::from_secs(4), || {
            let clock = s.request(&ctl("GET", "/_control/clock")).json();
            faults(&s) == json!([]) && clock["frozen"] == false
        });
        assert!(!reset.is_finished(), "the restore waits for the held read");
        let r = s.send("GET", "/__fault/release-reads", &[], None);
        assert_eq!(r.status, 200, "{}", r.text());
        assert_eq!(holder.join().unwrap(), 200);
        assert_eq!(reset.join().unwrap(), 204);
    });
}

#[test]
fn a_delay_holds_no_worker() {
    if no_test_control() {
        return;
    }
    let s = controlled(":memory:").arg("--workers 1").start();
    let (slow, quick) = (principal(&s, "slow"), principal(&s, "quick"));
    fault(
        &s,
        json!({"match":{"method":"POST","principal":"slow"},"action":{"kind":"delay","ms":2000},"times":1}),
    );
    let addr = s.addr.clone();
    let started = Instant::now();
    let delayed = {
        let req = create_as(&slow, &plant(1));
        std::thread::spawn(move || (req.send_to(&addr).unwrap(), Instant::now()))
    };
    eventually(Duration::from_secs(5), || faults(&s)[0]["hits"] == 1);
    // Before: not carried out yet while it waits.
    assert_eq!(list_as(&s, &slow), "[]");
    // The one worker is free: another request is answered at once.
    let r = s.request(&Req::get("/plants").token(&quick));
    let quick_at = Instant::now();
    assert_eq!(r.status, 200);
    let (r, slow_at) = delayed.join().unwrap();
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(quick_at < slow_at, "the other request was answered first");
    assert!(slow_at - started >= Duration::from_millis(2000));
    assert!(list_as(&s, &slow).contains(r#""name":"p1""#));
    // After: carried out at once, its answer later.
    fault(
        &s,
        json!({"match":{"method":"POST","principal":"slow"},"when":"after","action":{"kind":"delay","ms":2000},"times":1}),
    );
    let addr = s.addr.clone();
    let delayed = {
        let req = create_as(&slow, &plant(2));
        std::thread::spawn(move || req.send_to(&addr).unwrap())
    };
    eventually(Duration::from_secs(5), || {
        list_as(&s, &slow).contains(r#""name":"p2""#)
    });
    assert!(!delayed.is_finished(), "the answer waits");
    assert_eq!(delayed.join().unwrap().status, 200);
}

#[test]
fn cut_stream_ends_an_event_stream_after_n_events() {
    if no_test_control() {
        return;
    }
    let s = controlled(":memory:").start();
    let p = principal(&s, "streamer");
    let f = fault(&s, json!({"action":{"kind":"cut_stream","after_events":2}}));
    assert_eq!(f["when"], "after");
    // A JSON list is no stream: never cut.
    assert_eq!(events_as(&s, &p, "").status, 200);
    let mut sse = Sse::open(&s, &p, "/events", &[]);
    assert_eq!(sse.head.status, 200);
    for id in 1..=3 {
        assert_eq!(s.request(&create_as(&p, &plant(id))).status, 200);
    }
    let mut got = Vec::new();
    while let Some(m) = sse.next() {
        if let Message::Event { id, .. } = m {
            got.push(id);
        }
    }
    assert_eq!(got, [1, 2], "the stream ended after 2 events");
    assert_eq!(faults(&s)[0]["hits"], 1);
}

#[test]
fn webhook_deliveries_duplicated_badly_signed_answered_by_a_fault_and_delayed() {
    if no_test_control() || without(Feature::Webhooks) {
        return;
    }
    let dir = TempDir::new();
    let db = dir.db();
    let db_text = db.to_str().unwrap().to_owned();
    let s = controlled(&db_text).arg("--webhook-schedule 1s,1s").start();
    let p = principal(&s, "hooked");
    let rx = Receiver::start();
    let (wh, secret) = crate::webhooks::add_webhook(&db, "hooked", &rx.url());
    let others = fault(
        &s,
        json!({"match":{"webhook":"wh_0000000000000000"},"action":{"kind":"duplicate"}}),
    );
    // Duplicate: the same message twice.
    fault(
        &s,
        json!({"match":{"webhook":wh},"action":{"kind":"duplicate"},"times":1}),
    );
    assert_eq!(s.request(&create_as(&p, &plant(1))).status, 200);
    let got = rx.wait_for(2, Duration::from_secs(10));
    assert_eq!((got[0].seq(), got[1].seq()), (1, 1));
    assert_eq!(got[0].header("webhook-id"), got[1].header("webhook-id"));
    assert_eq!(got[0].body, got[1].body);
    // Bad signature: signed with another key.
    fault(
        &s,
        json!({"match":{"principal":"hooked","target":"webhook"},"action":{"kind":"bad_signature"},"times":1}),
    );
    assert_eq!(s.request(&create_as(&p, &plant(2))).status, 200);
    let got = rx.wait_for(3, Duration::from_secs(10));
    assert_eq!(got[2].seq(), 2);
    assert!(verify(&secret, &got[0]) && !verify(&secret, &got[2]));
    // Status 503: not sent, a failed attempt, made again on the schedule (1 s).
    fault(
        &s,
        json!({"match":{"webhook":wh},"action":{"kind":"status","status":503},"times":1}),
    );
    let before = Instant::now();
    assert_eq!(s.request(&create_as(&p, &plant(3))).status, 200);
    let got = rx.wait_for(4, Duration::from_secs(10));
    assert_eq!(got[3].seq(), 3);
    assert!(
        got[3].at - before >= Duration::from_millis(900),
        "sent on the retry"
    );
    // Status 200: counts as delivered, never sent.
    fault(
        &s,
        json!({"match":{"webhook":wh},"action":{"kind":"status","status":200},"times":1}),
    );
    assert_eq!(s.request(&create_as(&p, &plant(4))).status, 200);
    // Delay: the attempt is sent that much later.
    fault(
        &s,
        json!({"match":{"webhook":wh},"action":{"kind":"delay","ms":1500},"times":1}),
    );
    let before = Instant::now();
    assert_eq!(s.request(&create_as(&p, &plant(5))).status, 200);
    let got = rx.wait_for(5, Duration::from_secs(10));
    assert_eq!(
        got.iter().map(Received::seq).collect::<Vec<_>>(),
        [1, 1, 2, 3, 5]
    );
    assert!(got[4].at - before >= Duration::from_millis(1500));
    let list = faults(&s);
    let hits: Vec<_> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["hits"].clone())
        .collect();
    assert_eq!(
        hits,
        [json!(0), json!(1), json!(1), json!(1), json!(1), json!(1)]
    );
    assert_eq!(list[0]["id"], others["id"]);
    assert_eq!(
        list[0]["when"],
        Value::Null,
        "`when` does not apply to deliveries"
    );
}

/// A delay longer than the lease's margin (5 s past `--webhook-timeout`, 15 s in all by
/// default, of which an attempt needs 11 s left) is still sent, that much later, in one
/// attempt: the lease is renewed to cover the delay first.
#[test]
fn a_webhook_delay_past_the_lease_margin_is_sent_that_much_later() {
    if no_test_control() || without(Feature::Webhooks) {
        return;
    }
    sent_once_after(6000);
}

/// A delay of the contract's order (20 s of the 60 s allowed).
#[test]
fn a_webhook_delay_of_20s_is_sent_once_and_counted_once() {
    if no_test_control() || without(Feature::Webhooks) {
        return;
    }
    sent_once_after(20_000);
}

/// A server on a file with test control, a principal `hooked` (its token), an endpoint
/// of its added with the CLI, and a delay fault of `ms` (no `times`) on that endpoint.
fn delayed_endpoint(ms: u64) -> (TempDir, TestServer, String, Receiver) {
    let dir = TempDir::new();
    let db = dir.db();
    let s = controlled(db.to_str().unwrap()).start();
    let p = principal(&s, "hooked");
    let rx = Receiver::start();
    let (wh, _secret) = crate::webhooks::add_webhook(&db, "hooked", &rx.url());
    fault(
        &s,
        json!({"match":{"webhook":wh},"action":{"kind":"delay","ms":ms}}),
    );
    (dir, s, p, rx)
}

/// With a delay fault of `ms` on an endpoint (no `times`), one event is sent once, after
/// the delay, and the fault counts that one attempt.
fn sent_once_after(ms: u64) {
    let (_dir, s, p, rx) = delayed_endpoint(ms);
    let delay = Duration::from_millis(ms);
    let before = Instant::now();
    assert_eq!(s.request(&create_as(&p, &plant(1))).status, 200);
    let got = rx.wait_for(1, delay + Duration::from_secs(8));
    assert!(got[0].at - before >= delay);
    assert_eq!(got[0].seq(), 1);
    // Nothing is left to send: no other attempt comes, none is counted.
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(rx.count(), 1, "sent once");
    assert_eq!(faults(&s)[0]["hits"], 1, "one attempt, one hit");
}

/// A delivery attempt waiting out a fault's delay when a reset comes is not made after
/// it: it was for the store before the reset (here an endpoint the reset removes, as it
/// was added with the CLI after the start).
#[test]
fn a_webhook_attempt_delayed_across_a_reset_is_not_made() {
    if no_test_control() || without(Feature::Webhooks) {
        return;
    }
    let (_dir, s, p, rx) = delayed_endpoint(5000);
    assert_eq!(s.request(&create_as(&p, &plant(1))).status, 200);
    // The delivery thread has taken the fault: it waits out the delay now.
    eventually(Duration::from_secs(30), || faults(&s)[0]["hits"] == 1);
    assert_eq!(s.request(&ctl("POST", "/_control/reset")).status, 204);
    // Past the delay and then some: nothing was sent.
    std::thread::sleep(Duration::from_millis(6500));
    assert_eq!(rx.count(), 0, "the attempt from before the reset was made");
}
