//! "Same run, same bytes" (docs/testing.md): with `--test-seed` and the clock frozen, the
//! same requests in the same order get byte-identical answer bodies, run after run, and
//! again after a reset but for the event ids (which never repeat). SQLite only, as test
//! control.

use crate::control::{controlled, ctl};
use crate::support::*;

/// Every answer body of a fixed script of requests, as bytes, in order. The journal is
/// read too, less its `duration_ms`, the one member that is real elapsed time.
fn script(s: &TestServer) -> Vec<(u16, Vec<u8>)> {
    let mut bodies = Vec::new();
    let mut keep = |r: &Resp| bodies.push((r.status, r.body.clone()));
    let frozen = r#"{"now":"2030-01-02T03:04:05.678Z","frozen":true}"#;
    keep(&s.request(&ctl("PUT", "/_control/clock").json(frozen)));
    let minted = s
        .request(&ctl("POST", "/_control/tokens").json(r#"{"principal":"ann","expires_in":"1d"}"#));
    keep(&minted);
    let token = minted.json()["token"].as_str().unwrap().to_owned();
    keep(&s.request(&ctl("POST", "/_control/faults").json(
        r#"{"match":{"method":"DELETE"},"action":{"kind":"status","status":503},"probability":0.5}"#,
    )));
    for id in 1..=4 {
        keep(&s.post_as(
            &token,
            &format!(r#"{{"id":{id},"name":"p{id}","tag":"t"}}"#),
        ));
    }
    keep(&s.request(&ctl("POST", "/_control/clock/advance").json(r#"{"by":"90s"}"#)));
    for id in 1..=4 {
        keep(&s.request(&Req::new("DELETE", &format!("/plants/{id}")).token(&token)));
    }
    keep(&s.request(&Req::get("/plants").token(&token)));
    keep(&s.request(&Req::get("/events?after=0").token(&token)));
    keep(&s.request(&ctl("POST", "/_control/snapshots")));
    keep(&s.request(&ctl("GET", "/_control/faults")));
    let journal = s.request(&ctl("GET", "/_control/requests"));
    let mut entries: serde_json::Value = journal.json();
    for e in entries.as_array_mut().unwrap() {
        e.as_object_mut().unwrap().remove("duration_ms");
    }
    bodies.push((journal.status, entries.to_string().into_bytes()));
    bodies
}

#[test]
fn a_seed_and_a_frozen_clock_give_the_same_bytes_run_after_run_and_after_a_reset_but_event_ids() {
    if no_test_control() {
        return;
    }
    let start = |seed: &str| {
        controlled(":memory:")
            .arg(&format!("--test-seed {seed}"))
            .start()
    };
    let (a, b, other) = (start("7"), start("7"), start("8"));
    let first = script(&a);
    // Something was made and answered: tokens, plants, events with ids, a fault that
    // fired by its seeded draw on some deletes and not on others.
    let statuses: Vec<u16> = first.iter().map(|(s, _)| *s).collect();
    assert_eq!(&statuses[..7], &[200, 201, 201, 200, 200, 200, 200]);
    let deletes = &statuses[8..12];
    assert!(
        deletes.iter().all(|s| *s == 204 || *s == 503),
        "{deletes:?}"
    );
    let text = |i: usize| String::from_utf8_lossy(&first[i].1).into_owned();
    assert!(text(13).contains("\"id\":\"evt_"), "{}", text(13));
    assert!(
        text(13).contains("2030-01-02T03:04:05.678Z"),
        "{}",
        text(13)
    );
    assert_eq!(
        script(&b),
        first,
        "another server, the same seed: the same bytes"
    );
    assert_ne!(script(&other), first, "another seed: other tokens and ids");
    // After a reset: the same bytes again, but for the event ids, which never repeat
    // (they are new ones, the same on every server after as many resets).
    for s in [&a, &b] {
        assert_eq!(s.request(&ctl("POST", "/_control/reset")).status, 204);
    }
    let again = script(&a);
    assert_eq!(
        again,
        script(&b),
        "another server, one reset: the same bytes"
    );
    assert!(again != first, "after a reset, the event ids came again");
    assert_eq!(
        without_event_ids(&again),
        without_event_ids(&first),
        "after a reset, the same bytes again but for the event ids"
    );
}

/// Each body with every event id (`evt_` and 32 hex digits) blanked.
fn without_event_ids(bodies: &[(u16, Vec<u8>)]) -> Vec<(u16, String)> {
    bodies
        .iter()
        .map(|(status, body)| {
            let text = String::from_utf8_lossy(body);
            let mut out = String::new();
            let mut rest = &*text;
            while let Some(at) = rest.find("evt_") {
                out.push_str(&rest[..at + 4]);
                let hex = rest[at + 4..]
                    .bytes()
                    .take_while(u8::is_ascii_hexdigit)
                    .count();
                assert_eq!(hex, 32, "{text}");
                out.push('…');
                rest = &rest[at + 4 + hex..];
            }
            out.push_str(rest);
            (*status, out)
        })
        .collect()
}
