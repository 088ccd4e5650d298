//! A reset and a snapshot restore are barriers (docs/control.md, "Reset"): every request
//! is wholly before one or wholly after it, no reset waits on a reader that waits on it,
//! and a request or a webhook attempt held by a `delay` fault when a reset, a restore or
//! the stop comes is answered 503 (`Retry-After: 1`) at once and not carried out.
//! SQLite only, as test control.

use crate::control::{ALICE, alice_seed, controlled, ctl, list_as, mint, snapshot};
use crate::faults::{fault, faults, plant};
use crate::support::*;
use crate::webhooks::{add_webhook, create};
use serde_json::json;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

/// Rounds of the race per kind of store and barrier (`a_write_…`).
const ROUNDS: usize = 15;
/// Writers racing each round.
const WRITERS: i64 = 8;

/// A token minted for `principal`.
fn token_of(s: &TestServer, principal: &str) -> String {
    mint(s, &json!({ "principal": principal }).to_string())["token"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// Writers that create plants with a token until it is refused, racing a reset (or a
/// restore to a snapshot taken before the token was made); a fault that matches nothing
/// is defined in every other round, and every other writer names its target in absolute
/// form (`http://HOST/plants`, which the barrier must see as `/plants` too). After the barrier, the token's principal has
/// nothing: a write authenticated before it was committed before it (and undone), and
/// one after it was refused 401, never committed into the store after it.
fn writes_never_cross(db: &str, restore: bool) {
    let s = controlled(db).arg("--workers 8").start();
    let snap = snapshot(&s);
    let barrier = match restore {
        true => format!("/_control/snapshots/{snap}/restore"),
        false => "/_control/reset".to_owned(),
    };
    for round in 0..ROUNDS {
        if round % 2 == 1 {
            fault(
                &s,
                json!({"match":{"principal":"nobody"},"action":{"kind":"status","status":503}}),
            );
        }
        let name = format!("race{round}");
        let token = token_of(&s, &name);
        let written = Arc::new(AtomicUsize::new(0));
        let writers: Vec<_> = (0..WRITERS)
            .map(|k| {
                let (addr, token, written) = (s.addr.clone(), token.clone(), written.clone());
                std::thread::spawn(move || {
                    let target = match k % 2 {
                        0 => "/plants".to_owned(),
                        _ => format!("http://{addr}/plants"),
                    };
                    let mut i = 0;
                    loop {
                        i += 1;
                        let body = plant(k * 1_000_000 + i);
                        let r = Req::new("POST", &target).token(&token).json(&body);
                        let r = r.send_to(&addr).unwrap();
                        if r.status != 200 {
                            return (r.status, r.text());
                        }
                        written.fetch_add(1, Ordering::Relaxed);
                    }
                })
            })
            .collect();
        eventually(Duration::from_secs(10), || {
            written.load(Ordering::Relaxed) >= 2 * WRITERS as usize
        });
        assert_eq!(s.request(&ctl("POST", &barrier)).status, 204);
        for w in writers {
            let (status, body) = w.join().unwrap();
            assert_eq!(status, 401, "{body}");
        }
        let again = token_of(&s, &name);
        assert_eq!(
            list_as(&s, &again),
            "[]",
            "round {round}: a write by a token the barrier removed is in the store after it"
        );
        let events = s.request(&Req::get("/events?after=0").token(&again));
        assert_eq!(events.text(), "[]", "round {round}");
    }
}

#[test]
fn a_write_authenticated_before_a_reset_or_restore_is_never_committed_after_it() {
    if no_test_control() {
        return;
    }
    let dir = TempDir::new();
    for (db, restore) in [(":memory:", false), (":memory:", true)] {
        writes_never_cross(db, restore);
    }
    for (name, restore) in [("reset.db", false), ("restore.db", true)] {
        let db = dir.0.join(name);
        writes_never_cross(db.to_str().unwrap(), restore);
    }
}

/// Rounds of the snapshot's race with a reset.
const SNAPSHOT_ROUNDS: usize = 150;

/// A snapshot taken while a reset runs is wholly before it (the reset clears it: its
/// restore is 404) or wholly after it (a copy of the reset store): never a copy of the
/// store before the reset that the reset left in place.
#[test]
fn a_snapshot_is_wholly_before_or_wholly_after_a_reset() {
    if no_test_control() {
        return;
    }
    let dir = TempDir::new();
    let s = controlled(":memory:")
        .arg(&format!("--seed {}", alice_seed(&dir, false)))
        .start();
    for round in 0..SNAPSHOT_ROUNDS {
        let body = format!(r#"{{"id":{},"name":"before"}}"#, 1000 + round);
        assert_eq!(s.post_as(ALICE, &body).status, 200);
        let addr = s.addr.clone();
        let snap =
            std::thread::spawn(move || ctl("POST", "/_control/snapshots").send_to(&addr).unwrap());
        assert_eq!(s.request(&ctl("POST", "/_control/reset")).status, 204);
        let snap = snap.join().unwrap();
        assert_eq!(snap.status, 201, "{}", snap.text());
        let id = snap.json()["id"].as_str().unwrap().to_owned();
        let restore = s.request(&ctl("POST", &format!("/_control/snapshots/{id}/restore")));
        match restore.status {
            404 => {}
            204 => assert_eq!(
                list_as(&s, ALICE),
                "[]",
                "round {round}: snapshot {id} holds the store from before the reset"
            ),
            other => panic!("round {round}: restore {other}: {}", restore.text()),
        }
        assert_eq!(s.request(&ctl("POST", "/_control/reset")).status, 204);
    }
}

/// On `:memory:` a restore waits for every reader's lock: with a fault defined (so each
/// read tries the faults), readers and resets race, and no reset waits on a reader that
/// waits on it (it would fail 500 "the database stayed locked" after 5 s, and the reads
/// around it 500).
#[test]
fn no_reset_waits_on_a_reader_that_waits_on_it() {
    // Readers on kept-alive connections; under an emulator a connection serves one.
    if no_test_control() || native_only(EMULATED_TCP_INFO) {
        return;
    }
    let dir = TempDir::new();
    let seed = alice_seed(&dir, true);
    let s = controlled(":memory:")
        .arg(&format!("--seed {seed} --workers 16"))
        .start();
    let stop = Arc::new(AtomicBool::new(false));
    // Each on a connection of its own, kept alive: as many reads as the server takes.
    let readers: Vec<_> = ["/plants", "/events?limit=1"]
        .iter()
        .cycle()
        .take(24)
        .map(|path| {
            let (stop, path) = (stop.clone(), path.to_string());
            let mut c = s.connect();
            std::thread::spawn(move || {
                let bytes = Req::get(&path).token(ALICE).keep_alive().bytes();
                let mut reads = 0;
                while !stop.load(Ordering::Relaxed) {
                    std::io::Write::write_all(&mut c, &bytes).unwrap();
                    let r = read_response(&mut c).unwrap();
                    assert_eq!(r.status, 200, "{path}: {}", r.text());
                    reads += 1;
                }
                reads
            })
        })
        .collect();
    let nothing = json!({"match":{"principal":"nobody"},"action":{"kind":"status","status":503}});
    for i in 0..300 {
        fault(&s, nothing.clone());
        let r = s.request(&ctl("POST", "/_control/reset"));
        assert_eq!(r.status, 204, "reset {i}: {}", r.text());
    }
    stop.store(true, Ordering::Relaxed);
    let reads: usize = readers.into_iter().map(|r| r.join().unwrap()).sum();
    assert!(reads > 0);
}

/// How many requests or attempts the fault `id` has taken.
fn hits(s: &TestServer, id: &str) -> u64 {
    let all = faults(s);
    let found = all.as_array().unwrap().iter().find(|f| f["id"] == id);
    found.map_or(0, |f| f["hits"].as_u64().unwrap())
}

/// `POST /plants` as `token`, in a thread of its own: its answer, once it comes.
fn held_create(
    s: &TestServer,
    token: &str,
    id: i64,
) -> std::thread::JoinHandle<std::io::Result<Resp>> {
    let (addr, req) = (
        s.addr.clone(),
        Req::new("POST", "/plants").token(token).json(&plant(id)),
    );
    std::thread::spawn(move || req.send_to(&addr))
}

/// The 503 a request held by `fault`'s delay gets when `what` comes.
fn released(r: &Resp, what: &str, fault: &str) {
    assert_eq!(r.status, 503, "{}", r.text());
    assert_eq!(r.header("retry-after"), Some("1"));
    assert_eq!(
        r.json(),
        json!({"error":503,"message":format!(
            "{what} while this request waited out the delay of fault {fault}; \
             it was not carried out"
        )})
    );
}

/// A write held by a `before` delay when a reset or a restore comes is answered 503 at
/// once (not when its delay ends), and is not carried out after it.
#[test]
fn a_write_held_by_a_delay_is_answered_503_at_a_reset_or_restore() {
    if no_test_control() {
        return;
    }
    let s = controlled(":memory:").start();
    let snap = snapshot(&s);
    let restore = format!("/_control/snapshots/{snap}/restore");
    for barrier in [restore.as_str(), "/_control/reset"] {
        let me = token_of(&s, "held");
        let delay =
            json!({"match":{"method":"POST"},"action":{"kind":"delay","ms":60_000},"times":1});
        let id = fault(&s, delay)["id"].as_str().unwrap().to_owned();
        let held = held_create(&s, &me, 1);
        eventually(Duration::from_secs(5), || hits(&s, &id) == 1);
        assert_eq!(s.request(&ctl("POST", barrier)).status, 204);
        // Answered at the barrier, long before the delay would end.
        eventually(Duration::from_secs(10), || held.is_finished());
        let r = held.join().unwrap().unwrap();
        released(&r, "test control was reset or a snapshot restored", &id);
        let me = token_of(&s, "held");
        assert_eq!(list_as(&s, &me), "[]", "{barrier}: not carried out");
    }
}

/// SIGTERM while a write waits out a `before` delay: it is answered 503 at once and not
/// carried out (the server stops without waiting for the delay), as at a reset.
#[test]
fn a_write_held_by_a_delay_at_sigterm_is_answered_503_and_not_carried_out() {
    if no_test_control() {
        return;
    }
    let dir = TempDir::new();
    let db = dir.db();
    let db = db.to_str().unwrap();
    let s = controlled(db).start();
    let me = token_of(&s, "held");
    let delay = json!({"match":{"method":"POST"},"action":{"kind":"delay","ms":60_000},"times":1});
    let id = fault(&s, delay)["id"].as_str().unwrap().to_owned();
    let held = held_create(&s, &me, 77);
    eventually(Duration::from_secs(5), || hits(&s, &id) == 1);
    let status = s.stop();
    assert!(status.success(), "{status:?}");
    let r = held.join().unwrap().unwrap();
    released(&r, "the server began to stop", &id);
    // The same file again: the write is not in it.
    let s = controlled(db).start();
    let me = token_of(&s, "held");
    assert_eq!(list_as(&s, &me), "[]");
}

/// The id of the caller's first event.
fn first_event(s: &TestServer, token: &str) -> String {
    let events = s.request(&Req::get("/events?after=0").token(token)).json();
    events[0]["id"].as_str().unwrap().to_owned()
}

/// A webhook attempt held by a `delay` fault is not made when a restore comes (its event
/// is not the restored store's), nor when the server stops.
#[test]
fn a_webhook_attempt_held_by_a_delay_is_not_made_after_a_restore_or_at_stop() {
    if no_test_control() || without(Feature::Webhooks) {
        return;
    }
    let dir = TempDir::new();
    let db = dir.db();
    let receiver = Receiver::start();
    add_webhook(&db, "ann", &receiver.url());
    let s = controlled(db.to_str().unwrap())
        .arg("--webhook-schedule 1s")
        .start();
    let snap = snapshot(&s);
    let held =
        json!({"match":{"target":"webhook"},"action":{"kind":"delay","ms":60_000},"times":1});
    let id = fault(&s, held.clone())["id"].as_str().unwrap().to_owned();
    let ann = token_of(&s, "ann");
    create(&s, &ann, 1);
    let before = first_event(&s, &ann);
    eventually(Duration::from_secs(10), || hits(&s, &id) == 1);
    let restore = format!("/_control/snapshots/{snap}/restore");
    assert_eq!(s.request(&ctl("POST", &restore)).status, 204);
    // The restored store's own event 1 is delivered; the held one never is (its attempt
    // would have come first: the endpoint is one delivery thread's at a time).
    let ann = token_of(&s, "ann");
    create(&s, &ann, 2);
    let after = first_event(&s, &ann);
    let got = receiver.wait_for(1, Duration::from_secs(30));
    assert_eq!(got[0].header("webhook-id"), Some(after.as_str()));
    assert!(
        receiver
            .requests()
            .iter()
            .all(|r| r.header("webhook-id") != Some(before.as_str())),
        "the held attempt was made after the restore"
    );
    // At stop: held again, then SIGTERM; once the server has exited, nothing was posted.
    let id = fault(&s, held)["id"].as_str().unwrap().to_owned();
    create(&s, &ann, 3);
    eventually(Duration::from_secs(10), || hits(&s, &id) == 1);
    assert!(s.stop().success());
    assert_eq!(receiver.count(), 1, "an attempt held at the stop was made");
}
