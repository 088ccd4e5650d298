//! Test control's faults (docs/control.md, "Faults"): `/_control/faults` and its bodies,
//! each action before and after the commit, `times` and a seeded `probability`, what is
//! never faulted, faults seen by a raw TCP client, the access log and the journal.
//! SQLite only (test control is). Delays, cut streams and webhook deliveries are in
//! `faults_later.rs`.

use crate::control::{CONTROL, controlled, create_as, ctl, list_as, mint};
use crate::support::*;
use serde_json::{Value, json};
use std::io::{Read, Write};

/// Adds a fault: its stored JSON.
pub(crate) fn fault(s: &TestServer, body: Value) -> Value {
    let r = s.request(&ctl("POST", "/_control/faults").json(&body.to_string()));
    assert_eq!(r.status, 201, "{}", r.text());
    r.json()
}

pub(crate) fn faults(s: &TestServer) -> Value {
    let r = s.request(&ctl("GET", "/_control/faults"));
    assert_eq!(r.status, 200, "{}", r.text());
    r.json()
}

/// A principal of its own: its token.
pub(crate) fn principal(s: &TestServer, name: &str) -> String {
    mint(s, &json!({ "principal": name }).to_string())["token"]
        .as_str()
        .unwrap()
        .to_owned()
}

pub(crate) fn plant(id: i64) -> String {
    format!(r#"{{"id":{id},"name":"p{id}"}}"#)
}

fn events(s: &TestServer, token: &str) -> usize {
    elements(&events_as(s, token, "").text()).len()
}

/// Sends raw request bytes on a new connection; what came back until the connection
/// ended, and whether it ended with a reset.
pub(crate) fn raw_until_end(s: &TestServer, req: &Req) -> (Vec<u8>, bool) {
    let mut c = s.connect();
    c.write_all(&req.bytes()).unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match c.read(&mut buf) {
            Ok(0) => return (got, false),
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return (got, true),
            Err(e) => panic!("reading: {e}"),
        }
    }
}

