//! Webhook deliveries across test control: a restore during a faulted delivery turn
//! (its lease renewed for a `duplicate`) records nothing against the restored store, and
//! the leases and retry times of a run whose test clock was moved ahead do not outlive
//! it. SQLite only, as test control.

use crate::control::{ALICE, alice_seed, controlled, ctl, mint, snapshot};
use crate::faults::fault;
use crate::support::*;
use crate::webhooks::{add_webhook, create, row, webhook};
use serde_json::json;
use std::time::Duration;

/// Rounds of the restore race (`a_restore_during_…`): before the fix, about one in
/// forty marked an event delivered that was never posted.
const ROUNDS: u64 = 200;

/// A delivery turn reads a page of events, then renews its lease for a `duplicate`
/// fault before each attempt. A restore between the two gives the lease back and puts
/// back a cursor that may equal the turn's: the renewal must not take the restored
/// endpoint, post the old store's events and record them against the new one. Each
/// round restores, writes, restores again and writes one event: that event is posted
/// (its `webhook-id` reaches the receiver), and the cursor never passes the log's end.
#[test]
fn a_restore_during_a_faulted_delivery_turn_marks_nothing_delivered_that_was_not_posted() {
    if no_test_control() || without(Feature::Webhooks) {
        return;
    }
    let dir = TempDir::new();
    let db = dir.db();
    let receiver = Receiver::start();
    let (hook, _) = add_webhook(&db, "alice", &receiver.url());
    let seed = alice_seed(&dir, true);
    let s = controlled(db.to_str().unwrap())
        .arg(&format!(
            "--seed {seed} --webhook-schedule 1s --webhook-timeout 2s"
        ))
        .start();
    receiver.wait_for(1, Duration::from_secs(30));
    eventually(Duration::from_secs(30), || {
        row(&db, &hook).progress == "1/1"
    });
    let restore = format!("/_control/snapshots/{}/restore", snapshot(&s));
    fault(
        &s,
        json!({"match":{"target":"webhook","principal":"alice"},"action":{"kind":"duplicate"}}),
    );
    let mut id = 100;
    for round in 0..ROUNDS {
        assert_eq!(s.request(&ctl("POST", &restore)).status, 204);
        for _ in 0..=round % 3 {
            id += 1;
            create(&s, ALICE, id);
        }
        // A turn under way at the next restore, at a different point each round.
        std::thread::sleep(Duration::from_millis(round % 20));
        assert_eq!(s.request(&ctl("POST", &restore)).status, 204);
        id += 1;
        create(&s, ALICE, id);
        let events = s.request(&Req::get("/events?after=1").token(ALICE)).json();
        assert_eq!(events[0]["seq"], 2, "round {round}: {events}");
        let last = events[0]["id"].as_str().unwrap().to_owned();
        // Before the fix, this event was at times marked delivered (the cursor even
        // past it) without ever being posted.
        eventually(Duration::from_secs(10), || {
            receiver
                .requests()
                .iter()
                .any(|r| r.header("webhook-id") == Some(last.as_str()))
        });
    }
    eventually(Duration::from_secs(10), || {
        row(&db, &hook).progress == "2/2"
    });
}

/// A server on `path` (retries every second), its clock advanced `ahead`, and a token
/// of ann's.
fn run_ahead(path: &str, ahead: &str) -> (TestServer, String) {
    let s = controlled(path)
        .arg("--webhook-schedule 1s --webhook-timeout 5s")
        .start();
    let by = json!({ "by": ahead }).to_string();
    assert_eq!(
        s.request(&ctl("POST", "/_control/clock/advance").json(&by))
            .status,
        200
    );
    let ann = mint(&s, r#"{"principal":"ann"}"#)["token"]
        .as_str()
        .unwrap()
        .to_owned();
    (s, ann)
}

/// A run with its test clock moved ahead stores its leases and retry times ahead by as
/// much (they go by the clock's ticks). The next server on the file is not held by them:
/// a lease of a run killed mid-attempt, or a retry due years ahead, is taken as run out
/// at open; and `webhook enable` gives back a lease that is not that far ahead.
#[test]
fn leases_and_retries_of_a_test_clock_moved_ahead_do_not_outlive_its_run() {
    if no_test_control() || without(Feature::Webhooks) {
        return;
    }
    let dir = TempDir::new();
    let db = dir.db();
    let path = db.to_str().unwrap();
    let receiver = Receiver::start();
    let (hook, _) = add_webhook(&db, "ann", &receiver.url());
    let run = |ahead: &str| run_ahead(path, ahead);
    // A lease ten years ahead: the attempt is under way when the server is killed.
    let (s, ann) = run("3650d");
    receiver.push(Answer::ok().after(Duration::from_secs(60)));
    create(&s, &ann, 1);
    receiver.wait_for(1, Duration::from_secs(30));
    drop(s);
    let (s, ann) = run("1s");
    let got = receiver.wait_for(2, Duration::from_secs(30));
    assert_eq!(got[1].seq(), 1, "the next server delivers again");
    eventually(Duration::from_secs(10), || {
        row(&db, &hook).progress == "1/1"
    });
    // A retry due ten years ahead: the next server tries at once.
    assert_eq!(
        s.request(&ctl("POST", "/_control/clock/advance").json(r#"{"by":"3650d"}"#))
            .status,
        200
    );
    receiver.push(Answer::status(500));
    create(&s, &ann, 2);
    eventually(Duration::from_secs(30), || row(&db, &hook).failures == "1");
    assert!(s.stop().success());
    let (s, ann) = run("1s");
    let got = receiver.wait_for(4, Duration::from_secs(30));
    assert_eq!(got[3].seq(), 2, "the next server tries again");
    // A lease twelve hours ahead (one a real clock could not store either, but within a
    // day): `webhook enable` gives it back.
    assert_eq!(
        s.request(&ctl("POST", "/_control/clock/advance").json(r#"{"by":"12h"}"#))
            .status,
        200
    );
    receiver.push(Answer::ok().after(Duration::from_secs(60)));
    create(&s, &ann, 3);
    receiver.wait_for(5, Duration::from_secs(30));
    drop(s);
    let (code, out, err) = webhook(&db, &["enable", &hook]);
    assert_eq!(code, 0, "{out}{err}");
    let _s = run("1s").0;
    let got = receiver.wait_for(6, Duration::from_secs(30));
    assert_eq!(got[5].seq(), 3, "delivered again once enabled");
}

/// A retry that a test clock put ahead by less than a real schedule could (two days,
/// within `DUE_AT_MOST`, so the next open cannot tell it from a real one) is brought
/// back to the real clock at a normal stop: the next server tries again when this one
/// would have, not two days later.
#[test]
fn a_retry_put_ahead_by_a_test_clock_is_brought_back_at_a_stop() {
    if no_test_control() || without(Feature::Webhooks) {
        return;
    }
    let dir = TempDir::new();
    let db = dir.db();
    let receiver = Receiver::start();
    receiver.set_default(Answer::status(500));
    let (hook, _) = add_webhook(&db, "ann", &receiver.url());
    let (s, ann) = run_ahead(db.to_str().unwrap(), "2d");
    create(&s, &ann, 1);
    eventually(Duration::from_secs(30), || row(&db, &hook).failures != "0");
    assert!(s.stop().success());
    receiver.set_default(Answer::ok());
    let _s = controlled(db.to_str().unwrap()).start();
    eventually(Duration::from_secs(30), || {
        row(&db, &hook).progress == "1/1"
    });
}
