//! Test control typed and in-process (`Running::control()`, `plant_store::control`):
//! every method against a real server, what it did seen where a client sees it (over
//! HTTP), and its refusals the HTTP surface's own. The faults' types and listing are in
//! `control_faults.rs`, the journal in `control_journal.rs`.

use crate::client::{Answer, get, request};
use crate::shared;
use plant_store::control::{Fault, Match, Mint, Query, Scope, Status};
use plant_store::{Running, Server};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant, SystemTime};

pub(crate) fn controlled() -> Running {
    Server::builder()
        .test_control()
        .workers(2)
        .start()
        .expect("the server starts")
}

pub(crate) fn create(s: &Running, token: &str, id: i64) -> Answer {
    let body = format!(r#"{{"id":{id},"name":"Fern"}}"#);
    request(s.addr(), "POST", "/plants", Some(token), Some(&body))
}

/// Sends `bytes` on a connection of its own and reads until the server ends it: what
/// came (nothing when the connection was reset).
pub(crate) fn raw(s: &Running, bytes: &[u8]) -> Vec<u8> {
    let mut tcp = TcpStream::connect(s.addr()).unwrap();
    tcp.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    tcp.write_all(bytes).unwrap();
    let mut got = Vec::new();
    match tcp.read_to_end(&mut got) {
        Ok(_) => got,
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => got,
        Err(e) => panic!("reading the answer: {e}"),
    }
}

#[test]
fn without_test_control_control_is_a_404_error() {
    let _g = shared();
    let s = Server::builder().workers(2).start().unwrap();
    let e = s.control().unwrap_err();
    assert_eq!(e.status(), 404);
    assert!(e.message().contains("Builder::test_control()"), "{e}");
    assert_eq!(s.control_token(), None);
    // With it, the control token is the one the typed control uses: one door.
    let c = Server::builder()
        .control_token("a-control-token-of-mine")
        .workers(2)
        .start()
        .unwrap();
    c.control().unwrap().reset().unwrap();
    assert_eq!(c.control_token(), Some("a-control-token-of-mine"));
}

#[test]
fn a_fault_fails_twice_then_the_create_goes_through() {
    let _g = shared();
    let s = controlled();
    let control = s.control().unwrap();
    let alice = control.mint("alice").unwrap();
    let bob = control.mint("bob").unwrap();
    let fault = Fault::on(Match::post("/plants").principal("alice"))
        .respond(Status::new(503).retry_after(1))
        .times(2);
    let stored = control.fault(fault.clone()).unwrap();
    assert!(stored.id.starts_with("flt_"), "{stored:?}");
    assert_eq!((stored.hits, stored.remaining), (0, Some(2)));
    assert_eq!(stored.fault.action, fault.action);
    let answers: Vec<u16> = (0..3).map(|_| create(&s, &alice.token, 1).status).collect();
    assert_eq!(answers, [503, 503, 200]);
    // Bob's create is none of the fault's.
    assert_eq!(create(&s, &bob.token, 1).status, 200);
    let listed = control.faults().unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!((listed[0].hits, listed[0].remaining), (2, Some(0)));
    let plants = get(s.addr(), "/plants", Some(&alice.token));
    assert_eq!(plants.body, r#"[{"name":"Fern"}]"#);
    // The 503s' body is the contract's error body.
    control.remove_fault(&listed[0].id).unwrap();
    control
        .fault(Fault::on(Match::get("/plants")).status(503).times(1))
        .unwrap();
    let refused = get(s.addr(), "/plants", Some(&alice.token));
    assert_eq!(
        (refused.status, refused.body.as_str()),
        (
            503,
            r#"{"error":503,"message":"a fault of test control answered 503"}"#
        )
    );
    control.clear_faults().unwrap();
    assert_eq!(control.faults().unwrap(), []);
}

#[test]
fn an_answer_lost_after_the_commit_leaves_the_write_committed() {
    let _g = shared();
    let s = controlled();
    let control = s.control().unwrap();
    let p = control.mint("p-lost").unwrap();
    let fault = control
        .fault(
            Fault::on(Match::post("/plants").principal("p-lost"))
                .after()
                .reset()
                .times(1),
        )
        .unwrap();
    let body = r#"{"id":7,"name":"Ivy"}"#;
    let head = format!(
        "POST /plants HTTP/1.1\r\nHost: t\r\nConnection: close\r\nAuthorization: Bearer {}\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        p.token,
        body.len()
    );
    assert_eq!(raw(&s, head.as_bytes()), b"", "no answer at all");
    // The plant was created; the client's retry is a 409.
    let listed = get(s.addr(), "/plants", Some(&p.token));
    assert_eq!(listed.body, r#"[{"name":"Ivy"}]"#);
    assert_eq!(create(&s, &p.token, 7).status, 409);
    let sent = control
        .journal(Query::all().principal("p-lost").method("POST"))
        .unwrap();
    let seen: Vec<_> = sent.iter().map(|e| (e.status, e.fault.clone())).collect();
    assert_eq!(seen, [(None, Some(fault.id)), (Some(409), None)]);
    assert!(sent.iter().all(|e| e.answered));
}

#[test]
fn a_trickle_sends_the_answer_in_pieces_and_whole_in_the_end() {
    let _g = shared();
    let s = controlled();
    let control = s.control().unwrap();
    let (piece, every) = (16, Duration::from_millis(40));
    let stored = control
        .fault(
            Fault::on(Match::get("/healthz"))
                .trickle(piece, 40)
                .times(1),
        )
        .unwrap();
    assert_eq!(stored.fault.when, Some(plant_store::control::When::After));
    let mut tcp = TcpStream::connect(s.addr()).unwrap();
    tcp.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let sent = Instant::now();
    tcp.write_all(b"GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n")
        .unwrap();
    let (mut got, mut reads, mut buf) = (Vec::new(), Vec::new(), [0u8; 4096]);
    loop {
        match tcp.read(&mut buf).unwrap() {
            0 => break,
            n => {
                got.extend_from_slice(&buf[..n]);
                reads.push((sent.elapsed(), got.len()));
            }
        }
    }
    let text = String::from_utf8(got).unwrap();
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    assert!(text.ends_with(r#"{"status":"ok"}"#), "{text}");
    // The k-th piece (from 0) leaves `every` after the one before: it cannot have come
    // sooner than k × `every` after the request (two may be read at once).
    let pieces = text.len().div_ceil(piece as usize);
    assert!(pieces >= 4, "{} bytes", text.len());
    for (at, read) in &reads {
        let k = read.div_ceil(piece as usize) - 1;
        assert!(
            *at >= every * k as u32,
            "{read} bytes after {at:?}: {reads:?}"
        );
    }
    // Spent: the next is whole at once.
    let again = get(s.addr(), "/healthz", None);
    assert_eq!(again.body, r#"{"status":"ok"}"#);
}

#[test]
fn a_token_expires_on_the_test_clock() {
    let _g = shared();
    let s = controlled();
    let control = s.control().unwrap();
    let set = control.set_clock("2030-01-01T00:00:00Z", true).unwrap();
    assert_eq!(
        (set.now.as_str(), set.frozen),
        ("2030-01-01T00:00:00.000Z", true)
    );
    assert_eq!(control.clock().unwrap(), set);
    let eve = control
        .mint(Mint::new("eve").expires_in(Duration::from_secs(3600)))
        .unwrap();
    assert_eq!(
        eve.expires_at.as_ref().map(|t| t.as_str()),
        Some("2030-01-01T01:00:00Z")
    );
    assert_eq!(
        (eve.principal.as_str(), eve.scope),
        ("eve", Scope::ReadWrite)
    );
    assert!(
        !format!("{eve:?}").contains(&eve.token),
        "Debug shows no token"
    );
    assert_eq!(get(s.addr(), "/plants", Some(&eve.token)).status, 200);
    let moved = control.advance_clock(Duration::from_secs(7200)).unwrap();
    assert_eq!(moved.now.as_str(), "2030-01-01T02:00:00.000Z");
    assert_eq!(moved.now.unix_millis(), Some(1_893_463_200_000));
    let expired = get(s.addr(), "/plants", Some(&eve.token));
    assert_eq!(
        (expired.status, expired.body.as_str()),
        (
            401,
            r#"{"error":401,"message":"the bearer token has expired"}"#
        )
    );
    // The real clock again: 2030 is ahead, the token good.
    control.real_clock().unwrap();
    let real = control.clock().unwrap();
    assert!(!real.frozen);
    let now = SystemTime::now();
    let read = real.now.to_system_time().unwrap();
    let apart = now.duration_since(read).unwrap_or_else(|e| e.duration());
    assert!(apart < Duration::from_secs(60), "{real:?}");
    assert_eq!(get(s.addr(), "/plants", Some(&eve.token)).status, 200);
    // A time of the past (a `SystemTime`): expired from the start.
    let past = SystemTime::UNIX_EPOCH + Duration::from_secs(1);
    let old = control.mint(Mint::new("old").expires_at(past)).unwrap();
    assert_eq!(old.expires_at.unwrap().as_str(), "1970-01-01T00:00:01Z");
    assert_eq!(get(s.addr(), "/plants", Some(&old.token)).status, 401);
    // A clock set by `SystemTime` reads it to the millisecond.
    let at = SystemTime::UNIX_EPOCH + Duration::from_millis(1_700_000_000_123);
    let set = control.set_clock(at, false).unwrap();
    assert!(
        set.now.as_str().starts_with("2023-11-14T22:13:2"),
        "{set:?}"
    );
    control
        .set_clock(SystemTime::UNIX_EPOCH - Duration::from_millis(1), true)
        .map(|c| assert_eq!(c.now.as_str(), "1969-12-31T23:59:59.999Z"))
        .unwrap();
}

#[test]
fn minted_tokens_have_their_scope_and_the_token_chosen() {
    let _g = shared();
    let s = controlled();
    let control = s.control().unwrap();
    let reader = control.mint(Mint::new("r").scope(Scope::Read)).unwrap();
    assert_eq!(reader.scope, Scope::Read);
    assert_eq!(get(s.addr(), "/plants", Some(&reader.token)).status, 200);
    assert_eq!(create(&s, &reader.token, 1).status, 403);
    let chosen = "a-chosen-token-0123456789";
    let mine = control.mint(Mint::new("c").token(chosen)).unwrap();
    assert_eq!((mine.token.as_str(), mine.expires_at), (chosen, None));
    assert!(!mine.id.is_empty());
    assert_eq!(create(&s, chosen, 1).status, 200);
    let again = control.mint(Mint::new("d").token(chosen)).unwrap_err();
    assert_eq!(again.status(), 409);
    assert_eq!(again.message(), "token: this token is already stored");
    // Principals from a `String`, and many at once from several threads: each its own.
    let names: Vec<String> = (0..8).map(|i| format!("t-{i}")).collect();
    let tokens: Vec<String> = std::thread::scope(|t| {
        let made: Vec<_> = names
            .iter()
            .map(|name| t.spawn(move || control.mint(name.clone()).unwrap().token))
            .collect();
        made.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let mut distinct = tokens.clone();
    distinct.sort();
    distinct.dedup();
    assert_eq!(distinct.len(), tokens.len());
}

#[test]
fn snapshots_restore_delete_and_reset() {
    let _g = shared();
    let s = controlled();
    let control = s.control().unwrap();
    let p = control.mint("snap").unwrap();
    assert_eq!(create(&s, &p.token, 1).status, 200);
    let snap = control.snapshot().unwrap();
    assert!(snap.starts_with("snap_"), "{snap}");
    assert_eq!(create(&s, &p.token, 2).status, 200);
    control.restore(&snap).unwrap();
    let listed = get(s.addr(), "/plants", Some(&p.token));
    assert_eq!(listed.body, r#"[{"name":"Fern"}]"#);
    // Restored twice is the same store.
    assert_eq!(create(&s, &p.token, 2).status, 200);
    control.restore(&snap).unwrap();
    assert_eq!(get(s.addr(), "/plants", Some(&p.token)).body, listed.body);
    control.delete_snapshot(&snap).unwrap();
    let gone = control.restore(&snap).unwrap_err();
    assert_eq!(
        (gone.status(), gone.message()),
        (404, format!("no snapshot {snap}").as_str())
    );
    assert_eq!(control.delete_snapshot(&snap).unwrap_err().status(), 404);
    // An id with a slash or a query is an id like any, unknown.
    let odd = control.restore("snap_x/../reset?").unwrap_err();
    assert_eq!(odd.status(), 404, "{odd}");
    // At most 16 are kept.
    for _ in 0..16 {
        control.snapshot().unwrap();
    }
    let full = control.snapshot().unwrap_err();
    assert_eq!(
        (full.status(), full.message()),
        (409, "at most 16 snapshots are kept; delete one first")
    );
    // A reset: the store as at start, the snapshots and the tokens minted since gone.
    control.reset().unwrap();
    assert_eq!(get(s.addr(), "/plants", Some(&p.token)).status, 401);
    assert!(control.snapshot().is_ok());
}

#[test]
fn a_refusal_is_the_http_surface_s_status_and_message() {
    let _g = shared();
    let s = controlled();
    let control = s.control().unwrap();
    let bad = Fault::on(Match::post("/plants")).status(700);
    let typed = control.fault(bad.clone()).unwrap_err();
    let token = s.control_token().unwrap();
    let body = bad.to_json().to_string();
    let http = request(
        s.addr(),
        "POST",
        "/_control/faults",
        Some(token),
        Some(&body),
    );
    let expected = r#"{"error":400,"message":"action.status: must be an integer from 200 to 599"}"#;
    assert_eq!((http.status, http.body.as_str()), (400, expected));
    assert_eq!(
        (typed.status(), typed.message()),
        (400, "action.status: must be an integer from 200 to 599")
    );
    assert_eq!(
        typed.to_string(),
        "400 action.status: must be an integer from 200 to 599"
    );
    let refusals = [
        control.fault(Fault::on(Match::get("/metrics")).status(503)),
        control.fault(Fault::on(Match::any()).truncate().before()),
        control.fault(Fault::on(Match::any()).status(503).probability(1.5)),
        control.fault(Fault::on(Match::webhook("wh_1").method("POST")).duplicate()),
        control.fault(Fault::on(Match::any()).duplicate()),
    ];
    let starts: Vec<String> = refusals
        .into_iter()
        .map(|r| {
            let e = r.unwrap_err();
            assert_eq!(e.status(), 400, "{e}");
            e.message().split(':').next().unwrap().to_owned()
        })
        .collect();
    assert_eq!(
        starts,
        [
            "match.path",
            "when",
            "probability",
            "match.method",
            "action.kind"
        ]
    );
    let e = control.remove_fault("flt_nope").unwrap_err();
    assert_eq!((e.status(), e.message()), (404, "no fault flt_nope"));
    // Durations are whole seconds, as the surface says.
    let e = control
        .advance_clock(Duration::from_millis(1500))
        .unwrap_err();
    assert_eq!(e.status(), 400);
    assert!(
        e.message()
            .starts_with("by: must be a duration of at least 1s"),
        "{e}"
    );
    let e = control
        .journal(Query::all().wait(Duration::ZERO))
        .unwrap_err();
    assert!(
        e.message().starts_with("query parameter `wait` must be"),
        "{e}"
    );
    let e = control.journal(Query::all().status_class(9)).unwrap_err();
    assert!(
        e.message().starts_with("query parameter `status` must be"),
        "{e}"
    );
    let e = control.set_clock("yesterday", false).unwrap_err();
    assert!(
        e.message().starts_with("now: must be an RFC 3339 time"),
        "{e}"
    );
    let both = Mint::new("x")
        .expires_in(Duration::from_secs(60))
        .expires_at("2030-01-01T00:00:00Z");
    let e = control.mint(both).unwrap_err();
    assert_eq!(e.status(), 400, "{e}");
    let e = control.mint("").unwrap_err();
    assert!(e.message().starts_with("principal"), "{e}");
}

#[test]
fn calls_to_a_server_that_stopped_are_503() {
    let _g = shared();
    let s = controlled();
    s.control().unwrap().reset().unwrap();
    s.stop_flag()
        .store(true, std::sync::atomic::Ordering::SeqCst);
    // The server stops on its own thread: wait for it.
    let deadline = Instant::now() + Duration::from_secs(10);
    let refused = loop {
        match s.control().unwrap().reset() {
            Err(e) => break e,
            Ok(()) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(5)),
            Ok(()) => panic!("the server still answers"),
        }
    };
    assert_eq!(refused.status(), 503, "{refused}");
    s.stop().unwrap();
}
