//! The change feed as Server-Sent Events: resuming from `Last-Event-ID`, new events as
//! they commit, the ends (revocation, expiry, shutdown, a client that stops reading or
//! goes away) and `--max-streams`.

use crate::support::*;
use std::time::{Duration, Instant};

#[test]
fn a_stream_sends_what_follows_last_event_id_then_each_new_event_as_committed() {
    let s = TestServer::memory();
    for id in 1..=3 {
        assert_eq!(
            s.post(&format!(r#"{{"id":{id},"name":"p{id}"}}"#)).status,
            200
        );
    }
    // Last-Event-ID wins over `after`.
    let mut sse = Sse::open(&s, TOKEN, "/events?after=0", &[("Last-Event-ID", "1")]);
    assert_eq!(sse.head.status, 200);
    assert_eq!(sse.head.header("Content-Type"), Some("text/event-stream"));
    assert_eq!(sse.head.header("Cache-Control"), Some("no-store"));
    assert_eq!(sse.head.header("Connection"), Some("close"));
    assert_eq!(sse.next(), Some(Message::Comment("events".into())));
    let list = elements(&s.get("/events").text());
    for seq in 2..=3 {
        let (id, event, data) = sse.next_event().unwrap();
        assert_eq!((id, event.as_str()), (seq, "plant.created"));
        assert_eq!(data, list[seq as usize - 1], "the same bytes as the list's");
    }
    assert_eq!(s.metric("plant_store_event_streams_open"), 1.0);
    // New events arrive as they commit, the stream holding no worker meanwhile.
    served_promptly(&s, 10);
    assert_eq!(s.delete("2").status, 204);
    assert_eq!(s.post(r#"{"id":4,"name":"p4","tag":"t"}"#).status, 200);
    let (id, event, data) = sse.next_event().unwrap();
    assert_eq!((id, event.as_str()), (4, "plant.deleted"));
    assert!(data.ends_with(r#""data":{"id":2}}"#), "{data}");
    let (id, _, data) = sse.next_event().unwrap();
    assert_eq!(id, 5);
    assert_eq!(data, elements(&s.get("/events?after=4").text())[0]);
    drop(sse);
    // The client gone, the stream ends at its next write (a keep-alive at the latest).
    eventually(Duration::from_secs(30), || {
        s.metric("plant_store_event_streams_open") == 0.0
    });
}

#[test]
fn a_stream_ends_when_its_token_is_revoked_or_expires() {
    let dir = TempDir::new();
    let revoked = add_token(&dir.db(), "alice", false);
    let (code, out, err) = run_cli(&[
        "token",
        "add",
        "alice",
        "--expires-in",
        "3s",
        "--db",
        dir.db().to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    let expiring = out.lines().last().unwrap().to_owned();
    let s = TestServer::start(&dir.db());
    let mut a = Sse::open(&s, &revoked, "/events", &[]);
    let mut b = Sse::open(&s, &expiring, "/events", &[]);
    assert_eq!((a.head.status, b.head.status), (200, 200));
    let (_, listing, _) = run_cli(&["token", "list", "--db", dir.db().to_str().unwrap()]);
    let id = listing
        .lines()
        .find(|l| l.contains("alice") && l.ends_with("never"))
        .expect("the token that never expires")
        .split_whitespace()
        .next()
        .unwrap()
        .to_owned();
    let started = Instant::now();
    let (code, _, err) = run_cli(&["token", "revoke", &id, "--db", dir.db().to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    for sse in [&mut a, &mut b] {
        sse.set_timeout(Duration::from_secs(15));
        // Keep-alive comments may come first; the stream must end well before 9 s.
        while started.elapsed() < Duration::from_secs(9) && sse.next().is_some() {}
    }
    // Both ended: the revoked within 5 s of the revocation, the expiring one at its
    // expiry (3 s after it was made) and 5 s.
    assert!(
        started.elapsed() < Duration::from_secs(9),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(events_as(&s, &revoked, "").status, 401);
}

#[test]
fn a_stream_ends_on_shutdown_and_the_process_exits_0() {
    let s = TestServer::memory();
    let mut sse = Sse::open(&s, TOKEN, "/events", &[]);
    assert_eq!(sse.next(), Some(Message::Comment("events".into())));
    let started = Instant::now();
    s.signal(libc::SIGTERM);
    assert_eq!(sse.next(), None, "the stream ends");
    let status = s.stop();
    assert!(status.success(), "{status:?}");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
}

/// `--max-streams` bounds the connections streams hold, and never to more than half of
/// `--max-connections`: one more is 503, and ordinary requests are still served. A
/// stream that ends gives its place back.
#[test]
fn streams_over_max_streams_are_503_and_requests_still_get_through() {
    let s = Launch::memory()
        .arg("--max-connections 6 --max-streams 1000")
        .start();
    let mut held = [(); 3].map(|_| Sse::open(&s, TOKEN, "/events", &[]));
    for sse in &held {
        assert_eq!(sse.head.status, 200);
    }
    let refused = Sse::open(&s, TOKEN, "/events", &[]);
    assert_eq!(refused.head.status, 503, "half of 6 connections");
    assert_eq!(refused.head.header("retry-after"), Some("1"));
    assert_eq!(
        String::from_utf8(refused.head.body.clone()).unwrap(),
        err(503, "too many event streams are open; retry in a second")
    );
    drop(refused);
    assert_eq!(s.get("/plants").status, 200);
    assert_eq!(s.get("/events").status, 200, "the JSON list is no stream");
    assert_eq!(held[0].next(), Some(Message::Comment("events".into())));
    drop(held);
    eventually(Duration::from_secs(10), || {
        Sse::open(&s, TOKEN, "/events", &[]).head.status == 200
    });
}

/// One principal cannot take every stream: `--max-streams-per-principal`.
#[test]
fn one_principal_gets_at_most_its_share_of_streams() {
    let dir = TempDir::new();
    let bob = add_token(&dir.db(), "bob", true);
    let s = Launch::new(&dir.db())
        .arg("--max-streams-per-principal 2")
        .start();
    let _held = [(); 2].map(|_| Sse::open(&s, TOKEN, "/events", &[]));
    let refused = Sse::open(&s, TOKEN, "/events", &[]);
    assert_eq!(
        (
            refused.head.status,
            String::from_utf8(refused.head.body.clone()).unwrap()
        ),
        (
            503,
            err(
                503,
                "too many event streams are open for this principal; close one, then retry"
            )
        )
    );
    assert_eq!(
        Sse::open(&s, &bob, "/events", &[]).head.status,
        200,
        "bob has his own share"
    );
}

/// A consumer that comes back to a long backlog gets it at the speed it reads, not a
/// buffer's worth per second.
#[test]
fn a_stream_catches_up_on_a_backlog_at_once() {
    let s = TestServer::memory();
    let name = "n".repeat(200);
    let writers: Vec<_> = (0..4)
        .map(|w| {
            let (addr, name) = (s.addr.clone(), name.clone());
            std::thread::spawn(move || {
                for i in 0..150 {
                    let body = format!(r#"{{"id":{},"name":"{name}"}}"#, w * 1000 + i);
                    assert_eq!(Req::create(&body).send_to(&addr).unwrap().status, 200);
                }
            })
        })
        .collect();
    for w in writers {
        w.join().unwrap();
    }
    // 600 events of about 330 bytes: about 200 KB.
    let started = Instant::now();
    let mut sse = Sse::open(&s, TOKEN, "/events", &[]);
    for seq in 1..=600 {
        assert_eq!(sse.next_event().unwrap().0, seq);
    }
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "the backlog took {:?}",
        started.elapsed()
    );
}

/// A client may close only its sending side after the request and go on reading: its
/// stream goes on. When it closes, the stream ends and its place is given back.
#[test]
fn a_client_that_half_closes_still_gets_its_events_and_a_close_ends_the_stream() {
    let s = TestServer::memory();
    let mut sse = Sse::open(&s, TOKEN, "/events", &[]);
    assert_eq!(sse.next(), Some(Message::Comment("events".into())));
    sse.shutdown_write();
    // Past a look for closed clients (every second).
    std::thread::sleep(Duration::from_millis(2500));
    assert_eq!(s.post(r#"{"id":1,"name":"a"}"#).status, 200);
    assert_eq!(sse.next_event().unwrap().0, 1, "the stream goes on");
    assert_eq!(s.metric("plant_store_event_streams_open"), 1.0);
    drop(sse);
    eventually(Duration::from_secs(5), || {
        s.metric("plant_store_event_streams_open") == 0.0
    });
}

#[test]
fn a_stream_whose_client_stops_reading_holds_no_worker_and_is_cut_off() {
    if native_only(EMULATED_TCP_INFO) {
        return;
    }
    let s = Launch::memory().arg("--write-timeout 2").start();
    let sse = Sse::open(&s, TOKEN, "/events", &[]);
    assert_eq!(sse.head.status, 200);
    // About 1.5 MB of events, never read.
    let name = "n".repeat(250);
    for id in 0..2000 {
        assert_eq!(
            s.post(&format!(r#"{{"id":{id},"name":"{name}{id}"}}"#))
                .status,
            200
        );
    }
    served_promptly(&s, 10);
    eventually(Duration::from_secs(30), || {
        s.metric("plant_store_event_streams_open") == 0.0
    });
    served_promptly(&s, 4);
    drop(sse);
}

/// A client that closed its sending side gets a keep-alive at each look for closed
/// clients, every second (`HANGUP_CHECK_EVERY`), not every other second.
#[test]
fn a_half_closed_client_gets_a_keep_alive_each_second() {
    let s = TestServer::memory();
    let mut sse = Sse::open(&s, TOKEN, "/events", &[]);
    assert_eq!(sse.next(), Some(Message::Comment("events".into())));
    sse.shutdown_write();
    let keep_alive = Some(Message::Comment("keep-alive".into()));
    assert_eq!(sse.next(), keep_alive, "the first look");
    // Counted over 8 s or a little more: 8 or 9 a second apart, at most 5 two apart.
    let started = Instant::now();
    let mut n = 0;
    while started.elapsed() < Duration::from_secs(8) {
        assert_eq!(sse.next(), keep_alive);
        n += 1;
    }
    eprintln!("{n} keep-alives in {:?}", started.elapsed());
    assert!(
        n >= 6,
        "{n} keep-alives in {:?}: one a second",
        started.elapsed()
    );
}

/// `--max-streams 0` (or per principal 0): no stream is served, and the refusal says so
/// (no `Retry-After`: retrying does not help); the JSON list is served.
#[test]
fn with_max_streams_0_a_stream_is_refused_as_turned_off() {
    for flag in ["--max-streams 0", "--max-streams-per-principal 0"] {
        let s = Launch::memory().arg(flag).start();
        let refused = Sse::open(&s, TOKEN, "/events", &[]);
        let body = String::from_utf8(refused.head.body.clone()).unwrap();
        assert_eq!(
            (
                refused.head.status,
                refused.head.header("retry-after"),
                body
            ),
            (
                503,
                None,
                err(
                    503,
                    "event streams are turned off on this server; read the events as a JSON list instead"
                )
            ),
            "{flag}"
        );
        assert_eq!(s.get("/events").status, 200);
    }
}

/// `Last-Event-ID` empty (as clients send it before they have seen an event) is as if
/// absent: `after` applies. Given twice it is 400, as a repeated query parameter is, on
/// a list too, once the token is checked.
#[test]
fn an_empty_last_event_id_is_absent_and_two_are_refused() {
    let s = TestServer::memory();
    for id in 1..=3 {
        assert_eq!(
            s.post(&format!(r#"{{"id":{id},"name":"p{id}"}}"#)).status,
            200
        );
    }
    for empty in ["", "  "] {
        let mut sse = Sse::open(&s, TOKEN, "/events?after=1", &[("Last-Event-ID", empty)]);
        assert_eq!(sse.head.status, 200, "{:?}", sse.head);
        assert_eq!(sse.next_event().unwrap().0, 2, "after=1 applies");
        let mut sse = Sse::open(&s, TOKEN, "/events", &[("Last-Event-ID", empty)]);
        assert_eq!(sse.next_event().unwrap().0, 1, "from the start");
    }
    let twice = err(400, "the header `Last-Event-ID` is given twice");
    for values in [["1", "2"], ["1", "1"], ["", "2"]] {
        let headers = [("Last-Event-ID", values[0]), ("last-event-id", values[1])];
        let r = Sse::open(&s, TOKEN, "/events", &headers);
        assert_eq!(
            (
                r.head.status,
                String::from_utf8(r.head.body.clone()).unwrap()
            ),
            (400, twice.clone()),
            "{values:?}"
        );
    }
    let two = |r: Req| r.header("Last-Event-ID", "1").header("Last-Event-ID", "2");
    check(
        &s,
        &[
            (
                two(Req::get("/events").token(TOKEN)),
                400,
                &[],
                twice.clone(),
            ),
            (
                two(Req::get("/events")),
                401,
                &[],
                err(401, "an Authorization: Bearer header is required"),
            ),
            (
                Req::get("/events?after=2")
                    .token(TOKEN)
                    .header("Last-Event-ID", ""),
                200,
                &[],
                format!("[{}]", elements(&s.get("/events").text())[2]),
            ),
        ],
    );
}
