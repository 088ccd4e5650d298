//! In-process tests of the library (`plant_store::Server`): servers started, used and
//! stopped inside this test process. The black-box suite (`tests/it`) covers behaviour
//! through the binary; these cover what only the library has: several servers in one
//! process, their independence, and that stopping one leaves nothing behind.
//!
//! Tests that count the process's threads and descriptors take `alone()`, which every
//! other test also takes (shared), so nothing else runs while they count.

mod builder;
mod client;
#[cfg(feature = "test-control")]
mod control;
#[cfg(feature = "test-control")]
mod control_faults;
#[cfg(feature = "test-control")]
mod control_journal;
#[cfg(feature = "test-control")]
mod control_stop;
mod files;
mod held;
mod logs;
mod seeded;

use client::{get, request};
use plant_store::{Error, Server};
use std::net::TcpStream;
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::Duration;

static COUNTING: RwLock<()> = RwLock::new(());

/// Held by every test that does not count threads.
fn shared() -> RwLockReadGuard<'static, ()> {
    COUNTING.read().unwrap_or_else(|e| e.into_inner())
}

/// Held by a test that counts the process's threads and descriptors.
fn alone() -> RwLockWriteGuard<'static, ()> {
    COUNTING.write().unwrap_or_else(|e| e.into_inner())
}

const TOKEN: &str = "embedded-test-token";

fn start() -> plant_store::Running {
    Server::builder()
        .token(TOKEN)
        .option("workers", "2")
        .start()
        .expect("the server starts")
}

