//! Test control's journal (docs/control.md, "The journal"): what each request sent
//! (headers, the token's fingerprint, the body the route read), its principal also when
//! refused, the queries, the bounds. SQLite only (test control is). In time (arrival,
//! waits, a reset): `control_journal_order.rs`; secrets: `control_journal_secrets.rs`.

use crate::control::{controlled, ctl, mint, serve_refused};
use crate::faults::principal;
use crate::support::*;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

/// `GET /_control/requests` with `query` (`""` or `?…`): its entries.
pub(crate) fn journal(s: &TestServer, query: &str) -> Vec<Value> {
    let r = s.request(&ctl("GET", &format!("/_control/requests{query}")));
    assert_eq!(r.status, 200, "{query}: {}", r.text());
    r.json().as_array().unwrap().clone()
}

/// The journal's `token` for a bearer token.
pub(crate) fn fingerprint(token: &str) -> String {
    let hash = Sha256::digest(format!("plant-store-journal:{token}"));
    let hex: String = hash[..4].iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256:{hex}")
}

pub(crate) fn ns(entries: &[Value]) -> Vec<i64> {
    entries.iter().map(|e| e["n"].as_i64().unwrap()).collect()
}

#[test]
fn the_journal_shows_what_the_client_sent() {
    if no_test_control() {
        return;
    }
    let s = controlled(":memory:").start();
    let me = principal(&s, "gina");
    let body = r#"{"id":1,"name":"Fern"}"#;
    let sent = Req::new("POST", "/plants")
        .header("User-Agent", "client/1.0")
        .header("x-Request-ID", "r-1")
        .token(&me)
        .json(body);
    assert_eq!(s.request(&sent).status, 200);
    // Answered before the answer's first byte: read at once after it, it is there.
    let e = &journal(&s, "")[0];
    let at = e["at"].as_str().unwrap().to_owned();
    assert!(at.len() == 24 && at.ends_with('Z'), "{at}");
    assert!(e["duration_ms"].as_f64().unwrap() >= 0.0);
    let mut e = e.clone();
    e.as_object_mut().unwrap().remove("duration_ms");
    assert_eq!(
        e,
        json!({"n": 1, "method": "POST", "path": "/plants", "query": "",
            "headers": [["Host", "test"], ["Connection", "close"], ["User-Agent", "client/1.0"],
                ["x-Request-ID", "r-1"], ["Authorization", "Bearer [redacted]"],
                ["Content-Type", "application/json"], ["Content-Length", "22"]],
            "token": fingerprint(&me), "body": body, "body_base64": null,
            "body_truncated": false, "principal": "gina", "status": 200, "answered": true,
            "fault": null, "at": at})
    );
    // Chunked: de-chunked. Not UTF-8: in base64 (the route read it, then refused it).
    let chunked = Req::new("POST", "/plants")
        .token(&me)
        .json(r#"{"id":2,"name":"Ivy"}"#);
    assert_eq!(s.request(&chunked.chunked()).status, 200);
    let raw = Req::new("POST", "/plants")
        .token(&me)
        .header("Content-Type", "application/json");
    assert_eq!(
        s.request(&raw.body(b"{\"id\":3,\"name\":\"\xff\"}")).status,
        400
    );
    // No token: `token` is null, and so is the principal.
    assert_eq!(
        s.request(&Req::get("/healthz").header("Accept", "*/*"))
            .status,
        200
    );
    let all = journal(&s, "");
    assert_eq!(ns(&all), [1, 2, 3, 4]);
    assert_eq!(all[1]["body"], r#"{"id":2,"name":"Ivy"}"#);
    assert!(
        all[1]["headers"]
            .to_string()
            .contains(r#"["Transfer-Encoding","chunked"]"#)
    );
    assert_eq!(
        (&all[2]["body"], &all[2]["body_base64"]),
        (&Value::Null, &json!("eyJpZCI6MywibmFtZSI6Iv8ifQ=="))
    );
    assert_eq!(
        (
            &all[3]["token"],
            &all[3]["principal"],
            &all[3]["body"],
            &all[3]["headers"]
        ),
        (
            &Value::Null,
            &Value::Null,
            &Value::Null,
            &json!([["Host", "test"], ["Connection", "close"], ["Accept", "*/*"]])
        )
    );
    // The OpenAPI document describes the API, not test control.
    let doc = s.request(&Req::get("/openapi.json")).text();
    assert!(
        doc.contains("/plants") && !doc.contains("_control"),
        "{doc}"
    );
}

/// The body is the one the route read: none for a request refused before it reads it
/// (401, 415, a 413 by its declared length), nor for a route that reads none; a chunked
/// body past the limit is read up to it, and shown cut.
#[test]
fn a_body_is_shown_only_when_the_route_read_it() {
    if no_test_control() {
        return;
    }
    let s = controlled(":memory:").start();
    let me = principal(&s, "hal");
    let body = r#"{"id":1,"name":"n"}"#;
    let big = vec![b' '; 64 * 1024 + 10];
    for (req, status) in [
        (
            Req::new("POST", "/plants")
                .token("unknown-token-0123")
                .json(body),
            401,
        ),
        (
            Req::new("POST", "/plants")
                .token(&me)
                .header("Content-Type", "text/plain")
                .body(body.as_bytes()),
            415,
        ),
        (
            Req::new("POST", "/plants")
                .token(&me)
                .header("Content-Type", "application/json")
                .body(&big),
            413,
        ),
        (
            Req::new("GET", "/plants").token(&me).body(body.as_bytes()),
            200,
        ),
        (
            Req::new("POST", "/plants")
                .token(&me)
                .header("Content-Type", "application/json")
                .body(&big)
                .chunked(),
            413,
        ),
    ] {
        assert_eq!(s.request(&req).status, status, "{req:?}");
    }
    let all = journal(&s, "");
    let bodies: Vec<_> = all
        .iter()
        .map(|e| {
            (
                e["status"].clone(),
                e["body"].is_null(),
                e["body_truncated"].clone(),
            )
        })
        .collect();
    assert_eq!(
        bodies,
        [
            (json!(401), true, json!(false)),
            (json!(415), true, json!(false)),
            (json!(413), true, json!(false)),
            (json!(200), true, json!(false)),
            (json!(413), false, json!(true))
        ]
    );
    assert_eq!(all[4]["body"].as_str().unwrap().len(), 64 * 1024);
}

/// A stored token's principal is named also when the request is refused: an expired
/// token's 401, a 403, a 429; an unknown token's is null.
#[test]
fn the_principal_is_named_whenever_the_token_is_stored() {
    if no_test_control() {
        return;
    }
    let s = controlled(":memory:")
        .arg("--rate-limit 1/h --rate-burst 1")
        .start();
    let soon = mint(&s, r#"{"principal":"ida","expires_in":"1m"}"#)["token"]
        .as_str()
        .unwrap()
        .to_owned();
    let reader = mint(&s, r#"{"principal":"jon","scope":"read"}"#)["token"]
        .as_str()
        .unwrap()
        .to_owned();
    let busy = principal(&s, "kim");
    assert_eq!(s.request(&Req::get("/plants").token(&busy)).status, 200);
    assert_eq!(s.request(&Req::get("/plants").token(&busy)).status, 429);
    assert_eq!(
        s.request(&Req::new("POST", "/plants").token(&reader).json("{}"))
            .status,
        403
    );
    assert_eq!(
        s.request(&Req::get("/plants").token("unknown-token-0123"))
            .status,
        401
    );
    let r = s.request(&ctl("POST", "/_control/clock/advance").json(r#"{"by":"2m"}"#));
    assert_eq!(r.status, 200);
    assert_eq!(s.request(&Req::get("/events").token(&soon)).status, 401);
    let seen: Vec<_> = journal(&s, "")
        .iter()
        .map(|e| (e["status"].clone(), e["principal"].clone()))
        .collect();
    assert_eq!(
        seen,
        [
            (json!(200), json!("kim")),
            (json!(429), json!("kim")),
            (json!(403), json!("jon")),
            (json!(401), Value::Null),
            (json!(401), json!("ida"))
        ]
    );
    assert_eq!(ns(&journal(&s, "?principal=kim&status=4xx")), [2]);
}

#[test]
fn queries_choose_limit_and_name_the_known_parameters() {
    if no_test_control() {
        return;
    }
    let s = controlled(":memory:").start();
    for path in ["/healthz", "/plants/1", "/nowhere", "/plants", "/healthz"] {
        s.request(&Req::get(path));
    }
    for (query, want) in [
        ("?status=2xx", vec![1, 5]),
        ("?status=404", vec![3]),
        ("?status=4xx&path=/plants*", vec![2, 4]),
        ("?after=2&limit=2", vec![3, 4]),
        ("?path=/plants/*&method=GET", vec![2]),
        ("?limit=0", vec![]),
    ] {
        assert_eq!(ns(&journal(&s, query)), want, "{query}");
    }
    check(
        &s,
        &[
            (
                ctl("GET", "/_control/requests?since=1"),
                400,
                &[],
                err(
                    400,
                    "unknown query parameter `since` (known: method, path, principal, status, after, limit, wait, min)",
                ),
            ),
            (
                ctl("GET", "/_control/requests?wait=31s"),
                400,
                &[],
                err(
                    400,
                    "query parameter `wait` must be a DURATION from 1s to 30s (such as `5s`), not `31s`",
                ),
            ),
            (
                ctl("GET", "/_control/requests?status=20x"),
                400,
                &[],
                err(
                    400,
                    "query parameter `status` must be a status such as `503`, or a class: `2xx`, `4xx`, `5xx`, not `20x`",
                ),
            ),
            (
                ctl("GET", "/_control/requests?min=2"),
                400,
                &[],
                err(400, "query parameter `min` needs `wait`"),
            ),
            (ctl("DELETE", "/_control/requests"), 204, &[], String::new()),
            (ctl("GET", "/_control/requests"), 200, &[], "[]".into()),
        ],
    );
    s.request(&Req::get("/healthz"));
    assert_eq!(ns(&journal(&s, "")), [1], "n starts again at 1");
}

/// `--journal-size` and `--journal-bytes` bound the journal (the oldest go first); they
/// need `--test-control`.
#[test]
fn the_journal_is_bounded_in_entries_and_in_bytes() {
    if no_test_control() {
        return;
    }
    let s = controlled(":memory:").arg("--journal-size 3").start();
    for _ in 0..5 {
        s.request(&Req::get("/healthz"));
    }
    assert_eq!(ns(&journal(&s, "")), [3, 4, 5]);
    let none = controlled(":memory:").arg("--journal-size 0").start();
    none.request(&Req::get("/healthz"));
    assert_eq!(journal(&none, ""), Vec::<Value>::new());
    // Bodies count: 30,000 bytes hold two entries with a 10,000-byte body, not three.
    let s = controlled(":memory:").arg("--journal-bytes 30000").start();
    let me = principal(&s, "max");
    let body = format!(r#"{{"id":1,"name":"{}"}}"#, "n".repeat(9980));
    for _ in 0..4 {
        assert_eq!(
            s.request(&Req::new("POST", "/plants").token(&me).json(&body))
                .status,
            400
        );
    }
    assert_eq!(ns(&journal(&s, "")), [3, 4]);
    // What is counted is an entry's size in the listing: a body of NULs (each `\u0000`
    // there) counts six times its bytes, so a listing is never longer than the bound.
    let bound = 1 << 20;
    let s = controlled(":memory:")
        .arg(&format!("--journal-bytes {bound}"))
        .start();
    let me = principal(&s, "nul");
    for _ in 0..40 {
        let r = s.request(
            &Req::new("POST", "/plants")
                .token(&me)
                .json(&"\0".repeat(65536)),
        );
        assert_eq!(r.status, 400, "{}", r.text());
    }
    let r = s.request(&ctl("GET", "/_control/requests"));
    assert!(r.body.len() <= bound, "a listing of {} bytes", r.body.len());
    assert!(r.json().as_array().unwrap().len() >= 2);
    for (args, env, message) in [
        (
            &["--journal-bytes", "100"][..],
            &[][..],
            "--journal-bytes needs --test-control",
        ),
        (
            &[],
            &[("PLANT_STORE_JOURNAL_SIZE", "5")][..],
            "PLANT_STORE_JOURNAL_SIZE needs --test-control",
        ),
        (
            &["--journal-bytes", "1GB"],
            &[],
            "--journal-bytes must be a whole number from 0 to 1073741824, not `1GB`",
        ),
    ] {
        let (code, stderr) = serve_refused(args, env);
        assert_eq!(code, 2, "{args:?} {env:?}: {stderr}");
        assert!(stderr.contains(message), "{stderr}");
    }
}
