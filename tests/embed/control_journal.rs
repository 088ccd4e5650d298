//! The typed journal (`Running::control().requests()`): a retried body and its headers,
//! and a body not UTF-8 shown in base64.

use crate::client::get;
use crate::control::{controlled, raw};
use crate::shared;
use plant_store::control::{Fault, Match, Query};
use std::time::{Duration, SystemTime};

#[test]
fn the_journal_shows_a_retried_body_and_its_headers() {
    let _g = shared();
    let s = controlled();
    let control = s.control().unwrap();
    let carol = control.mint("carol").unwrap();
    control
        .fault(
            Fault::on(Match::post("/plants").principal("carol"))
                .status(503)
                .times(1),
        )
        .unwrap();
    let body = r#"{"id":3,"name":"Fern","tag":"green"}"#;
    let send = || {
        let head = format!(
            "POST /plants HTTP/1.1\r\nHost: t\r\nUser-Agent: my-client/1.0\r\n\
             X-Request-Id: r-1\r\nAuthorization: Bearer {}\r\nConnection: close\r\n\
             Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            carol.token,
            body.len()
        );
        let answer = raw(&s, head.as_bytes());
        String::from_utf8(answer).unwrap()[9..12].to_owned()
    };
    // The retry waits for the first answer; a listing in another thread waits for both.
    let sent = std::thread::scope(|t| {
        let both = t.spawn(|| {
            let q = Query::all().principal("carol").method("POST");
            control.journal(q.wait(Duration::from_secs(10)).min(2))
        });
        assert_eq!(send(), "503");
        assert_eq!(send(), "200");
        both.join().unwrap().unwrap()
    });
    assert_eq!(sent.len(), 2, "{sent:?}");
    let (first, retry) = (&sent[0], &sent[1]);
    assert_eq!((first.status, retry.status), (Some(503), Some(200)));
    assert!(first.fault.is_some() && retry.fault.is_none());
    assert_eq!(first.n + 1, retry.n);
    for e in &sent {
        assert_eq!(
            (e.method.as_str(), e.path.as_str(), e.query.as_str()),
            ("POST", "/plants", "")
        );
        assert_eq!(e.body.as_deref(), Some(body));
        assert_eq!(e.body_json(), Some(serde_json::from_str(body).unwrap()));
        assert_eq!(e.body_bytes(), Some(body.as_bytes().to_vec()));
        assert_eq!((e.body_base64.as_deref(), e.body_truncated), (None, false));
        assert_eq!(e.header("user-agent"), Some("my-client/1.0"));
        assert_eq!(e.header("X-Request-Id"), Some("r-1"));
        assert_eq!(e.header("Authorization"), Some("Bearer [redacted]"));
        assert_eq!(e.headers[0], ("Host".to_owned(), "t".to_owned()));
        assert_eq!(e.token, Some(carol.fingerprint()));
        assert_eq!(e.principal.as_deref(), Some("carol"));
        assert!(e.answered && e.duration_ms.is_some());
        let at = e.at.to_system_time().expect("an RFC 3339 time");
        let age = SystemTime::now().duration_since(at).unwrap();
        assert!(age < Duration::from_secs(60), "{:?}", e.at);
    }
    // Every filter is the listing's.
    let only = |q: Query| -> Vec<u64> {
        let listed = control.journal(q).unwrap();
        listed.iter().map(|e| e.n).collect()
    };
    let (a, b) = (first.n, retry.n);
    assert_eq!(only(Query::all().principal("carol").status(503)), [a]);
    assert_eq!(only(Query::all().principal("carol").status_class(2)), [b]);
    assert_eq!(only(Query::all().principal("carol").after(a)), [b]);
    assert_eq!(only(Query::all().principal("carol").limit(1)), [a]);
    assert_eq!(
        only(Query::all().path("/plants").principal("carol")),
        [a, b]
    );
    assert_eq!(
        only(Query::all().path_prefix("/pl").principal("carol")),
        [a, b]
    );
    assert!(only(Query::all().path("/pl").principal("carol")).is_empty());
    assert!(only(Query::all().method("GET").principal("carol")).is_empty());
    // The journal's clear: empty, and `n` from 1 again.
    control.clear_journal().unwrap();
    assert_eq!(control.journal(Query::all()).unwrap(), []);
    get(s.addr(), "/healthz", None);
    assert_eq!(only(Query::all()), [1]);
}

#[test]
fn a_body_not_utf8_is_shown_in_base64() {
    let _g = shared();
    let s = controlled();
    let control = s.control().unwrap();
    let p = control.mint("bytes").unwrap();
    let head = format!(
        "POST /plants HTTP/1.1\r\nHost: t\r\nConnection: close\r\nContent-Type: application/json\r\n\
         Authorization: Bearer {}\r\nContent-Length: 2\r\n\r\n",
        p.token
    );
    let mut sent = head.into_bytes();
    sent.extend_from_slice(b"\xff\xfe");
    let answer = raw(&s, &sent);
    assert!(answer.starts_with(b"HTTP/1.1 400"), "{answer:?}");
    let entries = control.journal(Query::all().principal("bytes")).unwrap();
    assert_eq!(entries.len(), 1);
    let e = &entries[0];
    assert_eq!(
        (e.body.as_deref(), e.body_base64.as_deref()),
        (None, Some("//4="))
    );
    assert_eq!(e.body_bytes(), Some(vec![0xff, 0xfe]));
    assert_eq!(e.body_json(), None);
}
