//! Test control over the whole store: `--seed`, reset, snapshots, and the event streams
//! that end with a restore. SQLite only (docs/testing.md).

use crate::control::{
    CONTROL, controlled, create_as, ctl, list_as, mint, seed_file, serve_refused,
};
use crate::support::*;
use serde_json::json;
use std::time::Duration;

const SEED: &str = r#"{"tokens":[{"token":"alice-seeded-token","principal":"alice"},
    {"token":"bob-seeded-token","principal":"bob","scope":"read","expires_at":"2999-01-01T00:00:00Z"}],
  "plants":{"alice":[{"id":1,"name":"Monstera","tag":"tropical"},{"id":2,"name":"Fern"}],
            "bob":[{"id":1,"name":"Cactus"}]}}"#;

#[test]
fn a_seed_loads_before_listening_with_its_events() {
    if sqlite_only("seeds are SQLite's") {
        return;
    }
    let dir = TempDir::new();
    let seed = seed_file(&dir, SEED);
    // Without test control too.
    let s = Launch::memory().arg(&format!("--seed {seed}")).start();
    let alice = Req::get("/plants").token("alice-seeded-token");
    assert_eq!(
        s.request(&alice).text(),
        r#"[{"name":"Monstera","tag":"tropical"},{"name":"Fern"}]"#
    );
    let events = s
        .request(&Req::get("/events?limit=10").token("alice-seeded-token"))
        .json();
    let kinds: Vec<(i64, &str, i64)> = events
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["seq"].as_i64().unwrap(),
                e["type"].as_str().unwrap(),
                e["data"]["id"].as_i64().unwrap(),
            )
        })
        .collect();
    assert_eq!(kinds, [(1, "plant.created", 1), (2, "plant.created", 2)]);
    let bob = s.request(&Req::get("/plants").token("bob-seeded-token"));
    assert_eq!(bob.text(), r#"[{"name":"Cactus"}]"#);
    let r = s.request(&create_as("bob-seeded-token", r#"{"id":5,"name":"x"}"#));
    assert_eq!(r.status, 403, "bob's seeded token is read-only");
}

#[test]
fn a_bad_seed_refuses_the_start_names_the_place_and_applies_nothing() {
    if sqlite_only("seeds are SQLite's") {
        return;
    }
    let dir = TempDir::new();
    let db = dir.db();
    let db = db.to_str().unwrap();
    // A database that already holds alice's plant 9 and a stored token.
    let stored = add_token(dir.db().as_path(), "alice", false);
    {
        let s = TestServer::start(&dir.db());
        assert_eq!(s.post_as(&stored, r#"{"id":9,"name":"Kept"}"#).status, 200);
    }
    let cases: Vec<(String, &str)> = vec![
        ("{".into(), "not JSON"),
        (
            "[]".into(),
            "expected the seed to be a JSON object with `tokens` and `plants`",
        ),
        (r#"{"plant":{}}"#.into(), "plant: unknown member"),
        (
            r#"{"plants":{"alice":[{"id":1,"name":"a"},{"id":2,"name":"b"},{"id":3,"name":"c"},{"id":9,"name":"d"}]}}"#.into(),
            "plants.alice[3].id: principal alice already owns a plant with id 9",
        ),
        (
            r#"{"plants":{"alice":[{"id":1,"name":"a"},{"id":2,"name":"b"},{"id":3,"name":"c"},{"id":1,"name":"d"}]}}"#.into(),
            "plants.alice[3].id: id 1 is given twice for alice (first at plants.alice[0])",
        ),
        (
            r#"{"plants":{"alice":[{"id":1,"name":"a"},{"id":2}]}}"#.into(),
            "member `plants.alice[1].name` is required at line 1 column 48",
        ),
        (
            r#"{"plants":{"al ice":[]}}"#.into(),
            "plants.al ice: ",
        ),
        (
            format!(
                r#"{{"tokens":[{{"token":"fresh-token-1","principal":"x"}},{{"token":"{stored}","principal":"y"}}],"plants":{{"zed":[{{"id":1,"name":"z"}}]}}}}"#
            ),
            "tokens[1].token: this token is already stored",
        ),
        (
            r#"{"tokens":[{"token":"a-token","principal":"x","expires_at":"tomorrow"}]}"#.into(),
            "tokens[0].expires_at: must be an RFC 3339 time",
        ),
        (
            r#"{"tokens":[{"principal":"x"}]}"#.into(),
            "tokens[0].token: is required",
        ),
    ];
    for (text, place) in &cases {
        let path = dir.0.join("bad-seed.json");
        std::fs::write(&path, text).unwrap();
        let (code, e) = serve_refused(&["--db", db, "--seed", path.to_str().unwrap()], &[]);
        assert_eq!(code, 2, "{text}: {e}");
        assert!(e.contains(place), "{text}: wanted {place:?} in {e}");
        assert!(e.contains("nothing of it was loaded"), "{e}");
    }
    // The control token is no principal's: a seed may not store it.
    if !without(Feature::TestControl) {
        let path = dir.0.join("control-seed.json");
        std::fs::write(
            &path,
            format!(r#"{{"tokens":[{{"token":"{CONTROL}","principal":"x"}}]}}"#),
        )
        .unwrap();
        let (code, e) = serve_refused(
            &[
                "--db",
                db,
                "--test-control",
                "--seed",
                path.to_str().unwrap(),
            ],
            &[("PLANT_STORE_CONTROL_TOKEN", CONTROL)],
        );
        assert_eq!(code, 2, "{e}");
        assert!(
            e.contains("tokens[0].token: the control token is no principal's"),
            "{e}"
        );
        assert!(!e.contains(CONTROL), "{e}");
    }
    let (code, e) = serve_refused(&["--db", db, "--seed", "/nonexistent/seed.json"], &[]);
    assert_eq!(code, 2);
    assert!(
        e.contains("cannot read the seed file /nonexistent/seed.json"),
        "{e}"
    );
    // Nothing of any of them was applied: alice has her one plant and one event, and no
    // token of a refused seed was stored.
    let s = TestServer::start(&dir.db());
    assert_eq!(list_as(&s, &stored), r#"[{"name":"Kept"}]"#);
    let events = s
        .request(&Req::get("/events?limit=10").token(&stored))
        .json();
    assert_eq!(events.as_array().unwrap().len(), 1, "{events}");
    assert_eq!(
        s.request(&Req::get("/plants").token("fresh-token-1"))
            .status,
        401
    );
}

#[test]
fn reset_brings_back_the_store_as_it_was_at_start() {
    if no_test_control() {
        return;
    }
    let dir = TempDir::new();
    let seed = seed_file(&dir, SEED);
    let db = dir.db();
    for db in [":memory:", db.to_str().unwrap()] {
        let s = controlled(db).arg(&format!("--seed {seed}")).start();
        let alice = "alice-seeded-token";
        let minted = mint(&s, r#"{"principal":"carol"}"#);
        let minted = minted["token"].as_str().unwrap();
        assert_eq!(
            s.post_as(minted, r#"{"id":1,"name":"Carol's"}"#).status,
            200
        );
        assert_eq!(s.post_as(alice, r#"{"id":3,"name":"New"}"#).status, 200);
        assert_eq!(
            s.request(&Req::new("DELETE", "/plants/1").token(alice))
                .status,
            204
        );
        // On the file: a token and a webhook endpoint added with the CLI since the start.
        let cli = (db != ":memory:").then(|| add_token(&dir.db(), "dave", false));
        let hooks = || {
            let (code, out, e) = run_cli(&["webhook", "list", "--db", db]);
            assert_eq!(code, 0, "{e}");
            out
        };
        // The endpoint only in a build with webhooks.
        let hook = cli.is_some() && !without(Feature::Webhooks);
        if hook {
            let (code, _, e) =
                run_cli(&["webhook", "add", "alice", "http://127.0.0.1:9/", "--db", db]);
            assert_eq!(code, 0, "{e}");
            assert!(hooks().contains("http://127.0.0.1:9/"));
        }
        s.request(&ctl("POST", "/_control/snapshots"));
        check(
            &s,
            &[(ctl("POST", "/_control/reset"), 204, &[], String::new())],
        );
        // Plants, tokens (minted and added with the CLI since), events and their seq.
        assert_eq!(
            list_as(&s, alice),
            r#"[{"name":"Monstera","tag":"tropical"},{"name":"Fern"}]"#
        );
        assert_eq!(s.request(&Req::get("/plants").token(minted)).status, 401);
        if let Some(cli) = cli {
            assert_eq!(s.request(&Req::get("/plants").token(&cli)).status, 401);
            assert!(
                !hook || !hooks().contains("http://127.0.0.1:9/"),
                "{}",
                hooks()
            );
        }
        let events = s.request(&Req::get("/events?limit=10").token(alice)).json();
        assert_eq!(events.as_array().unwrap().len(), 2, "{events}");
        assert_eq!(s.post_as(alice, r#"{"id":4,"name":"After"}"#).status, 200);
        let events = s
            .request(&Req::get("/events?after=2&limit=10").token(alice))
            .json();
        assert_eq!(events[0]["seq"], 3, "the next event's seq: {events}");
        // Snapshots and the journal were cleared too.
        let r = s.request(&ctl("GET", "/_control/requests"));
        let journal = r.json();
        let since = if db == ":memory:" { 5 } else { 6 };
        assert_eq!(journal.as_array().unwrap().len(), since, "{journal}");
        assert_eq!(journal[0]["n"], 1);
        assert_eq!(journal[0]["path"], "/plants");
        let gone = s.request(&ctl("POST", "/_control/snapshots/snap_0/restore"));
        assert_eq!(gone.status, 404);
    }
}

#[test]
fn snapshots_restore_the_whole_store_and_are_bounded() {
    if no_test_control() {
        return;
    }
    let s = controlled(":memory:").start();
    let me = mint(&s, r#"{"principal":"erin"}"#);
    let me = me["token"].as_str().unwrap().to_owned();
    assert_eq!(s.post_as(&me, r#"{"id":1,"name":"One"}"#).status, 200);
    let r = s.request(&ctl("POST", "/_control/snapshots"));
    assert_eq!(r.status, 201);
    let id = r.json()["id"].as_str().unwrap().to_owned();
    assert!(id.starts_with("snap_") && id.len() == 21, "{id}");
    assert_eq!(r.json(), json!({ "id": id }));
    // After the snapshot: a plant, a deletion, a token.
    assert_eq!(s.post_as(&me, r#"{"id":2,"name":"Two"}"#).status, 200);
    assert_eq!(
        s.request(&Req::new("DELETE", "/plants/1").token(&me))
            .status,
        204
    );
    let later = mint(&s, r#"{"principal":"erin"}"#);
    let later = later["token"].as_str().unwrap().to_owned();
    let restore = format!("/_control/snapshots/{id}/restore");
    check(&s, &[(ctl("POST", &restore), 204, &[], String::new())]);
    assert_eq!(list_as(&s, &me), r#"[{"name":"One"}]"#);
    assert_eq!(s.request(&Req::get("/plants").token(&later)).status, 401);
    assert_eq!(s.post_as(&me, r#"{"id":3,"name":"Three"}"#).status, 200);
    let events = s
        .request(&Req::get("/events?after=1&limit=10").token(&me))
        .json();
    assert_eq!(events[0]["seq"], 2, "the next event's seq: {events}");
    // Restored again: a snapshot is kept until deleted.
    check(&s, &[(ctl("POST", &restore), 204, &[], String::new())]);
    assert_eq!(list_as(&s, &me), r#"[{"name":"One"}]"#);
    let unknown = "/_control/snapshots/snap_nope";
    check(
        &s,
        &[
            (
                ctl("DELETE", &format!("/_control/snapshots/{id}")),
                204,
                &[],
                String::new(),
            ),
            (
                ctl("POST", &restore),
                404,
                &[],
                err(404, &format!("no snapshot {id}")),
            ),
            (
                ctl("DELETE", unknown),
                404,
                &[],
                err(404, "no snapshot snap_nope"),
            ),
            (
                ctl("POST", "/_control/snapshots?x=1"),
                400,
                &[],
                err(400, "unknown query parameter `x`"),
            ),
        ],
    );
    // At most 16; one more is 409.
    for _ in 0..16 {
        assert_eq!(s.request(&ctl("POST", "/_control/snapshots")).status, 201);
    }
    check(
        &s,
        &[(
            ctl("POST", "/_control/snapshots"),
            409,
            &[],
            err(409, "at most 16 snapshots are kept; delete one first"),
        )],
    );
}

#[test]
fn open_event_streams_end_at_a_reset() {
    if no_test_control() {
        return;
    }
    let s = controlled(":memory:").start();
    let me = mint(&s, r#"{"principal":"frank"}"#);
    let me = me["token"].as_str().unwrap().to_owned();
    let mut stream = Sse::open(&s, &me, "/events", &[]);
    assert_eq!(stream.head.status, 200);
    stream.set_timeout(Duration::from_secs(10));
    let started = std::time::Instant::now();
    assert_eq!(s.request(&ctl("POST", "/_control/reset")).status, 204);
    while stream.next().is_some() {}
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
}

#[test]
fn no_request_sees_half_a_restore() {
    if no_test_control() {
        return;
    }
    let dir = TempDir::new();
    let db = dir.db();
    for db in [":memory:", db.to_str().unwrap()] {
        let s = controlled(db).start();
        let me = mint(&s, r#"{"principal":"hana"}"#);
        let me = me["token"].as_str().unwrap().to_owned();
        let snapshot = |s: &TestServer| {
            let r = s.request(&ctl("POST", "/_control/snapshots"));
            assert_eq!(r.status, 201);
            r.json()["id"].as_str().unwrap().to_owned()
        };
        // Two states with nothing in common: 40 plants a…, then 40 others b….
        for id in 1..=40 {
            let body = format!(r#"{{"id":{id},"name":"a{id}"}}"#);
            assert_eq!(s.post_as(&me, &body).status, 200);
        }
        let a = snapshot(&s);
        let list_a = list_as(&s, &me);
        for id in 1..=40 {
            let r = s.request(&Req::new("DELETE", &format!("/plants/{id}")).token(&me));
            assert_eq!(r.status, 204);
            let body = format!(r#"{{"id":{},"name":"b{id}"}}"#, id + 40);
            assert_eq!(s.post_as(&me, &body).status, 200);
        }
        let b = snapshot(&s);
        let list_b = list_as(&s, &me);
        let done = std::sync::atomic::AtomicBool::new(false);
        std::thread::scope(|scope| {
            for _ in 0..3 {
                scope.spawn(|| {
                    let mut seen = 0;
                    while !done.load(std::sync::atomic::Ordering::Relaxed) || seen == 0 {
                        let list = list_as(&s, &me);
                        assert!(list == list_a || list == list_b, "half a restore: {list}");
                        seen += 1;
                    }
                });
            }
            for round in 0..20 {
                let id = if round % 2 == 0 { &a } else { &b };
                let path = format!("/_control/snapshots/{id}/restore");
                assert_eq!(s.request(&ctl("POST", &path)).status, 204);
            }
            done.store(true, std::sync::atomic::Ordering::Relaxed);
        });
        assert_eq!(list_as(&s, &me), list_b);
    }
}
