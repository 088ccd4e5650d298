//! The change feed's log: GET /events as a JSON list, its events' exact bytes, its seqs
//! (gapless, per principal, over kill -9 and across instances), retention and 410. The
//! streams are in `event_streams.rs`.

use crate::support::*;
use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Every event of the test token's log, read page by page.
fn whole_log(s: &TestServer, token: &str) -> Vec<serde_json::Value> {
    let mut out: Vec<serde_json::Value> = Vec::new();
    loop {
        let after = out.last().map_or(0, |e| e["seq"].as_i64().unwrap());
        let r = events_as(s, token, &format!("?after={after}&limit=1000"));
        assert_eq!(r.status, 200, "{}", r.text());
        let page: Vec<serde_json::Value> = serde_json::from_slice(&r.body).unwrap();
        if page.is_empty() {
            return out;
        }
        out.extend(page);
    }
}

/// An event's exact text, as the contract writes it, from its parts.
fn expected(id: &str, seq: i64, kind: &str, ts: &str, data: &str) -> String {
    format!(r#"{{"id":"{id}","seq":{seq},"type":"{kind}","timestamp":"{ts}","data":{data}}}"#)
}

#[test]
fn each_committed_change_appends_one_event_and_a_refused_one_none() {
    let s = TestServer::memory();
    assert_eq!(
        s.post(r#"{"id":1,"name":"Monstera","tag":"tropical"}"#)
            .status,
        200
    );
    assert_eq!(s.post(r#"{"id":2,"name":"Fern \"x\"\n"}"#).status, 200);
    // Refused: a conflict, a bad body, a delete of nothing. None appends an event.
    assert_eq!(s.post(r#"{"id":1,"name":"again"}"#).status, 409);
    assert_eq!(s.post(r#"{"id":3}"#).status, 400);
    assert_eq!(s.delete("9").status, 404);
    assert_eq!(s.delete("1").status, 204);
    let r = s.get("/events");
    assert_eq!(r.status, 200);
    assert_eq!(r.header("Content-Type"), Some("application/json"));
    assert_eq!(r.header("Cache-Control"), Some("no-store"));
    assert_eq!(r.header("Vary"), Some("Accept"));
    let list = elements(&r.text());
    assert_eq!(list.len(), 3, "{list:?}");
    let mut ids = BTreeSet::new();
    let mut last_ts = String::new();
    let datas = [
        r#"{"id":1,"name":"Monstera","tag":"tropical"}"#,
        r#"{"id":2,"name":"Fern \"x\"\n"}"#,
        r#"{"id":1}"#,
    ];
    let kinds = ["plant.created", "plant.created", "plant.deleted"];
    for (n, text) in list.iter().enumerate() {
        let v: serde_json::Value = serde_json::from_str(text).unwrap();
        let id = v["id"].as_str().unwrap();
        assert!(
            id.len() == 36
                && id.starts_with("evt_")
                && id[4..].bytes().all(|b| b.is_ascii_hexdigit()),
            "{id}"
        );
        assert!(ids.insert(id.to_owned()), "ids are unique");
        let ts = v["timestamp"].as_str().unwrap();
        assert!(
            ts.len() == 24 && ts.ends_with('Z') && ts.as_bytes()[10] == b'T',
            "{ts}"
        );
        assert!(
            ts >= last_ts.as_str(),
            "time never goes back: {ts} after {last_ts}"
        );
        last_ts = ts.to_owned();
        assert_eq!(*text, expected(id, n as i64 + 1, kinds[n], ts, datas[n]));
    }
    // A window of the log, and an empty one.
    let r = s.get("/events?after=1&limit=1");
    assert_eq!(elements(&r.text()), [list[1].clone()]);
    assert_eq!(s.get("/events?limit=0").text(), "[]");
    assert_eq!(s.get("/events?after=3").text(), "[]");
    assert_eq!(
        s.metric("plant_store_events_appended_total"),
        3.0,
        "the refused change appended none"
    );
}

#[test]
fn the_feed_is_per_principal_and_checks_like_plants() {
    let dir = TempDir::new();
    let alice = add_token(&dir.db(), "alice", false);
    let bob = add_token(&dir.db(), "bob", false);
    let reader = add_token(&dir.db(), "alice", true);
    let s = TestServer::start(&dir.db());
    assert_eq!(s.post_as(&alice, r#"{"id":1,"name":"a"}"#).status, 200);
    assert_eq!(s.post_as(&bob, r#"{"id":1,"name":"b"}"#).status, 200);
    assert_eq!(s.post_as(&bob, r#"{"id":2,"name":"b2"}"#).status, 200);
    let a = whole_log(&s, &alice);
    let b = whole_log(&s, &bob);
    assert_eq!(a.len(), 1);
    assert_eq!(
        (a[0]["seq"].as_i64(), a[0]["data"]["name"].as_str()),
        (Some(1), Some("a"))
    );
    let seqs: Vec<i64> = b.iter().map(|e| e["seq"].as_i64().unwrap()).collect();
    assert_eq!(seqs, [1, 2], "each principal counts from 1");
    assert_eq!(
        whole_log(&s, &reader),
        a,
        "a read token reads its principal's feed"
    );
    check(
        &s,
        &[
            (
                Req::get("/events"),
                401,
                &[],
                err(401, "an Authorization: Bearer header is required"),
            ),
            (
                Req::get("/events?limt=5").token(&alice),
                400,
                &[],
                err(400, "unknown query parameter `limt`"),
            ),
            (
                Req::get("/events?after=1&after=2").token(&alice),
                400,
                &[],
                err(400, "query parameter `after` is given twice"),
            ),
            (
                Req::get("/events?after=-1").token(&alice),
                400,
                &[],
                err(
                    400,
                    "`after` must be an integer from 0 to 9223372036854775807, not `-1`",
                ),
            ),
            (
                Req::get("/events?limit=1001").token(&alice),
                400,
                &[],
                err(400, "`limit` must be an integer from 0 to 1000, not `1001`"),
            ),
            (
                Req::new("POST", "/events").token(&alice).json("{}"),
                405,
                &[("Allow", "GET")],
                err(405, "method not allowed here; allowed: GET"),
            ),
        ],
    );
    // The token is checked before the query.
    let r = s.send(
        "GET",
        "/events?limt=5",
        &[("Authorization", "Bearer nope")],
        None,
    );
    assert_eq!(r.status, 401);
    let r = Sse::open(&s, &alice, "/events?limit=5", &[]);
    assert_eq!(
        (
            r.head.status,
            String::from_utf8(r.head.body.clone()).unwrap()
        ),
        (
            400,
            err(400, "`limit` applies to the JSON list, not to a stream")
        )
    );
}

#[test]
fn retention_removes_old_events_a_read_below_them_is_410_and_seq_goes_on() {
    let s = Launch::memory().arg("--event-retention 1s").start();
    assert_eq!(s.post(r#"{"id":1,"name":"a"}"#).status, 200);
    assert_eq!(s.post(r#"{"id":2,"name":"b"}"#).status, 200);
    eventually(Duration::from_secs(10), || s.get("/events").status == 410);
    let r = s.get("/events?after=1");
    assert_eq!(
        (r.status, r.text()),
        (
            410,
            err(
                410,
                "events after 1 were removed by the retention; list the plants again, then read on after 2"
            )
        )
    );
    let sse = Sse::open(&s, TOKEN, "/events", &[("Last-Event-ID", "0")]);
    assert_eq!(
        sse.head.status, 410,
        "a stream that would miss events is refused"
    );
    assert_eq!(
        s.get("/events?after=2").text(),
        "[]",
        "nothing missed after 2"
    );
    assert_eq!(s.post(r#"{"id":3,"name":"c"}"#).status, 200);
    let log = whole_log_after(&s, 2);
    assert_eq!(log.len(), 1);
    assert_eq!(log[0]["seq"], 3, "seq never restarts");
    let r = s.get("/events?after=1");
    assert_eq!(
        (r.status, r.text()),
        (
            410,
            err(
                410,
                "events after 1 were removed by the retention; list the plants again, then read on after 3"
            )
        )
    );
}

/// A place past the end of the log (a consumer of a database restored from an older
/// backup) is 410 too, never an empty list that hides the events to come.
#[test]
fn a_read_after_the_end_of_the_log_is_410_and_names_where_to_read_on() {
    let s = TestServer::memory();
    let r = s.get("/events?after=1");
    assert_eq!(
        (r.status, r.text()),
        (
            410,
            err(
                410,
                "the log ends at 0, before 1; list the plants again, then read on after 0"
            )
        )
    );
    assert_eq!(s.post(r#"{"id":1,"name":"a"}"#).status, 200);
    assert_eq!(
        s.get("/events?after=1").text(),
        "[]",
        "the end itself is no gap"
    );
    let sse = Sse::open(&s, TOKEN, "/events", &[("Last-Event-ID", "5")]);
    assert_eq!(
        (
            sse.head.status,
            String::from_utf8(sse.head.body.clone()).unwrap()
        ),
        (
            410,
            err(
                410,
                "the log ends at 1, before 5; list the plants again, then read on after 1"
            )
        )
    );
}

fn whole_log_after(s: &TestServer, after: i64) -> Vec<serde_json::Value> {
    serde_json::from_slice(&s.get(&format!("/events?after={after}")).body).unwrap()
}

/// Writers record what was acknowledged; the server is killed with SIGKILL at a random
/// moment; after a restart the log has no gap, and every acknowledged change has its
/// event, in the order it was made.
#[test]
fn kill_9_under_writes_leaves_every_acknowledged_write_its_event_and_no_gap() {
    let dir = TempDir::new();
    let created = Arc::new(Mutex::new(BTreeSet::new()));
    for round in 0..2u64 {
        let s = TestServer::start(&dir.db());
        let writers: Vec<_> = (0..6u64)
            .map(|w| {
                let (addr, created) = (s.addr.clone(), created.clone());
                std::thread::spawn(move || {
                    for n in 0..100_000u64 {
                        let id = (round * 6 + w) * 1_000_000 + n;
                        let body = format!(r#"{{"id":{id},"name":"p{id}"}}"#);
                        match Req::create(&body).send_to(&addr).ok().map(|r| r.status) {
                            Some(200) => created.lock().unwrap().insert(id),
                            Some(other) => panic!("create {id} answered {other}"),
                            None => return,
                        };
                    }
                })
            })
            .collect();
        kill_at_a_random_moment(&s);
        for w in writers {
            w.join().expect("a writer saw a wrong answer");
        }
    }
    let s = TestServer::start(&dir.db());
    let log = whole_log(&s, TOKEN);
    let seqs: Vec<i64> = log.iter().map(|e| e["seq"].as_i64().unwrap()).collect();
    assert_eq!(
        seqs,
        (1..=log.len() as i64).collect::<Vec<_>>(),
        "no gap, no repeat"
    );
    let in_log: BTreeSet<u64> = log
        .iter()
        .map(|e| e["data"]["id"].as_u64().unwrap())
        .collect();
    assert_eq!(in_log.len(), log.len(), "one event per create");
    let created = created.lock().unwrap();
    assert!(created.len() > 10, "too little progress to test anything");
    for id in created.iter() {
        assert!(in_log.contains(id), "acknowledged create {id} has no event");
    }
    // An event without an acknowledgement is a write whose answer the kill cut off: its
    // plant is there too.
    let listed = listed_ids(&s);
    for id in &in_log {
        assert!(
            listed.contains(&(*id as i64)),
            "event for {id} without its plant"
        );
    }
}

#[test]
fn two_instances_writing_for_one_principal_keep_one_gapless_log() {
    if postgres_only("several instances share one database only on PostgreSQL") {
        return;
    }
    let dir = TempDir::new();
    let (a, b) = (TestServer::start(&dir.db()), TestServer::start(&dir.db()));
    // A stream on each instance sees the events written through both.
    let mut streams = [
        Sse::open(&a, TOKEN, "/events", &[]),
        Sse::open(&b, TOKEN, "/events", &[]),
    ];
    const EACH: i64 = 100;
    create_through(&[&a, &b], 3, EACH);
    let total = 6 * EACH;
    let log = whole_log(&a, TOKEN);
    assert_eq!(
        log,
        whole_log(&b, TOKEN),
        "one log, whichever instance reads it"
    );
    let seqs: Vec<i64> = log.iter().map(|e| e["seq"].as_i64().unwrap()).collect();
    assert_eq!(seqs, (1..=total).collect::<Vec<_>>());
    let mut times: Vec<&str> = log
        .iter()
        .map(|e| e["timestamp"].as_str().unwrap())
        .collect();
    let in_order = times.clone();
    times.sort();
    assert_eq!(times, in_order, "time never goes back within the log");
    for sse in &mut streams {
        for seq in 1..=total {
            let (id, _, data) = sse.next_event().expect("the stream goes on");
            assert_eq!(id, seq);
            let v: serde_json::Value = serde_json::from_str(&data).unwrap();
            assert_eq!(v, log[seq as usize - 1]);
        }
    }
}
