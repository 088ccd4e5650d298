//! What a restore (or a reset) of test control ends, with the `fault-injection` feature
//! to hold a request at the moment that matters: a stream checked just before it, a
//! long list between two pages, a webhook attempt under way. SQLite only
//! (docs/testing.md).
#![cfg(feature = "fault-injection")]

use crate::control::{controlled, ctl, list_as, mint, seed_file};
use crate::support::*;
use crate::webhooks::{add_webhook, row};
use std::time::Duration;

/// A stream that checked its position before a restore, but reaches the streams' thread
/// after that thread saw the restore, ends too: its position belongs to the store before
/// (kept, it would skip the restored log's events up to it).
#[test]
fn a_stream_checked_before_a_restore_ends_after_it() {
    if no_test_control() {
        return;
    }
    // A file: the held request's read does not lock the restore out, as on `:memory:`.
    let dir = TempDir::new();
    let db = dir.db();
    let s = controlled(db.to_str().unwrap()).start();
    let me = mint(&s, r#"{"principal":"gail"}"#);
    let me = me["token"].as_str().unwrap().to_owned();
    let r = s.request(&ctl("POST", "/_control/snapshots"));
    assert_eq!(r.status, 201);
    let empty = r.json()["id"].as_str().unwrap().to_owned();
    for id in 1..=3 {
        assert_eq!(
            s.post_as(&me, &format!(r#"{{"id":{id},"name":"old"}}"#))
                .status,
            200
        );
    }
    assert_eq!(
        s.send("GET", "/__fault/hold-stream-checks", &[], None)
            .status,
        200
    );
    std::thread::scope(|scope| {
        // Checked at seq 3 of the store before the restore, then held.
        let opening = scope.spawn(|| Sse::open(&s, &me, "/events?after=3", &[]));
        s.log_when(|l| l.contains("holding an event stream after its check"));
        let restore = format!("/_control/snapshots/{empty}/restore");
        assert_eq!(s.request(&ctl("POST", &restore)).status, 204);
        // The streams' thread has seen the restore (with no stream open) before this
        // one reaches it.
        std::thread::sleep(Duration::from_millis(300));
        assert_eq!(
            s.send("GET", "/__fault/release-stream-checks", &[], None)
                .status,
            200
        );
        let mut stream = opening.join().unwrap();
        assert_eq!(stream.head.status, 200);
        stream.set_timeout(Duration::from_secs(10));
        // The restored log reaches seq 4: a stream kept at 3 would show event 4 alone.
        for id in 1..=4 {
            assert_eq!(
                s.post_as(&me, &format!(r#"{{"id":{id},"name":"new"}}"#))
                    .status,
                200
            );
        }
        let started = std::time::Instant::now();
        while let Some(m) = stream.next() {
            assert!(
                matches!(m, Message::Comment(_)),
                "an event after a restore: {m:?}"
            );
            assert!(
                started.elapsed() < Duration::from_secs(5),
                "the stream was kept"
            );
        }
    });
}

/// A long list that a reset meets between two pages is cut (its connection closes
/// before the body's end), never a complete answer made of both stores.
#[test]
fn a_long_list_under_way_at_a_reset_is_cut() {
    if no_test_control() {
        return;
    }
    // The start: alice's plants 1 to 300 (two pages of 256).
    let plants: Vec<String> = (1..=300)
        .map(|id| format!(r#"{{"id":{id},"name":"p{id}"}}"#))
        .collect();
    let seed = format!(
        r#"{{"tokens":[{{"token":"alice-seeded-token","principal":"alice"}}],"plants":{{"alice":[{}]}}}}"#,
        plants.join(",")
    );
    let dir = TempDir::new();
    let seed = seed_file(&dir, &seed);
    let db = dir.db();
    let s = controlled(db.to_str().unwrap())
        .arg(&format!("--seed {seed}"))
        .start();
    let alice = "alice-seeded-token";
    let at_start = names(&list_as(&s, alice));
    // Then: 2 to 301. A first page of now and a second of the start would be 2 to 300.
    let gone = s.request(&Req::new("DELETE", "/plants/1").token(alice));
    assert_eq!(gone.status, 204);
    assert_eq!(s.post_as(alice, r#"{"id":301,"name":"p301"}"#).status, 200);
    let now = names(&list_as(&s, alice));
    assert_eq!(
        s.send("GET", "/__fault/hold-list-pages", &[], None).status,
        200
    );
    let mut c = s.connect();
    std::io::Write::write_all(&mut c, &Req::get("/plants").token(alice).bytes()).unwrap();
    s.log_when(|l| l.contains("holding a list's next page"));
    assert_eq!(s.request(&ctl("POST", "/_control/reset")).status, 204);
    assert_eq!(
        s.send("GET", "/__fault/release-list-pages", &[], None)
            .status,
        200
    );
    match read_response(&mut c) {
        Err(_) => {}
        Ok(r) => {
            let got = names(&r.text());
            let whole = if got == at_start || got == now {
                "one store's"
            } else {
                "half a reset"
            };
            panic!(
                "a complete list across a reset ({whole}): {} plants",
                got.len()
            );
        }
    }
    s.log_when(|l| l.contains("a list is cut: the store was restored"));
}

/// A webhook attempt under way at a restore: its answer is not recorded against the
/// restored endpoint (whose next seq is now another event), and that event is delivered
/// with its own id.
#[test]
fn an_attempt_under_way_at_a_restore_does_not_move_the_restored_cursor() {
    if without(Feature::Webhooks) {
        return;
    }
    if no_test_control() {
        return;
    }
    let dir = TempDir::new();
    let db = dir.db();
    let receiver = Receiver::start();
    let (hook, _) = add_webhook(&db, "ivy", &receiver.url());
    let me = add_token(&db, "ivy", false);
    let s = controlled(db.to_str().unwrap())
        .arg("--webhook-schedule 1s")
        .start();
    // Event 1 delivered: the endpoint's row names this process as its lease's owner.
    assert_eq!(s.post_as(&me, r#"{"id":1,"name":"first"}"#).status, 200);
    receiver.wait_for(1, Duration::from_secs(10));
    eventually(Duration::from_secs(10), || {
        row(&db, &hook).progress == "1/1"
    });
    let r = s.request(&ctl("POST", "/_control/snapshots"));
    assert_eq!(r.status, 201);
    let restore = format!(
        "/_control/snapshots/{}/restore",
        r.json()["id"].as_str().unwrap()
    );
    // Event 2 (a): its attempt is held 3 s, and the store restored meanwhile.
    receiver.push(Answer::ok().after(Duration::from_secs(3)));
    assert_eq!(s.post_as(&me, r#"{"id":2,"name":"before"}"#).status, 200);
    let held = receiver.wait_for(2, Duration::from_secs(10));
    assert_eq!(held[1].seq(), 2);
    assert_eq!(s.request(&ctl("POST", &restore)).status, 204);
    // Event 2 (b) of the restored store.
    assert_eq!(s.post_as(&me, r#"{"id":3,"name":"after"}"#).status, 200);
    let events = s
        .request(&Req::get("/events?after=1&limit=10").token(&me))
        .json();
    let b = events[0]["id"].as_str().unwrap().to_owned();
    assert_eq!(events[0]["seq"], 2);
    assert_ne!(held[1].header("webhook-id"), Some(b.as_str()));
    eventually(Duration::from_secs(15), || {
        receiver
            .requests()
            .iter()
            .any(|r| r.header("webhook-id") == Some(b.as_str()))
    });
    eventually(Duration::from_secs(10), || {
        row(&db, &hook).progress == "2/2"
    });
}
