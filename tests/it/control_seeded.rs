//! `--test-seed N` (docs/control.md, "Same run, same bytes"): event ids, snapshot ids and
//! the tokens minted at run time come from a generator seeded with N, restarted by a
//! reset; two servers with one seed and the same requests make the same ones. SQLite
//! only, as test control.

use crate::control::{controlled, ctl, mint, seed_file, serve_refused};
use crate::support::*;
use crate::webhooks::{add_webhook, create};
use serde_json::Value;
use std::time::Duration;

/// What a run of `script` made that a seed decides: the minted tokens (each with its
/// principal), the snapshot ids, every event id of both principals, oldest first.
#[derive(Debug, PartialEq, Eq)]
struct Made {
    tokens: Vec<String>,
    snapshots: Vec<String>,
    events: Vec<String>,
}

/// The same requests, in the same order: two principals minted, creates and a delete,
/// two snapshots (one removed), and the events read back.
fn script(s: &TestServer) -> Made {
    let mut made = Made {
        tokens: Vec::new(),
        snapshots: Vec::new(),
        events: Vec::new(),
    };
    for principal in ["ann", "bob"] {
        let minted = mint(s, &format!(r#"{{"principal":"{principal}"}}"#));
        let token = minted["token"].as_str().unwrap().to_owned();
        // The format of every token: 64 lowercase hex digits.
        assert_eq!(token.len(), 64, "{token}");
        assert!(
            token
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)),
            "{token}"
        );
        made.tokens.push(token);
    }
    for (i, token) in made.tokens.iter().enumerate() {
        for id in 1..=3 {
            let r = s.post_as(token, &format!(r#"{{"id":{id},"name":"p{i}-{id}"}}"#));
            assert_eq!(r.status, 200, "{}", r.text());
        }
        let r = s.request(&Req::new("DELETE", "/plants/2").token(token));
        assert_eq!(r.status, 204, "{}", r.text());
        let r = s.request(&ctl("POST", "/_control/snapshots"));
        assert_eq!(r.status, 201, "{}", r.text());
        made.snapshots
            .push(r.json()["id"].as_str().unwrap().to_owned());
    }
    let gone = format!("/_control/snapshots/{}", made.snapshots[0]);
    assert_eq!(s.request(&ctl("DELETE", &gone)).status, 204);
    for token in &made.tokens {
        made.events.extend(events_of(s, token));
    }
    made
}

/// The ids of the caller's events, oldest first.
fn events_of(s: &TestServer, token: &str) -> Vec<String> {
    let r = s.request(&Req::get("/events?after=0").token(token));
    assert_eq!(r.status, 200, "{}", r.text());
    let events: Value = r.json();
    events
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["id"].as_str().unwrap().to_owned())
        .collect()
}

/// A server on `:memory:` with test control and `--test-seed seed`.
fn seeded(seed: &str) -> Launch<'static> {
    controlled(":memory:").arg(&format!("--test-seed {seed}"))
}

