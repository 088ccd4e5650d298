//! `--test-seed` in-process: two servers with one seed in one process draw from
//! generators of their own, so each makes the ids a lone server would.

use crate::client::{get, request};
use crate::shared;
use plant_store::Server;

pub(crate) const CONTROL: &str = "embedded-control-token";

fn seeded(seed: &str) -> plant_store::Running {
    Server::builder()
        .control_token(CONTROL)
        .option("test-seed", seed)
        .option("workers", "2")
        .start()
        .expect("the server starts")
}

/// A token minted for `principal`.
pub(crate) fn mint(s: &plant_store::Running, principal: &str) -> String {
    let body = format!(r#"{{"principal":"{principal}"}}"#);
    let r = request(
        s.addr(),
        "POST",
        "/_control/tokens",
        Some(CONTROL),
        Some(&body),
    );
    assert_eq!(r.status, 201, "{}", r.body);
    let minted: serde_json::Value = serde_json::from_str(&r.body).unwrap();
    minted["token"].as_str().unwrap().to_owned()
}

/// A plant created as `token`, and the id of its event.
fn event_of_a_create(s: &plant_store::Running, token: &str) -> String {
    let r = request(
        s.addr(),
        "POST",
        "/plants",
        Some(token),
        Some(r#"{"id":1,"name":"Fern"}"#),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let events: serde_json::Value =
        serde_json::from_str(&get(s.addr(), "/events", Some(token)).body).unwrap();
    events[0]["id"].as_str().unwrap().to_owned()
}

#[test]
fn two_seeded_servers_in_one_process_draw_apart() {
    let _shared = shared();
    let (a, b) = (seeded("99"), seeded("99"));
    // `a` draws twice before `b` draws once: with one generator for the process, `b`
    // would get `a`'s third token.
    let a1 = mint(&a, "p1");
    let a2 = mint(&a, "p2");
    assert_eq!(mint(&b, "p1"), a1);
    assert_eq!(mint(&b, "p2"), a2);
    assert_ne!(a1, a2);
    assert_eq!(event_of_a_create(&a, &a1), event_of_a_create(&b, &a1));
    let other = seeded("100");
    assert_ne!(mint(&other, "p1"), a1);
    a.stop().unwrap();
    b.stop().unwrap();
}