#[test]
fn a_server_answers_at_its_address_and_url() {
    let _g = shared();
    let server = start();
    assert!(server.addr().ip().is_loopback());
    assert_ne!(server.addr().port(), 0, "port 0 picks a free port");
    assert_eq!(
        server.url(),
        format!("http://127.0.0.1:{}", server.addr().port())
    );
    let r = get(server.addr(), "/healthz", None);
    assert_eq!((r.status, r.body.as_str()), (200, r#"{"status":"ok"}"#));
    server.stop().unwrap();
}

#[test]
fn two_servers_at_once_have_their_own_store_tokens_and_metrics() {
    let _g = shared();
    let a = start();
    let b = Server::builder()
        .token("another-token-entirely")
        .option("workers", "2")
        .start()
        .unwrap();
    let body = r#"{"id":7,"name":"Monstera"}"#;
    let created = request(a.addr(), "POST", "/plants", Some(TOKEN), Some(body));
    assert_eq!(
        (created.status, created.body.as_str()),
        (200, r#"{"name":"Monstera"}"#)
    );
    // A's token is no token of B's, and B's store does not hold A's plant.
    let refused = get(b.addr(), "/plants", Some(TOKEN));
    assert_eq!(refused.status, 401);
    let listed = get(b.addr(), "/plants", Some("another-token-entirely"));
    assert_eq!((listed.status, listed.body.as_str()), (200, "[]"));
    let listed = get(a.addr(), "/plants", Some(TOKEN));
    assert_eq!(listed.body, r#"[{"name":"Monstera"}]"#);
    // Each server counts only its own requests.
    let created_line =
        r#"plant_store_http_requests_total{route="/plants",method="POST",code="2xx"} 1"#;
    let a_metrics = get(a.addr(), "/metrics", None).body;
    let b_metrics = get(b.addr(), "/metrics", None).body;
    assert!(a_metrics.contains(created_line), "{a_metrics}");
    assert!(!b_metrics.contains(r#"method="POST""#), "{b_metrics}");
    assert!(b_metrics.contains(r#"route="/plants",method="GET",code="4xx"} 1"#));
    a.stop().unwrap();
    // B goes on after A stopped.
    assert_eq!(get(b.addr(), "/healthz", None).status, 200);
    b.stop().unwrap();
}

#[test]
fn stop_and_drop_close_the_listening_socket() {
    let _g = shared();
    let server = start();
    let addr = server.addr();
    server.stop().unwrap();
    assert!(
        TcpStream::connect(addr).is_err(),
        "nothing listens after stop"
    );
    let dropped = start();
    let addr = dropped.addr();
    assert_eq!(get(addr, "/healthz", None).status, 200);
    drop(dropped);
    assert!(
        TcpStream::connect(addr).is_err(),
        "nothing listens after drop"
    );
    // The port is free again: a server can listen on it.
    let again = Server::builder()
        .addr(addr.to_string())
        .option("workers", "2")
        .start()
        .expect("the stopped server's port is free");
    assert_eq!(again.addr(), addr);
}

#[test]
fn a_request_in_flight_at_stop_is_answered() {
    let _g = shared();
    let server = start();
    // A request whose body is still on its way when the stop begins: `100 Continue`
    // says that the server has read its head and waits for its body.
    let mut tcp = TcpStream::connect(server.addr()).unwrap();
    let body = r#"{"id":1,"name":"Fern"}"#;
    let head = format!(
        "POST /plants HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer {TOKEN}\r\nContent-Type: application/json\r\nExpect: 100-continue\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    std::io::Write::write_all(&mut tcp, head.as_bytes()).unwrap();
    let mut interim = Vec::new();
    while !interim.ends_with(b"\r\n\r\n") {
        let mut byte = [0u8];
        std::io::Read::read_exact(&mut tcp, &mut byte).unwrap();
        interim.push(byte[0]);
    }
    assert!(interim.starts_with(b"HTTP/1.1 100 Continue\r\n"));
    let stopping = std::thread::spawn(move || server.stop());
    std::thread::sleep(Duration::from_millis(200));
    std::io::Write::write_all(&mut tcp, body.as_bytes()).unwrap();
    let answer = client::read_response(&mut tcp);
    assert_eq!(
        (answer.status, answer.body.as_str()),
        (200, r#"{"name":"Fern"}"#)
    );
    stopping.join().unwrap().unwrap();
}

/// Values are checked as the command line checks them (the words are the builder's:
/// `builder.rs`).
#[test]
fn options_are_checked_as_the_command_line_checks_them() {
    let _g = shared();
    let e = Server::builder()
        .option("--workers", "none")
        .start()
        .unwrap_err();
    assert_eq!(
        e,
        Error::Option("workers must be a whole number from 1 to 1024, not `none`".into())
    );
    let e = Server::builder()
        .option("event-retention", "0s")
        .start()
        .unwrap_err();
    assert!(
        matches!(&e, Error::Option(m) if m.starts_with("event-retention must be a duration from 1s to 36500d")),
        "{e}"
    );
    let e = Server::builder()
        .seed_file("seed.json")
        .start()
        .unwrap_err();
    assert!(
        matches!(&e, Error::Option(m) if m.contains("seed file")),
        "{e}"
    );
    // The error is a std error with the message as its Display.
    let boxed: Box<dyn std::error::Error + Send + Sync> = Box::new(e.clone());
    assert_eq!(boxed.to_string(), e.to_string());
}

#[test]
fn a_listening_port_taken_is_a_start_error() {
    let _g = shared();
    let first = start();
    let e = Server::builder()
        .addr(first.addr().to_string())
        .start()
        .unwrap_err();
    assert!(
        matches!(&e, Error::Start(m) if m.contains("cannot listen")),
        "{e}"
    );
    assert_eq!(get(first.addr(), "/healthz", None).status, 200);
}

#[cfg(feature = "fault-injection")]
#[test]
fn a_panic_in_one_server_s_handler_touches_no_other() {
    let _g = shared();
    let (a, b) = (start(), start());
    let panicked = get(a.addr(), "/__panic", None);
    assert_eq!(panicked.status, 500);
    assert_eq!(get(b.addr(), "/healthz", None).status, 200);
    // A's worker lived on: both of A's workers answer.
    for _ in 0..4 {
        assert_eq!(get(a.addr(), "/healthz", None).status, 200);
    }
    a.stop().unwrap();
    b.stop().unwrap();
}

#[test]
fn one_server_s_retention_is_its_own() {
    let _g = shared();
    // B keeps events 2 s; A, started after it in the same process, keeps them 7 days.
    let b = Server::builder()
        .token(TOKEN)
        .option("workers", "2")
        .option("event-retention", "2s")
        .start()
        .unwrap();
    let created = request(
        b.addr(),
        "POST",
        "/plants",
        Some(TOKEN),
        Some(r#"{"id":1,"name":"a"}"#),
    );
    assert_eq!(created.status, 200);
    let a = start();
    assert_eq!(get(a.addr(), "/healthz", None).status, 200);
    // B's sweep removes its event once 2 s have passed (a sweep every 2 s): A's
    // retention does not hold it.
    let started = std::time::Instant::now();
    loop {
        let events = get(b.addr(), "/events?after=0", Some(TOKEN));
        if events.status == 410 {
            break;
        }
        assert_eq!(events.status, 200, "{}", events.body);
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "B's event outlived its 2 s retention: {}",
            events.body
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    a.stop().unwrap();
    b.stop().unwrap();
}

/// The threads, descriptors and listening TCP ports of this process.
fn census() -> (usize, usize, Vec<u16>) {
    let count = |dir: &str| std::fs::read_dir(dir).unwrap().count();
    let inodes: std::collections::HashSet<String> = std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .filter_map(|l| {
            let l = l.to_string_lossy().into_owned();
            Some(l.strip_prefix("socket:[")?.strip_suffix(']')?.to_owned())
        })
        .collect();
    let mut listening = Vec::new();
    for table in ["/proc/self/net/tcp", "/proc/self/net/tcp6"] {
        let Ok(text) = std::fs::read_to_string(table) else {
            continue;
        };
        for row in text.lines().skip(1) {
            let cols: Vec<&str> = row.split_whitespace().collect();
            // st 0A is LISTEN; the inode says whether the socket is this process's.
            if cols.get(3) == Some(&"0A") && cols.get(9).is_some_and(|i| inodes.contains(*i)) {
                let port = cols[1].rsplit(':').next().unwrap();
                listening.push(u16::from_str_radix(port, 16).unwrap());
            }
        }
    }
    (count("/proc/self/task"), count("/proc/self/fd"), listening)
}

#[test]
fn two_hundred_servers_started_and_stopped_leave_nothing_behind() {
    let _g = alone();
    // One first, so that what a first server sets up once (none is expected) is counted.
    start().stop().unwrap();
    let before = census();
    for n in 0..200 {
        let server = start();
        // Every tenth has a request answered and a keep-alive connection left open, idle,
        // when it stops: the connection is closed and its thread ends.
        let idle = (n % 10 == 0).then(|| {
            assert_eq!(get(server.addr(), "/healthz", None).status, 200);
            let mut tcp = TcpStream::connect(server.addr()).unwrap();
            std::io::Write::write_all(&mut tcp, b"GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n")
                .unwrap();
            assert_eq!(client::read_response(&mut tcp).status, 200);
            tcp
        });
        server.stop().unwrap();
        drop(idle);
    }
    let after = census();
    assert_eq!(
        after, before,
        "(threads, descriptors, listening ports) before and after"
    );
}

/// Test control in-process: `.seed_file` loads before `start` returns, `.control_token`
/// opens `/_control/`, and two servers' control state is their own.
#[test]
fn test_control_through_the_builder_is_each_server_s_own() {
    let _shared = shared();
    let dir = std::env::temp_dir().join(format!("plant-store-embed-seed-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let seed = dir.join("seed.json");
    std::fs::write(
        &seed,
        r#"{"tokens":[{"token":"seeded-alice-token","principal":"alice"}],
            "plants":{"alice":[{"id":1,"name":"Monstera","tag":"tropical"}]}}"#,
    )
    .unwrap();
    let control = "embedded-control-token";
    let controlled = || {
        Server::builder()
            .control_token(control)
            .seed_file(&seed)
            .option("workers", "2")
            .start()
            .expect("the server starts")
    };
    let (a, b) = (controlled(), controlled());
    let alice = Some("seeded-alice-token");
    let listed = |s: &plant_store::Running| get(s.addr(), "/plants", alice).body;
    assert_eq!(listed(&a), r#"[{"name":"Monstera","tag":"tropical"}]"#);
    let created = request(
        a.addr(),
        "POST",
        "/plants",
        alice,
        Some(r#"{"id":2,"name":"Fern"}"#),
    );
    assert_eq!(created.status, 200);
    // The journal and the store of `a` are its own: `b` saw nothing.
    let journal = |s: &plant_store::Running| get(s.addr(), "/_control/requests", Some(control));
    let seen: serde_json::Value = serde_json::from_str(&journal(&a).body).unwrap();
    assert_eq!(seen.as_array().unwrap().len(), 2, "{seen}");
    assert_eq!(journal(&b).body, "[]");
    assert_eq!(listed(&b), r#"[{"name":"Monstera","tag":"tropical"}]"#);
    // A reset of `a` brings back its seed, and leaves `b` alone.
    let made = request(
        b.addr(),
        "POST",
        "/plants",
        alice,
        Some(r#"{"id":3,"name":"Ivy"}"#),
    );
    assert_eq!(made.status, 200);
    let reset = request(a.addr(), "POST", "/_control/reset", Some(control), None);
    assert_eq!(reset.status, 204);
    assert_eq!(listed(&a), r#"[{"name":"Monstera","tag":"tropical"}]"#);
    assert_eq!(
        listed(&b),
        r#"[{"name":"Monstera","tag":"tropical"},{"name":"Ivy"}]"#
    );
    // Without a control token, /_control/ is any unknown path.
    let plain = start();
    assert_eq!(
        get(plain.addr(), "/_control/requests", Some(control)).status,
        404
    );
    a.stop().unwrap();
    b.stop().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}

/// Each server has its own clock: setting one server's (`PUT /_control/clock`) moves
/// neither another's readings nor its event times or token expiry.
#[test]
fn one_server_s_test_clock_is_its_own() {
    let _shared = shared();
    let control = "embedded-control-token";
    let controlled = || {
        Server::builder()
            .control_token(control)
            .option("workers", "2")
            .start()
            .expect("the server starts")
    };
    let (a, b) = (controlled(), controlled());
    let set = request(
        a.addr(),
        "PUT",
        "/_control/clock",
        Some(control),
        Some(r#"{"now":"2030-01-01T00:00:00Z","frozen":true}"#),
    );
    assert_eq!(
        (set.status, set.body.as_str()),
        (200, r#"{"now":"2030-01-01T00:00:00.000Z","frozen":true}"#)
    );
    let clock = |s: &plant_store::Running| {
        let r = get(s.addr(), "/_control/clock", Some(control));
        assert_eq!(r.status, 200);
        serde_json::from_str::<serde_json::Value>(&r.body).unwrap()
    };
    assert_eq!(clock(&a)["now"], "2030-01-01T00:00:00.000Z");
    let other = clock(&b);
    assert_eq!(other["frozen"], false);
    assert!(
        other["now"].as_str().unwrap() < "2030",
        "the other server's clock is the real one: {other}"
    );
    // What each server stamps and checks goes by its own clock.
    let token = |s: &plant_store::Running| {
        let r = request(
            s.addr(),
            "POST",
            "/_control/tokens",
            Some(control),
            Some(r#"{"principal":"p","expires_in":"1h"}"#),
        );
        assert_eq!(r.status, 201, "{}", r.body);
        serde_json::from_str::<serde_json::Value>(&r.body).unwrap()
    };
    let (ta, tb) = (token(&a), token(&b));
    assert_eq!(ta["expires_at"], "2030-01-01T01:00:00Z");
    assert!(tb["expires_at"].as_str().unwrap() < "2030", "{tb}");
    let stamp = |s: &plant_store::Running, t: &serde_json::Value| {
        let t = t["token"].as_str();
        let made = request(
            s.addr(),
            "POST",
            "/plants",
            t,
            Some(r#"{"id":1,"name":"x"}"#),
        );
        assert_eq!(made.status, 200, "{}", made.body);
        let events: serde_json::Value =
            serde_json::from_str(&get(s.addr(), "/events", t).body).unwrap();
        events[0]["timestamp"].as_str().unwrap().to_owned()
    };
    assert_eq!(stamp(&a, &ta), "2030-01-01T00:00:00.000Z");
    assert!(stamp(&b, &tb).as_str() < "2030");
    // Advancing `a` past its token's hour expires it there; `b`'s token lives on.
    let moved = request(
        a.addr(),
        "POST",
        "/_control/clock/advance",
        Some(control),
        Some(r#"{"by":"2h"}"#),
    );
    assert_eq!(moved.status, 200);
    assert_eq!(get(a.addr(), "/plants", ta["token"].as_str()).status, 401);
    assert_eq!(get(b.addr(), "/plants", tb["token"].as_str()).status, 200);
    a.stop().unwrap();
    b.stop().unwrap();
}