#[test]
fn one_seed_makes_the_same_ids_and_a_reset_makes_them_again_but_event_ids() {
    if no_test_control() {
        return;
    }
    let dir = TempDir::new();
    // A seeded plant: its event is drawn before the server listens, and the reset's
    // generator starts after it.
    let seed = seed_file(&dir, r#"{"plants":{"carl":[{"id":1,"name":"Monstera"}]}}"#);
    let start = |n: &str| seeded(n).arg(&format!("--seed {seed}")).start();
    let (a, b, other) = (start("42"), start("42"), start("43"));
    let first = script(&a);
    assert_eq!(first.tokens.len(), 2);
    assert_eq!(first.snapshots.len(), 2);
    // 3 creates and a delete for each principal.
    assert_eq!(first.events.len(), 8);
    assert_eq!(script(&b), first, "the same seed, the same requests");
    let differs = script(&other);
    assert_ne!(differs.tokens, first.tokens);
    assert_ne!(differs.snapshots, first.snapshots);
    assert_ne!(differs.events, first.events);
    // All distinct within a run.
    let mut all: Vec<&String> = first.events.iter().collect();
    all.sort();
    all.dedup();
    assert_eq!(all.len(), 8);
    // The seed file's event, made before listening, is the same on both servers.
    let seeded_token = mint(&a, r#"{"principal":"carl"}"#);
    let carl = seeded_token["token"].as_str().unwrap().to_owned();
    let on_a = events_of(&a, &carl);
    let seeded_token = mint(&b, r#"{"principal":"carl"}"#);
    assert_eq!(events_of(&b, seeded_token["token"].as_str().unwrap()), on_a);
    // A reset: the generators are where they were when the server began listening, but
    // for the event ids', which never come again (mixed with the reset's number): the
    // same on another server after as many resets.
    let reset = |s: &TestServer| assert_eq!(s.request(&ctl("POST", "/_control/reset")).status, 204);
    reset(&a);
    let second = script(&a);
    assert_eq!(
        (&second.tokens, &second.snapshots),
        (&first.tokens, &first.snapshots),
        "after a reset, the same tokens and snapshot ids again"
    );
    reset(&a);
    let third = script(&a);
    assert_eq!(
        (&third.tokens, &third.snapshots),
        (&first.tokens, &first.snapshots)
    );
    let mut events: Vec<&String> = [&first, &second, &third]
        .iter()
        .flat_map(|m| &m.events)
        .collect();
    assert_eq!(events.len(), 24);
    events.sort();
    events.dedup();
    assert_eq!(events.len(), 24, "an event id came again after a reset");
    reset(&b);
    assert_eq!(
        script(&b),
        second,
        "another server, one reset: the same ids"
    );
}

/// A delivery's `webhook-id` is its event's id: seeded too, the same on two servers with
/// one seed, and never again after a reset (a receiver that drops a `webhook-id` it has
/// seen loses no event), the same again on both servers.
#[test]
fn webhook_ids_follow_the_seed() {
    if no_test_control() || without(Feature::Webhooks) {
        return;
    }
    let dir = TempDir::new();
    let run = |name: &str| {
        let db = dir.0.join(name);
        let rx = Receiver::start();
        add_webhook(&db, "ann", &rx.url());
        let db = db.to_str().unwrap().to_owned();
        let s = controlled(&db).arg("--test-seed 5").start();
        let ids = |s: &TestServer, from: usize| {
            let ann = mint(s, r#"{"principal":"ann"}"#);
            for id in 1..=2 {
                create(s, ann["token"].as_str().unwrap(), id);
            }
            let got = rx.wait_for(from + 2, Duration::from_secs(10));
            got[from..]
                .iter()
                .map(|r| r.header("webhook-id").unwrap().to_owned())
                .collect::<Vec<_>>()
        };
        let first = ids(&s, 0);
        assert_eq!(s.request(&ctl("POST", "/_control/reset")).status, 204);
        let second = ids(&s, 2);
        assert!(
            second.iter().all(|id| !first.contains(id)),
            "after a reset, a webhook-id came again: {first:?} {second:?}"
        );
        [first, second].concat()
    };
    let a = run("a.db");
    assert_eq!(run("b.db"), a, "one seed, the same webhook-ids");
    assert!(a.iter().all(|id| id.starts_with("evt_")), "{a:?}");
}

/// On a file that kept an earlier run's tokens, the same seed draws the same tokens
/// again: a token already stored is drawn again, not refused.
#[test]
fn a_token_drawn_that_is_already_stored_is_drawn_again() {
    if no_test_control() {
        return;
    }
    let dir = TempDir::new();
    let db = dir.db();
    let db = db.to_str().unwrap();
    let first = {
        let s = controlled(db).arg("--test-seed 3").start();
        mint(&s, r#"{"principal":"eve"}"#)["token"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    let s = controlled(db).arg("--test-seed 3").start();
    let second = mint(&s, r#"{"principal":"eve"}"#)["token"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_ne!(second, first);
    for token in [&first, &second] {
        assert_eq!(s.request(&Req::get("/plants").token(token)).status, 200);
    }
    // The next server on a fresh store draws `first` first, as the first did.
    let fresh = seeded("3").start();
    assert_eq!(
        mint(&fresh, r#"{"principal":"eve"}"#)["token"],
        first.as_str()
    );
}

/// On a file that kept an earlier run's events, the same seed never draws again an event
/// id the store holds (a receiver that drops a `webhook-id` it has seen would lose the
/// event); a fresh store, file or `:memory:`, draws the same ids every run.
#[test]
fn a_seed_on_a_reused_file_repeats_no_event_id_the_store_holds() {
    if no_test_control() {
        return;
    }
    let dir = TempDir::new();
    let db = dir.db();
    let db = db.to_str().unwrap();
    // Two plants of ann's, ids `first..first + 2`: their events' ids, oldest first.
    let run = |s: &TestServer, first: i64| {
        let ann = mint(s, r#"{"principal":"ann"}"#);
        let token = ann["token"].as_str().unwrap();
        for id in first..first + 2 {
            let r = s.post_as(token, &format!(r#"{{"id":{id},"name":"p{id}"}}"#));
            assert_eq!(r.status, 200, "{}", r.text());
        }
        events_of(s, token)
    };
    let on_file = run(&controlled(db).arg("--test-seed 5").start(), 1);
    let held = run(&controlled(db).arg("--test-seed 5").start(), 3);
    assert_eq!(held.len(), 4, "{held:?}");
    assert_eq!(held[..2], on_file[..], "the first run's events are kept");
    let mut distinct = held.clone();
    distinct.sort();
    distinct.dedup();
    assert_eq!(distinct.len(), 4, "an id drawn again: {held:?}");
    // Fresh stores: the same ids every run, and a fresh file's are :memory:'s.
    let fresh = run(&seeded("5").start(), 1);
    assert_eq!(run(&seeded("5").start(), 1), fresh);
    assert_eq!(fresh, on_file);
}

/// A run whose last reset puts its file back as it began leaves the file's events as
/// they were: the next run on the file still draws event ids of its own (each start with
/// test control counts in the file), so a receiver that drops a `webhook-id` it has seen
/// loses nothing across runs.
#[test]
fn a_run_on_a_file_a_reset_put_back_draws_new_event_ids() {
    if no_test_control() {
        return;
    }
    let dir = TempDir::new();
    let db = dir.db();
    let db = db.to_str().unwrap();
    let run = || {
        let s = controlled(db).arg("--test-seed 5").start();
        let ann = mint(&s, r#"{"principal":"ann"}"#);
        let token = ann["token"].as_str().unwrap();
        let r = s.post_as(token, r#"{"id":1,"name":"p1"}"#);
        assert_eq!(r.status, 200, "{}", r.text());
        let made = events_of(&s, token);
        assert_eq!(s.request(&ctl("POST", "/_control/reset")).status, 204);
        made
    };
    let (first, second, third) = (run(), run(), run());
    assert_eq!(first.len(), 1, "{first:?}");
    assert_ne!(first, second, "the second run drew the first's event id");
    assert_ne!(second, third, "the third run drew the second's event id");
    assert_ne!(first, third, "the third run drew the first's event id");
}

/// A snapshot restore is no reset: the generator goes on, and the ids after it are new.
#[test]
fn a_restore_does_not_restart_the_generator() {
    if no_test_control() {
        return;
    }
    let s = seeded("7").start();
    let snap = s.request(&ctl("POST", "/_control/snapshots")).json();
    let id = snap["id"].as_str().unwrap();
    let before = mint(&s, r#"{"principal":"dee"}"#);
    let restore = format!("/_control/snapshots/{id}/restore");
    assert_eq!(s.request(&ctl("POST", &restore)).status, 204);
    let after = mint(&s, r#"{"principal":"dee"}"#);
    assert_ne!(after["token"], before["token"]);
}

/// Without `--test-seed` ids are the operating system's: two servers differ.
#[test]
fn without_a_seed_two_servers_make_different_ids() {
    if no_test_control() {
        return;
    }
    let (a, b) = (
        controlled(":memory:").start(),
        controlled(":memory:").start(),
    );
    let (x, y) = (script(&a), script(&b));
    assert_ne!(x.tokens, y.tokens);
    assert_ne!(x.snapshots, y.snapshots);
    assert_ne!(x.events, y.events);
}

#[test]
fn a_test_seed_needs_test_control_and_a_whole_number() {
    // Without the feature, `--test-seed` is refused whole (options.rs).
    if without(Feature::TestControl) {
        return;
    }
    let (code, err) = serve_refused(&["--db", ":memory:", "--test-seed", "7"], &[]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--test-seed needs --test-control"), "{err}");
    let (code, err) = serve_refused(&["--db", ":memory:"], &[("PLANT_STORE_TEST_SEED", "7")]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("PLANT_STORE_TEST_SEED needs --test-control"),
        "{err}"
    );
    let control = [("PLANT_STORE_CONTROL_TOKEN", crate::control::CONTROL)];
    for bad in ["-1", "seven", "18446744073709551616", ""] {
        let (code, err) = serve_refused(
            &["--db", ":memory:", "--test-control", "--test-seed", bad],
            &control,
        );
        assert_eq!(code, 2, "{bad}: {err}");
        assert!(
            err.contains("--test-seed must be a whole number from 0 to 18446744073709551615"),
            "{bad}: {err}"
        );
    }
}
