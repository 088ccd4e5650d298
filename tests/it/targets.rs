//! Request targets (RFC 9112 3.2): a path (origin-form) is served; so is an absolute URL
//! (absolute-form, which a server must accept), as its path and query, its authority
//! checked against nothing; `*` is 400 and the connection closed, whatever the method.

use crate::control::{controlled, ctl};
use crate::support::*;
use std::io::Write;

/// A request head with `target`, the test token and `extra` header lines.
fn head(method: &str, target: &str, extra: &str) -> String {
    format!(
        "{method} {target} HTTP/1.1\r\nHost: test\r\nAuthorization: Bearer {TOKEN}\r\n{extra}\r\n"
    )
}

#[test]
fn an_absolute_form_target_is_served_as_its_path_and_query() {
    let s = TestServer::memory();
    let here = format!("http://{}", s.addr);
    let r = s.raw(head("GET", &format!("{here}/healthz"), "Connection: close\r\n").as_bytes());
    assert_eq!((r.status, r.text()), (200, r#"{"status":"ok"}"#.into()));
    // The authority is checked against nothing; the scheme's case is any.
    let create = format!(
        "{}{}",
        head(
            "POST",
            "HTTP://plants.example:9/plants",
            "Content-Type: application/json\r\nContent-Length: 22\r\nConnection: close\r\n"
        ),
        r#"{"id":7,"name":"Fern"}"#
    );
    let r = s.raw(create.as_bytes());
    assert_eq!((r.status, r.text()), (200, r#"{"name":"Fern"}"#.into()));
    let r = s.raw(
        head(
            "GET",
            "https://elsewhere/plants?limit=1",
            "Connection: close\r\n",
        )
        .as_bytes(),
    );
    assert_eq!((r.status, r.text()), (200, r#"[{"name":"Fern"}]"#.into()));
    // The query is the request's: an unknown parameter is refused as in origin-form.
    let r = s.raw(
        head(
            "GET",
            &format!("{here}/plants?limt=1"),
            "Connection: close\r\n",
        )
        .as_bytes(),
    );
    assert_eq!(r.status, 400, "{}", r.text());
    assert_eq!(r.text(), err(400, "unknown query parameter `limt`"));
    let r = s.raw(
        head(
            "DELETE",
            &format!("{here}/plants/7"),
            "Connection: close\r\n",
        )
        .as_bytes(),
    );
    assert_eq!(r.status, 204);
    let r = s.raw(head("GET", &format!("{here}/nowhere"), "Connection: close\r\n").as_bytes());
    assert_eq!(
        (r.status, r.text()),
        (404, err(404, "no such path: /nowhere"))
    );
    // The access log names the path, as for origin-form.
    let log = s.log_when(|l| l.contains("DELETE /plants/7 204"));
    for line in [
        "GET /healthz 200",
        "POST /plants 200",
        "GET /plants?limit=… 200",
        "GET /nowhere 404",
    ] {
        assert!(log.contains(line), "{line}:\n{log}");
    }
    assert!(!log.contains("http://"), "{log}");
}

#[test]
fn absolute_form_keeps_the_connection_alive_and_pipelined_requests_are_each_served() {
    if native_only(EMULATED_TCP_INFO) {
        return;
    }
    let s = TestServer::memory();
    let here = format!("http://{}", s.addr);
    // One after the other on one connection.
    let mut c = s.connect();
    for target in [
        format!("{here}/healthz"),
        "/healthz".into(),
        format!("{here}/plants"),
    ] {
        c.write_all(head("GET", &target, "").as_bytes()).unwrap();
        let r = read_response(&mut c).unwrap();
        assert_eq!(r.status, 200, "{target}: {}", r.text());
        assert_eq!(r.header("Connection"), None, "{target}");
    }
    // Pipelined: three heads at once, three answers in order, the connection still open.
    let three = [
        head("GET", &format!("{here}/plants"), ""),
        head("GET", "/healthz", ""),
        head("GET", "http://x/openapi.json", ""),
    ]
    .concat();
    c.write_all(three.as_bytes()).unwrap();
    let answers: Vec<(u16, bool)> = (0..3)
        .map(|_| {
            let r = read_response(&mut c).unwrap();
            (
                r.status,
                r.text().starts_with('{') || r.text().starts_with('['),
            )
        })
        .collect();
    assert_eq!(answers, [(200, true), (200, true), (200, true)]);
    c.write_all(head("GET", "/healthz", "").as_bytes()).unwrap();
    assert_eq!(read_response(&mut c).unwrap().status, 200);
}

#[test]
fn a_star_target_is_400_and_closes_the_connection_whatever_the_method() {
    let s = TestServer::memory();
    let star = err(
        400,
        "the request target `*` is not served: send a path that starts with /",
    );
    for method in ["OPTIONS", "GET", "POST", "DELETE"] {
        let mut c = s.connect();
        // The next request on the connection is never read.
        let bytes = format!("{}{}", head(method, "*", ""), head("GET", "/healthz", ""));
        c.write_all(bytes.as_bytes()).unwrap();
        let r = read_response(&mut c).unwrap();
        assert_eq!((r.status, r.text()), (400, star.clone()), "{method}");
        assert_eq!(r.header("Connection"), Some("close"), "{method}");
        assert!(rest_until_closed(&mut c).is_empty(), "{method}");
    }
    // Nor anything that is neither a path nor an http URL.
    let mut c = s.connect();
    c.write_all(head("GET", "ftp://h/healthz", "").as_bytes())
        .unwrap();
    let r = read_response(&mut c).unwrap();
    assert_eq!(
        (r.status, r.text()),
        (
            400,
            err(
                400,
                "the request target must be a path that starts with /, or an absolute http URL"
            )
        )
    );
    assert!(rest_until_closed(&mut c).is_empty());
}

#[test]
fn a_star_after_a_served_request_closes_the_connection_after_its_400() {
    if native_only(EMULATED_TCP_INFO) {
        return;
    }
    let s = TestServer::memory();
    let mut c = s.connect();
    let bytes = [
        head("GET", "/healthz", ""),
        head("OPTIONS", "*", ""),
        head("GET", "/healthz", ""),
    ]
    .concat();
    c.write_all(bytes.as_bytes()).unwrap();
    assert_eq!(read_response(&mut c).unwrap().status, 200);
    let r = read_response(&mut c).unwrap();
    assert_eq!((r.status, r.header("Connection")), (400, Some("close")));
    assert!(
        rest_until_closed(&mut c).is_empty(),
        "the third was answered"
    );
}

#[test]
fn test_controls_journal_and_faults_see_an_absolute_targets_path() {
    if no_test_control() {
        return;
    }
    let s = controlled(":memory:").start();
    let fault = r#"{"match":{"method":"GET","path":"/plants"},"action":{"kind":"status","status":503},"times":1}"#;
    assert_eq!(
        s.request(&ctl("POST", "/_control/faults").json(fault))
            .status,
        201
    );
    let target = format!("http://{}/plants?limit=2", s.addr);
    let r = s.raw(head("GET", &target, "Connection: close\r\n").as_bytes());
    assert_eq!(r.status, 503, "the fault on /plants took it: {}", r.text());
    let journal = s.request(&ctl("GET", "/_control/requests")).json();
    assert_eq!(
        (
            &journal[0]["path"],
            &journal[0]["query"],
            &journal[0]["status"]
        ),
        (&"/plants".into(), &"limit=2".into(), &503.into()),
        "{journal}"
    );
}

#[test]
fn the_journal_shows_an_odd_absolute_target_as_it_was_routed() {
    if no_test_control() {
        return;
    }
    let s = controlled(":memory:").start();
    // (target, the path and query it is routed as): a `?` or `#`-free authority ends at
    // the first `/` or `?`, so these are served as `/`, not as what follows.
    let odd = [
        ("http://h?x/plants", "/", "x/plants"),
        ("http://h?/_control/reset", "/", "/_control/reset"),
        ("HTTP://h:80?limit=1", "/", "limit=1"),
        ("https://h/plants?limit=1", "/plants", "limit=1"),
    ];
    let mut served = Vec::new();
    for (target, _, _) in odd {
        let r = s.raw(head("GET", target, "Connection: close\r\n").as_bytes());
        served.push(r.status);
    }
    let journal = s.request(&ctl("GET", "/_control/requests")).json();
    let shown: Vec<_> = journal
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["path"].as_str().unwrap().to_owned(),
                e["query"].as_str().unwrap().to_owned(),
                e["status"].as_u64().unwrap() as u16,
            )
        })
        .collect();
    let want: Vec<_> = odd
        .iter()
        .zip(&served)
        .map(|((_, path, query), status)| (path.to_string(), query.to_string(), *status))
        .collect();
    assert_eq!(shown, want, "{journal}");
    assert_eq!(served[3], 200);
}