#[test]
fn fault_bodies_are_checked_member_by_member_and_faults_are_listed_and_removed() {
    if no_test_control() {
        return;
    }
    let s = controlled(":memory:").start();
    for (body, member) in [
        (
            r#"{"match":{"path":"plants"},"action":{"kind":"close"}}"#,
            "match.path",
        ),
        (
            r#"{"match":{"colour":"red"},"action":{"kind":"close"}}"#,
            "match.colour",
        ),
        (
            r#"{"action":{"kind":"status","status":600}}"#,
            "action.status",
        ),
        (r#"{"action":{"kind":"status"}}"#, "action.status"),
        (r#"{"action":{"kind":"close"},"times":0}"#, "times"),
        (r#"{"action":{"kind":"close"},"times":1000001}"#, "times"),
        (
            r#"{"action":{"kind":"close"},"probability":0}"#,
            "probability",
        ),
        (r#"{"action":{"kind":"delay","ms":60001}}"#, "action.ms"),
        (r#"{"action":{"kind":"truncate"},"when":"before"}"#, "when"),
        (
            r#"{"action":{"kind":"cut_stream","after_events":1},"when":"before"}"#,
            "when",
        ),
        (r#"{"action":{"kind":"melt"}}"#, "action.kind"),
        (r#"{"action":{"kind":"close"},"extra":true}"#, "extra"),
        (
            r#"{"match":{"webhook":"wh_1"},"action":{"kind":"truncate"}}"#,
            "action.kind",
        ),
        (r#"{"action":{"kind":"close"},"seed":3}"#, "seed"),
    ] {
        let r = s.request(&ctl("POST", "/_control/faults").json(body));
        assert_eq!(r.status, 400, "{body}: {}", r.text());
        let message = r.json()["message"].as_str().unwrap().to_owned();
        assert!(
            message.starts_with(&format!("{member}:")),
            "{body}: {message}"
        );
    }
    assert_eq!(faults(&s), json!([]), "nothing is kept of a refused fault");
    let one = fault(
        &s,
        json!({"match":{"method":"POST","path":"/plants*"},"action":{"kind":"status","status":503,"retry_after":2},"times":2}),
    );
    let id = one["id"].as_str().unwrap().to_owned();
    assert!(id.starts_with("flt_"), "{one}");
    assert_eq!(
        one,
        json!({"id":id,"match":{"method":"POST","path":"/plants*"},"when":"before",
               "action":{"kind":"status","status":503,"retry_after":2},"times":2,
               "probability":null,"seed":null,"hits":0,"remaining":2})
    );
    let cut = fault(&s, json!({"action":{"kind":"truncate"},"probability":0.5}));
    assert_eq!(cut["when"], "after", "truncate is always after: {cut}");
    let seed = cut["seed"]
        .as_u64()
        .expect("a seed the server picked is shown");
    assert!(seed <= 1 << 53);
    let list = faults(&s);
    assert_eq!(list.as_array().unwrap().len(), 2);
    assert_eq!(
        (list[0]["id"].clone(), list[1]["seed"].clone()),
        (json!(id), json!(seed))
    );
    check(
        &s,
        &[
            (
                ctl("DELETE", &format!("/_control/faults/{id}")),
                204,
                &[],
                String::new(),
            ),
            (
                ctl("DELETE", &format!("/_control/faults/{id}")),
                404,
                &[],
                err(404, &format!("no fault {id}")),
            ),
            (
                ctl("PUT", "/_control/faults"),
                405,
                &[("Allow", "GET, POST, DELETE")],
                err(405, "method not allowed here; allowed: GET, POST, DELETE"),
            ),
            (
                Req::new("GET", "/_control/faults").token(TOKEN),
                401,
                &[],
                err(401, "the bearer token is unknown or revoked"),
            ),
            (ctl("DELETE", "/_control/faults"), 204, &[], String::new()),
            (ctl("GET", "/_control/faults"), 200, &[], "[]".into()),
        ],
    );
    // A reset clears them too.
    fault(&s, json!({"action":{"kind":"close"}}));
    assert_eq!(s.request(&ctl("POST", "/_control/reset")).status, 204);
    assert_eq!(faults(&s), json!([]));
}

#[test]
fn fail_twice_then_succeed_and_the_fault_is_named_in_the_log_and_the_journal() {
    if no_test_control() {
        return;
    }
    let s = controlled(":memory:").start();
    let p = principal(&s, "p-twice");
    let f = fault(
        &s,
        json!({"match":{"method":"POST","path":"/plants","principal":"p-twice"},
               "action":{"kind":"status","status":503,"retry_after":2,"message":"try later"},"times":2}),
    );
    let id = f["id"].as_str().unwrap();
    for _ in 0..2 {
        let r = s.request(&create_as(&p, &plant(1)));
        assert_eq!(
            (r.status, r.header("Retry-After")),
            (503, Some("2")),
            "{}",
            r.text()
        );
        assert_eq!(r.text(), err(503, "try later"));
    }
    assert_eq!(
        list_as(&s, &p),
        "[]",
        "a fault before the commit changes nothing"
    );
    assert_eq!(events(&s, &p), 0);
    let r = s.request(&create_as(&p, &plant(1)));
    assert_eq!(r.status, 200, "{}", r.text());
    let list = faults(&s);
    assert_eq!(
        (list[0]["hits"].clone(), list[0]["remaining"].clone()),
        (json!(2), json!(0))
    );
    let log = s.log_when(|l| l.matches(&format!("fault={id}")).count() >= 2);
    assert!(
        log.lines()
            .any(|l| l.contains("POST /plants 503") && l.contains(&format!("p-twice fault={id}"))),
        "{log}"
    );
    let journal = s
        .request(&ctl("GET", "/_control/requests?path=/plants&method=POST"))
        .json();
    let named: Vec<_> = journal
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["status"].clone(), e["fault"].clone()))
        .collect();
    assert_eq!(
        named,
        [
            (json!(503), json!(id)),
            (json!(503), json!(id)),
            (json!(200), Value::Null)
        ]
    );
}

#[test]
fn the_answer_is_lost_after_the_commit() {
    if no_test_control() {
        return;
    }
    let s = controlled(":memory:").start();
    let p = principal(&s, "p-lost");
    fault(
        &s,
        json!({"match":{"principal":"p-lost"},"when":"after","action":{"kind":"status","status":503},"times":1}),
    );
    let r = s.request(&create_as(&p, &plant(7)));
    assert_eq!(r.status, 503);
    assert_eq!(r.text(), err(503, "a fault of test control answered 503"));
    assert!(list_as(&s, &p).contains(r#""name":"p7""#));
    assert_eq!(events(&s, &p), 1, "the event was appended too");
    // A retry finds its plant.
    assert_eq!(s.request(&create_as(&p, &plant(7))).status, 409);
}

#[test]
fn faults_never_cross_principals_and_refused_requests_use_up_nothing() {
    if no_test_control() {
        return;
    }
    let s = controlled(":memory:")
        .arg("--rate-limit 2/m")
        .arg("--rate-burst 2")
        .start();
    let (a, b) = (principal(&s, "a"), principal(&s, "b"));
    fault(
        &s,
        json!({"match":{"principal":"a"},"action":{"kind":"status","status":500},"times":1}),
    );
    fault(
        &s,
        json!({"match":{"path":"/plants*"},"action":{"kind":"status","status":502},"times":1}),
    );
    // Refused by the route, the token or the rate limit: never faulted, nothing used.
    assert_eq!(
        s.request(&Req::get("/plants").token("no-such-token-000"))
            .status,
        401
    );
    assert_eq!(s.request(&Req::get("/nothing").token(&a)).status, 404);
    assert_eq!(s.request(&Req::new("PUT", "/plants").token(&a)).status, 405);
    assert_eq!(s.request(&Req::get("/healthz")).status, 200);
    assert_eq!(s.request(&Req::get("/plants").token(CONTROL)).status, 401);
    let list = faults(&s);
    assert_eq!(
        (list[0]["hits"].clone(), list[1]["hits"].clone()),
        (json!(0), json!(0))
    );
    // b is never taken by a's fault; the second (any principal) takes b's first request.
    assert_eq!(s.request(&Req::get("/plants").token(&b)).status, 502);
    assert_eq!(s.request(&Req::get("/plants").token(&b)).status, 200);
    assert_eq!(
        s.request(&Req::get("/plants").token(&b)).status,
        429,
        "b's budget is spent"
    );
    let list = faults(&s);
    assert_eq!(
        (list[0]["hits"].clone(), list[1]["hits"].clone()),
        (json!(0), json!(1))
    );
    assert_eq!(s.request(&Req::get("/plants").token(&a)).status, 500);
}

#[test]
fn a_probability_with_a_seed_gives_the_same_pattern_on_two_servers() {
    if no_test_control() {
        return;
    }
    let pattern = || {
        let s = controlled(":memory:").start();
        let p = principal(&s, "p");
        fault(
            &s,
            json!({"action":{"kind":"status","status":503},"probability":0.5,"seed":1234}),
        );
        let out: String = (0..24)
            .map(|_| match s.request(&Req::get("/plants").token(&p)).status {
                503 => 'x',
                200 => '.',
                other => panic!("{other}"),
            })
            .collect();
        let hits = faults(&s)[0]["hits"].as_u64().unwrap();
        assert_eq!(hits as usize, out.matches('x').count());
        out
    };
    let first = pattern();
    assert!(first.contains('x') && first.contains('.'), "{first}");
    assert_eq!(first, pattern());
}

#[test]
fn reset_close_and_truncate_as_a_raw_tcp_client_sees_them() {
    if no_test_control() {
        return;
    }
    let s = controlled(":memory:").start();
    let p = principal(&s, "raw");
    // Before: no answer, nothing carried out.
    fault(&s, json!({"action":{"kind":"reset"},"times":1}));
    let (got, reset) = raw_until_end(&s, &create_as(&p, &plant(1)));
    assert!(
        got.is_empty() && reset,
        "{:?} reset={reset}",
        String::from_utf8_lossy(&got)
    );
    fault(&s, json!({"action":{"kind":"close"},"times":1}));
    let (got, reset) = raw_until_end(&s, &create_as(&p, &plant(2)));
    assert!(
        got.is_empty() && !reset,
        "{:?} reset={reset}",
        String::from_utf8_lossy(&got)
    );
    assert_eq!(list_as(&s, &p), "[]");
    // After: carried out, then no answer.
    fault(
        &s,
        json!({"when":"after","action":{"kind":"reset"},"times":1}),
    );
    let (got, reset) = raw_until_end(&s, &create_as(&p, &plant(3)));
    assert!(got.is_empty() && reset);
    fault(
        &s,
        json!({"when":"after","action":{"kind":"close"},"times":1}),
    );
    let (got, reset) = raw_until_end(&s, &create_as(&p, &plant(4)));
    assert!(got.is_empty() && !reset);
    let full = list_as(&s, &p);
    assert!(
        full.contains(r#""name":"p3""#) && full.contains(r#""name":"p4""#),
        "{full}"
    );
    // Truncate: the head (with the whole length) and less than the body.
    fault(
        &s,
        json!({"match":{"method":"GET"},"action":{"kind":"truncate"},"times":1}),
    );
    let (got, _) = raw_until_end(&s, &Req::get("/plants").token(&p));
    let text = String::from_utf8_lossy(&got).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").expect("a whole head");
    assert!(head.starts_with("HTTP/1.1 200 OK\r\n"), "{head}");
    assert!(
        head.contains(&format!("Content-Length: {}", full.len())),
        "{head}"
    );
    assert!(
        !body.is_empty() && body.len() < full.len() && full.starts_with(body),
        "{body} of {full}"
    );
    // No body: part of the head.
    fault(
        &s,
        json!({"match":{"method":"DELETE"},"action":{"kind":"truncate"},"times":1}),
    );
    let (got, _) = raw_until_end(&s, &Req::new("DELETE", "/plants/3").token(&p));
    let text = String::from_utf8_lossy(&got).into_owned();
    assert!(
        text.starts_with("HTTP/1.1 2") && !text.contains("\r\n\r\n"),
        "{text:?}"
    );
    let left = list_as(&s, &p);
    assert!(
        !left.contains(r#""name":"p3""#),
        "the delete was carried out: {left}"
    );
    // Each is named in the journal; no answer is `status: null`.
    let journal = s
        .request(&ctl("GET", "/_control/requests?principal=raw"))
        .json();
    let statuses: Vec<_> = journal
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| !e["fault"].is_null())
        .map(|e| e["status"].clone())
        .collect();
    assert_eq!(
        statuses,
        [
            Value::Null,
            Value::Null,
            Value::Null,
            Value::Null,
            json!(200),
            json!(204)
        ]
    );
    // A request with no answer is logged with status 0 and its fault.
    let log = s.log_when(|l| l.contains("POST /plants 0 0 "));
    assert!(
        log.lines()
            .any(|l| l.contains("POST /plants 0 0 ") && l.contains("raw fault=flt_")),
        "{log}"
    );
}
