//! The journal never holds a secret: no token of any kind (the environment's, a stored
//! one, a seeded one, a minted one, an unknown one), not the control token, no stored
//! token's hash and no webhook secret, whatever header carries it, on every path, on
//! answered, refused and unanswered requests alike. (A body is kept as it was sent.)

use crate::control::{CONTROL, controlled, mint, seed_file};
use crate::control_journal::{fingerprint, journal};
use crate::faults::fault;
use crate::support::*;
use serde_json::json;
use sha2::{Digest, Sha256};
use std::io::Write;

#[test]
fn the_journal_never_holds_a_token_a_token_hash_or_a_webhook_secret() {
    if no_test_control() {
        return;
    }
    let dir = TempDir::new();
    let db = dir.db();
    let stored = add_token(&db, "sam", false);
    let mut secrets = vec![];
    if !without(Feature::Webhooks) {
        let (_, secret) = crate::webhooks::add_webhook(&db, "sam", "http://127.0.0.1:9/");
        secrets.push(secret.clone());
        secrets.push(secret.trim_start_matches("whsec_").to_owned());
    }
    const SEEDED: &str = "seeded-token-0123456789abcdef";
    let seed = seed_file(
        &dir,
        &format!(r#"{{"tokens":[{{"token":"{SEEDED}","principal":"sid"}}]}}"#),
    );
    let s = controlled(db.to_str().unwrap())
        .arg(&format!("--seed {seed}"))
        .start();
    let minted = mint(&s, r#"{"principal":"mia"}"#)["token"]
        .as_str()
        .unwrap()
        .to_owned();
    // Requests to /plants/9 are closed unanswered; to /plants/8, answered 503.
    fault(
        &s,
        json!({"match":{"path":"/plants/9"},"action":{"kind":"close"}}),
    );
    fault(
        &s,
        json!({"match":{"path":"/plants/8"},"action":{"kind":"status","status":503}}),
    );
    let tokens = [
        TOKEN,
        &stored,
        SEEDED,
        &minted,
        "unknown-token-0123456789",
        CONTROL,
    ];
    let requests = |t: &str| {
        let body = r#"{"id":5,"name":"five"}"#;
        let bearer = format!("Bearer {t}");
        vec![
            Req::get("/plants").header("Authorization", &bearer),
            Req::new("POST", "/plants")
                .header("authorization", &format!("bearer {t}"))
                .json(body),
            Req::new("DELETE", "/plants/5").header("AUTHORIZATION", &bearer),
            Req::new("DELETE", "/plants/8").header("Authorization", &bearer),
            Req::new("DELETE", "/plants/9").header("Authorization", &bearer),
            Req::get("/events?limit=5").header("Authorization", &bearer),
            Req::get("/healthz").header("Authorization", &bearer),
            Req::get("/metrics").header("Authorization", &bearer),
            Req::get("/openapi.json").header("Authorization", &bearer),
            Req::get("/nowhere").header("Authorization", &bearer),
            Req::new("PUT", "/plants").header("Authorization", &bearer),
            // Malformed, or not where a bearer token goes: refused (401) all the same.
            Req::get("/plants").header("Authorization", t),
            Req::get("/plants").header("Authorization", &format!("Bearer  {t}")),
            Req::get("/plants").header("Authorization", &format!("Basic {t}")),
            Req::get("/plants").header("Proxy-Authorization", &bearer),
        ]
    };
    let mut sent = 0;
    for t in tokens {
        for req in requests(t) {
            // The unanswered ones end without an answer: an error here.
            let _ = req.send_to(&s.addr);
            sent += 1;
        }
        // A bad head (the token twice) is 400 naming the header, without an entry
        // (docs/control.md, "The journal") and without the token in its answer.
        let bearer = format!("Bearer {t}");
        let twice = Req::get("/plants")
            .header("Authorization", &bearer)
            .header("Authorization", &bearer);
        let r = twice.send_to(&s.addr).unwrap();
        assert_eq!(r.status, 400, "{}", r.text());
        assert!(
            r.text()
                .contains("Authorization header is given more than once")
        );
        assert!(!r.text().contains(t));
        // A head the gate refuses once it is read (a bad chunk), with the token.
        let mut c = s.connect();
        let head = format!(
            "POST /plants HTTP/1.1\r\nHost: test\r\nAuthorization: Bearer {t}\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"
        );
        c.write_all(head.as_bytes()).unwrap();
        let r = read_response(&mut c).unwrap();
        assert_eq!(r.status, 400, "{}", r.text());
        sent += 1;
    }
    let entries = journal(&s, "");
    assert_eq!(entries.len(), sent, "every request is journaled");
    assert!(entries.iter().all(|e| e["answered"] == true));
    let text = serde_json::to_string(&entries).unwrap();
    for t in tokens {
        let hash: String = Sha256::digest(t)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert!(!text.contains(t), "the journal holds a token: {text}");
        assert!(!text.contains(&hash), "the journal holds a token's hash");
        assert!(
            !text.contains(&hash.to_uppercase()),
            "the journal holds a token's hash"
        );
        // Which token was sent is told by its fingerprint.
        assert!(text.contains(&fingerprint(t)), "{t}: no fingerprint");
    }
    for secret in &secrets {
        assert!(
            !text.contains(secret.as_str()),
            "the journal holds a webhook secret"
        );
    }
    // The principal of each stored or given token, refused or not.
    let named: Vec<_> = entries
        .iter()
        .filter(|e| e["path"] == "/plants/8")
        .map(|e| (e["status"].clone(), e["principal"].clone()))
        .collect();
    assert_eq!(
        named,
        [
            (json!(503), json!("default")),
            (json!(503), json!("sam")),
            (json!(503), json!("sid")),
            (json!(503), json!("mia")),
            (json!(401), json!(null)),
            (json!(401), json!(null)),
        ]
    );
    let closed = entries
        .iter()
        .filter(|e| e["path"] == "/plants/9" && e["status"].is_null());
    assert_eq!(
        closed.count(),
        4,
        "the closed ones are journaled, unanswered"
    );
}
