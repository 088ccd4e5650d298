//! A request held by a test-control `delay` fault when the library's `Running::stop`
//! comes is answered 503 at once and not carried out (as at SIGTERM, a reset or a
//! restore).

use crate::client::{get, request};
use crate::seeded::{CONTROL, mint};
use crate::shared;
use plant_store::Server;

fn controlled(db: &std::path::Path) -> plant_store::Running {
    Server::builder()
        .control_token(CONTROL)
        .db(db.to_str().unwrap())
        .option("workers", "2")
        .start()
        .expect("the server starts")
}

#[test]
fn a_request_held_by_a_delay_at_stop_is_answered_503_and_not_carried_out() {
    let _g = shared();
    let dir = std::env::temp_dir().join(format!("plant-store-embed-held-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let db = dir.join("held.db");
    let server = controlled(&db);
    let token = mint(&server, "held");
    let delay = r#"{"match":{"method":"POST"},"action":{"kind":"delay","ms":60000},"times":1}"#;
    let r = request(
        server.addr(),
        "POST",
        "/_control/faults",
        Some(CONTROL),
        Some(delay),
    );
    assert_eq!(r.status, 201, "{}", r.body);
    let addr = server.addr();
    let t = token.clone();
    let held = std::thread::spawn(move || {
        request(
            addr,
            "POST",
            "/plants",
            Some(&t),
            Some(r#"{"id":1,"name":"Fern"}"#),
        )
    });
    let hit = || {
        let faults = get(addr, "/_control/faults", Some(CONTROL)).body;
        let faults: serde_json::Value = serde_json::from_str(&faults).unwrap();
        faults[0]["hits"] == 1
    };
    let until = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !hit() {
        assert!(
            std::time::Instant::now() < until,
            "the fault never took the request"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    server.stop().unwrap();
    let answer = held.join().unwrap();
    assert_eq!(answer.status, 503, "{}", answer.body);
    assert!(
        answer
            .body
            .contains("the server began to stop while this request waited out")
            && answer.body.ends_with("it was not carried out\"}"),
        "{}",
        answer.body
    );
    let again = controlled(&db);
    let token = mint(&again, "held");
    assert_eq!(get(again.addr(), "/plants", Some(&token)).body, "[]");
    again.stop().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}
