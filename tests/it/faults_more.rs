//! Test control's faults, part 2 (docs/control.md, "Faults"): matching on a request's
//! query, headers and JSON body; `/healthz` and `/openapi.json` faulted, paths never
//! faulted refused; a status with a body of its own; delay ranges; every new member's 400
//! with its message; the cheat sheet's faults. `truncate` at a byte and `trickle` are in
//! `faults_bytes.rs` (their bounds in `faults_bounded.rs`), tokens at run time in
//! `control_tokens.rs`. SQLite only.

use crate::control::{controlled, create_as, ctl, list_as};
use crate::faults::{fault, faults, plant, principal, raw_until_end};
use crate::support::*;
use serde_json::{Value, json};
use std::io::Write;
use std::time::{Duration, Instant};

/// The message of a refused fault body.
fn refused(s: &TestServer, body: &str) -> String {
    let r = s.request(&ctl("POST", "/_control/faults").json(body));
    assert_eq!(r.status, 400, "{body}: {}", r.text());
    r.json()["message"].as_str().unwrap().to_owned()
}

#[test]
fn every_new_member_and_bound_is_refused_with_its_message() {
    if no_test_control() {
        return;
    }
    let s = controlled(":memory:").start();
    let never = |path: &str| {
        format!(
            "match.path: `{path}` is never faulted (faults take /plants, /plants/{{id}}, \
             /events, /healthz, /openapi.json)"
        )
    };
    let close = r#""action":{"kind":"close"}"#;
    let table: Vec<(String, String)> = vec![
        (
            format!(r#"{{"match":{{"path":"/metrics"}},{close}}}"#),
            never("/metrics"),
        ),
        (
            format!(r#"{{"match":{{"path":"/_control/*"}},{close}}}"#),
            never("/_control/*"),
        ),
        (
            format!(r#"{{"match":{{"path":"/nothing"}},{close}}}"#),
            never("/nothing"),
        ),
        (
            format!(r#"{{"match":{{"query":{{"limit":5}}}},{close}}}"#),
            "match.query.limit: must be a string (the value as decoded)".into(),
        ),
        (
            format!(r#"{{"match":{{"headers":{{"authorization":"Bearer *"}}}},{close}}}"#),
            "match.headers.authorization: a fault never matches credentials (it would keep \
             a token); match the principal instead"
                .into(),
        ),
        (
            format!(r#"{{"match":{{"headers":{{"X-Id":["1"]}}}},{close}}}"#),
            "match.headers.X-Id: must be a string of visible ASCII, exact or ending in `*`".into(),
        ),
        (
            format!(r#"{{"match":{{"body":"id=1"}},{close}}}"#),
            "match.body: must be a JSON object (members the body holds)".into(),
        ),
        (
            r#"{"action":{"kind":"status","status":199}}"#.into(),
            "action.status: must be an integer from 200 to 599".into(),
        ),
        (
            r#"{"action":{"kind":"status","status":204,"body":""}}"#.into(),
            "action.body: a 204 answer has no body".into(),
        ),
        (
            r#"{"action":{"kind":"status","status":304,"content_type":"text/plain"}}"#.into(),
            "action.content_type: a 304 answer has no body".into(),
        ),
        (
            r#"{"action":{"kind":"status","status":200,"content_type":""}}"#.into(),
            "action.content_type: must be a media type of 1 to 256 visible ASCII characters, \
             such as \"text/html; charset=utf-8\""
                .into(),
        ),
        (
            r#"{"action":{"kind":"status","status":200,"body":"x","message":"y"}}"#.into(),
            "action.message: not with `body` (the body is sent as it is)".into(),
        ),
        (
            r#"{"action":{"kind":"delay","ms":{"min":9,"max":8}}}"#.into(),
            "action.ms.max: must be at least `min` (9)".into(),
        ),
        (
            r#"{"action":{"kind":"delay","ms":{"min":0,"max":60001}}}"#.into(),
            "action.ms.max: must be an integer from 0 to 60000".into(),
        ),
        (
            r#"{"action":{"kind":"delay","ms":{"max":5}}}"#.into(),
            "action.ms.min: is required (from 0 to 60000)".into(),
        ),
        (
            r#"{"action":{"kind":"delay","ms":[1,2]}}"#.into(),
            "action.ms: must be an integer from 0 to 60000, or {\"min\": A, \"max\": B}".into(),
        ),
        (
            r#"{"action":{"kind":"delay","ms":5},"seed":1}"#.into(),
            "seed: only with `probability` or a delay range (`ms` as {min, max})".into(),
        ),
        (
            r#"{"action":{"kind":"truncate","bytes":16777217}}"#.into(),
            "action.bytes: must be an integer from 0 to 16777216".into(),
        ),
        (
            r#"{"action":{"kind":"trickle","bytes":65537,"every_ms":1}}"#.into(),
            "action.bytes: must be an integer from 1 to 65536".into(),
        ),
        (
            r#"{"action":{"kind":"trickle","bytes":1,"every_ms":0}}"#.into(),
            "action.every_ms: must be an integer from 1 to 10000".into(),
        ),
        (
            r#"{"action":{"kind":"trickle","bytes":1}}"#.into(),
            "action.every_ms: is required (from 1 to 10000)".into(),
        ),
        (
            r#"{"action":{"kind":"trickle","bytes":1,"every_ms":1},"when":"before"}"#.into(),
            "when: `trickle` acts on an answer, so it is always \"after\"".into(),
        ),
    ];
    for (body, message) in &table {
        assert_eq!(&refused(&s, body), message, "{body}");
    }
    assert_eq!(faults(&s), json!([]), "nothing is kept of a refused fault");
}

#[test]
fn faults_match_a_query_parameter_a_header_and_members_of_the_body() {
    if no_test_control() {
        return;
    }
    let s = controlled(":memory:").start();
    let p = principal(&s, "m");
    let poison = fault(
        &s,
        json!({"match":{"method":"POST","body":{"name":"Poison","tag":"x"}},
               "action":{"kind":"status","status":500},"times":1}),
    );
    assert_eq!(
        poison["match"],
        json!({"method":"POST","body":{"name":"Poison","tag":"x"}})
    );
    let ok = s.request(&create_as(&p, r#"{"id":1,"name":"Poison"}"#));
    assert_eq!(ok.status, 200, "the body lacks the tag");
    let sick = r#"{"id":2,"tag":"x","name":"Poison"}"#;
    assert_eq!(s.request(&create_as(&p, sick)).status, 500);
    assert_eq!(list_as(&s, &p), r#"[{"name":"Poison"}]"#, "not carried out");
    fault(
        &s,
        json!({"match":{"headers":{"X-Client":"suite/*"}},
               "action":{"kind":"status","status":503},"times":1}),
    );
    assert_eq!(s.request(&Req::get("/plants").token(&p)).status, 200);
    let old = Req::get("/plants").token(&p).header("x-client", "older/1");
    assert_eq!(s.request(&old).status, 200);
    let suite = Req::get("/plants")
        .token(&p)
        .header("x-client", "suite/2.1");
    assert_eq!(s.request(&suite).status, 503);
    fault(
        &s,
        json!({"match":{"path":"/plants","query":{"limit":"1"}},
               "action":{"kind":"status","status":502},"times":1}),
    );
    assert_eq!(
        s.request(&Req::get("/plants?limit=10").token(&p)).status,
        200
    );
    assert_eq!(
        s.request(&Req::get("/plants?limit=1").token(&p)).status,
        502
    );
    let hits: Vec<Value> = faults(&s)
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["hits"].clone())
        .collect();
    assert_eq!(hits, [json!(1), json!(1), json!(1)]);
}

#[test]
fn a_readiness_check_can_fail_and_metrics_and_control_never_do() {
    if no_test_control() {
        return;
    }
    let s = controlled(":memory:").start();
    fault(
        &s,
        json!({"match":{"path":"/healthz"},
               "action":{"kind":"status","status":503,"retry_after":1},"times":2}),
    );
    for _ in 0..2 {
        let r = s.get("/healthz");
        assert_eq!((r.status, r.header("Retry-After")), (503, Some("1")));
        assert_eq!(r.text(), err(503, "a fault of test control answered 503"));
    }
    assert_eq!(s.get("/healthz").text(), r#"{"status":"ok"}"#);
    fault(
        &s,
        json!({"match":{"path":"/healthz"},"when":"after","action":{"kind":"reset"},"times":1}),
    );
    assert_eq!(raw_until_end(&s, &Req::get("/healthz")), (Vec::new(), true));
    fault(
        &s,
        json!({"match":{"path":"/healthz"},"when":"after","action":{"kind":"close"},"times":1}),
    );
    assert_eq!(
        raw_until_end(&s, &Req::get("/healthz")),
        (Vec::new(), false)
    );
    fault(
        &s,
        json!({"match":{"path":"/openapi.json"},"action":{"kind":"truncate","bytes":12},"times":1}),
    );
    let (got, _) = raw_until_end(&s, &Req::get("/openapi.json"));
    assert_eq!(String::from_utf8_lossy(&got), "HTTP/1.1 200");
    // A fault on every path never takes /metrics nor test control's own.
    fault(&s, json!({"action":{"kind":"status","status":500}}));
    assert_eq!(s.get("/metrics").status, 200);
    let list = faults(&s);
    assert_eq!(list[4]["hits"], 0, "{list}");
    assert_eq!(s.get("/healthz").status, 500);
    assert_eq!(faults(&s)[4]["hits"], 1);
    let journal = s
        .request(&ctl("GET", "/_control/requests?path=/healthz"))
        .json();
    let statuses: Vec<Value> = journal
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["status"].clone())
        .collect();
    let null = Value::Null;
    assert_eq!(
        statuses,
        [
            json!(503),
            json!(503),
            json!(200),
            null.clone(),
            null,
            json!(500)
        ]
    );
}

#[test]
fn a_status_fault_answers_a_well_framed_body_of_its_own() {
    if no_test_control() {
        return;
    }
    let s = controlled(":memory:").start();
    let p = principal(&s, "body");
    fault(
        &s,
        json!({"match":{"method":"GET","path":"/plants"},
               "action":{"kind":"status","status":200,"body":"[{\"name\":"},"times":1}),
    );
    // On a kept-alive connection: the malformed body is framed, the next answer follows.
    let (mut c, twice) = listed_twice(&s, &p);
    let bad = read_response(&mut c).unwrap();
    assert_eq!(bad.status, 200);
    assert_eq!(bad.header("Content-Type"), Some("application/json"));
    assert_eq!(bad.header("Content-Length"), Some("9"));
    assert_eq!(bad.body, br#"[{"name":"#);
    if twice {
        assert_eq!(read_response(&mut c).unwrap().text(), "[]");
    }
    // After the commit, a page of HTML for a create that took effect.
    fault(
        &s,
        json!({"match":{"method":"POST"},"when":"after",
               "action":{"kind":"status","status":502,"retry_after":4,
                         "body":"<html>bad gateway</html>","content_type":"text/html"},"times":1}),
    );
    let r = s.request(&create_as(&p, &plant(3)));
    assert_eq!((r.status, r.header("Retry-After")), (502, Some("4")));
    assert_eq!(r.header("Content-Type"), Some("text/html"));
    assert_eq!(r.text(), "<html>bad gateway</html>");
    assert_eq!(list_as(&s, &p), r#"[{"name":"p3"}]"#);
    // A 204 or a redirect: no body, no type.
    fault(
        &s,
        json!({"match":{"method":"GET"},"action":{"kind":"status","status":204},"times":1}),
    );
    let (got, _) = raw_until_end(&s, &Req::get("/plants").token(&p));
    let text = String::from_utf8(got).unwrap();
    assert!(text.starts_with("HTTP/1.1 204 No Content\r\n"), "{text}");
    assert!(
        text.ends_with("\r\n\r\n") && !text.contains("Content-Type"),
        "{text}"
    );
    fault(
        &s,
        json!({"match":{"method":"GET"},"action":{"kind":"status","status":301},"times":1}),
    );
    let r = s.request(&Req::get("/plants").token(&p));
    assert_eq!(r.status, 301);
    assert_eq!(r.text(), err(301, "a fault of test control answered 301"));
}

#[test]
fn a_delay_range_waits_a_time_from_its_range_and_shows_its_seed() {
    if no_test_control() {
        return;
    }
    let s = controlled(":memory:").start();
    let p = principal(&s, "slow");
    let f = fault(
        &s,
        json!({"match":{"principal":"slow"},"action":{"kind":"delay","ms":{"min":150,"max":300}}}),
    );
    assert_eq!(
        f["action"],
        json!({"kind":"delay","ms":{"min":150,"max":300}})
    );
    let seed = f["seed"].as_u64().expect("a seed is picked for the delays");
    for _ in 0..3 {
        let started = Instant::now();
        assert_eq!(s.request(&Req::get("/plants").token(&p)).status, 200);
        assert!(started.elapsed() >= Duration::from_millis(150));
    }
    assert_eq!(faults(&s)[0]["hits"], 3);
    let given = fault(
        &s,
        json!({"action":{"kind":"delay","ms":{"min":0,"max":10}},"seed":seed}),
    );
    assert_eq!(given["seed"], json!(seed));
}

/// docs/testing.md's cheat sheet: each fault in it is taken as written (a `match` alone
/// with an action added).
#[test]
fn the_cheat_sheet_s_faults_are_taken_as_written() {
    if no_test_control() {
        return;
    }
    let doc = include_str!("../../docs/testing.md");
    let sheet = doc.split("\n## Cheat sheet").nth(1).unwrap();
    let sheet = sheet.split("\n## ").next().unwrap();
    let s = controlled(":memory:").start();
    let mut taken = 0;
    for row in sheet
        .lines()
        .filter(|l| l.starts_with("| ") && !l.starts_with("| failure"))
    {
        let cell = row.split(" | ").nth(1).unwrap();
        let json = cell.split('`').nth(1).unwrap();
        let body = match json.strip_prefix("\"match\":") {
            Some(m) => format!(r#"{{"match":{m},"action":{{"kind":"close"}}}}"#),
            None => json.to_owned(),
        };
        let r = s.request(&ctl("POST", "/_control/faults").json(&body));
        assert_eq!(r.status, 201, "{body}: {}", r.text());
        taken += 1;
    }
    assert_eq!(taken, 9, "{sheet}");
}

/// `match.body` compares numbers exactly, as a creation body's `id` is read: 2^53 + 1 is
/// not 2^53 (as one double), and `9007199254740993.0` is 2^53 + 1.
#[test]
fn a_body_s_numbers_match_exactly_never_through_a_float() {
    if no_test_control() {
        return;
    }
    let s = controlled(":memory:").start();
    let p = principal(&s, "exact");
    let post = |id: &str| {
        let body = format!(r#"{{"id":{id},"name":"n"}}"#);
        s.request(&create_as(&p, &body)).status
    };
    let add = |text: &str| {
        let r = s.request(&ctl("POST", "/_control/faults").json(text));
        assert_eq!(r.status, 201, "{}", r.text());
    };
    add(r#"{"match":{"body":{"id":9007199254740992.0}},"action":{"kind":"status","status":599}}"#);
    assert_eq!(post("9007199254740993"), 200, "2^53 + 1 is not 2^53");
    assert_eq!(post("9007199254740992"), 599);
    assert_eq!(s.request(&ctl("DELETE", "/_control/faults")).status, 204);
    add(r#"{"match":{"body":{"id":9007199254740995}},"action":{"kind":"status","status":598}}"#);
    assert_eq!(post("9007199254740994.0"), 200);
    assert_eq!(post("9007199254740995.0"), 598, "the same integer, exactly");
    // Stored: 2^53 + 1 and 2^53 + 2; the faulted ones were not carried out.
    assert_eq!(names(&list_as(&s, &p)), ["n", "n"]);
}

/// A 205 (Reset Content) has no content (RFC 9110 §15.3.6), as a 204: `body` or
/// `content_type` with it is 400, and its answer has an empty body, no type, and says so
/// (`Content-Length: 0`: unlike a 204's, a 205's end is not known without it).
#[test]
fn a_205_has_no_body() {
    if no_test_control() {
        return;
    }
    let s = controlled(":memory:").start();
    let p = principal(&s, "reset-content");
    for member in ["\"body\":\"x\"", "\"content_type\":\"text/plain\""] {
        let body = format!(r#"{{"action":{{"kind":"status","status":205,{member}}}}}"#);
        let name = member.split('"').nth(1).unwrap();
        assert_eq!(
            refused(&s, &body),
            format!("action.{name}: a 205 answer has no body")
        );
    }
    fault(
        &s,
        json!({"match":{"method":"GET"},"action":{"kind":"status","status":205},"times":1}),
    );
    // On a kept-alive connection, the next answer follows it.
    let (mut c, twice) = listed_twice(&s, &p);
    let reset = read_response(&mut c).unwrap();
    assert_eq!(reset.status, 205);
    assert_eq!(reset.header("Content-Length"), Some("0"));
    assert_eq!(reset.header("Content-Type"), None);
    assert_eq!(reset.body, b"");
    if twice {
        assert_eq!(read_response(&mut c).unwrap().text(), "[]");
    }
}

/// `GET /plants` as `principal`, twice on one kept-alive connection natively, once under
/// an emulator (where a connection serves one request, `EMULATED_TCP_INFO`): the
/// connection, and whether a second answer is to follow the first.
fn listed_twice(s: &TestServer, principal: &str) -> (std::net::TcpStream, bool) {
    let mut c = s.connect();
    let list = Req::get("/plants").token(principal).keep_alive();
    let twice = emulator().is_none();
    let sent = match twice {
        true => [list.bytes(), list.bytes()].concat(),
        false => list.bytes(),
    };
    c.write_all(&sent).unwrap();
    (c, twice)
}
