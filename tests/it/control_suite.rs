//! A client's test suite against one server (docs/performance.md, "Test
//! control"): 100 tests from 8 threads at once, each with its own principal minted at run
//! time, all using the same plant ids; each asserts that it sees only its own plants and
//! events. Prints the whole run's wall time. As a benchmark, against a release build:
//!
//!     PLANT_STORE_BIN=${CARGO_TARGET_DIR:-target}/release/plant-store \
//!         cargo test --locked --test it control_suite -- --nocapture

use crate::control::{controlled, mint};
use crate::support::*;
use serde_json::{Value, json};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

const TESTS: usize = 100;
const THREADS: usize = 8;
/// Plants each test creates (ids 1 to PLANTS, the same in every test).
const PLANTS: i64 = 5;

/// One test of the suite: its principal, its plants (every test the same ids, its own
/// names), a delete, and its events, each seen as its own only.
fn one_test(s: &TestServer, n: usize) {
    let principal = format!("suite-{n}");
    let minted = mint(s, &json!({ "principal": principal }).to_string());
    assert_eq!(minted["principal"], principal.as_str());
    let token = minted["token"].as_str().unwrap();
    let name = |id: i64| format!("t{n}-plant{id}");
    for id in 1..=PLANTS {
        let r = s.post_as(token, &json!({"id": id, "name": name(id)}).to_string());
        assert_eq!(r.status, 200, "test {n}: {}", r.text());
    }
    let list = |s: &TestServer| -> Vec<String> {
        let r = s.request(&Req::get("/plants").token(token));
        assert_eq!(r.status, 200, "test {n}: {}", r.text());
        r.json()
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["name"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(list(s), (1..=PLANTS).map(name).collect::<Vec<_>>());
    let r = s.request(&Req::new("DELETE", "/plants/1").token(token));
    assert_eq!(r.status, 204, "test {n}: {}", r.text());
    assert_eq!(list(s), (2..=PLANTS).map(name).collect::<Vec<_>>());
    let r = s.request(&Req::get("/events?after=0").token(token));
    assert_eq!(r.status, 200, "test {n}: {}", r.text());
    let events: Value = r.json();
    let events = events.as_array().unwrap();
    // Its own log: seq 1, 2, … with no other test's event in it.
    assert_eq!(events.len(), PLANTS as usize + 1, "test {n}: {events:?}");
    for (i, e) in events.iter().enumerate() {
        assert_eq!(e["seq"], i as u64 + 1, "test {n}: {e}");
    }
    for (e, id) in events.iter().zip(1..=PLANTS) {
        assert_eq!(e["type"], "plant.created");
        assert_eq!(e["data"]["name"], name(id).as_str(), "test {n}: {e}");
    }
    assert_eq!(events[PLANTS as usize]["type"], "plant.deleted");
    assert_eq!(events[PLANTS as usize]["data"], json!({"id": 1}));
}

#[test]
fn a_hundred_tests_from_eight_threads_on_one_server_see_only_their_own() {
    if no_test_control() {
        return;
    }
    let s = controlled(":memory:").start();
    let next = AtomicUsize::new(0);
    let started = Instant::now();
    std::thread::scope(|scope| {
        for _ in 0..THREADS {
            scope.spawn(|| {
                loop {
                    let n = next.fetch_add(1, Ordering::Relaxed);
                    if n >= TESTS {
                        break;
                    }
                    one_test(&s, n);
                }
            });
        }
    });
    let took = started.elapsed();
    println!(
        "{TESTS} tests from {THREADS} threads, each with its own minted principal, on one server: {:.0} ms",
        took.as_secs_f64() * 1000.0
    );
    // Every test's plants are still its own, and there are no others.
    let all: usize = (0..TESTS)
        .map(|n| {
            let t = mint(
                &s,
                &json!({ "principal": format!("suite-{n}") }).to_string(),
            );
            let r = s.request(&Req::get("/plants").token(t["token"].as_str().unwrap()));
            r.json().as_array().unwrap().len()
        })
        .sum();
    assert_eq!(all, TESTS * (PLANTS as usize - 1));
}
