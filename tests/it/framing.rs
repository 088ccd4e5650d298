//! Framing: bad framing and lenient lines refused and closed, heads that stop arriving,
//! requests split finely or sent with the close, 100-continue in order, and nothing run
//! behind an answer that ends its connection.

use crate::support::*;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::thread;
use std::time::{Duration, Instant};

/// Each form of bad framing is 400, the connection is closed after it, and the complete
/// request hidden behind it is never executed.
#[test]
fn bad_framing_is_400_then_close_and_the_hidden_request_never_runs() {
    if native_only(EMULATED_TCP_INFO) {
        return;
    }
    let s = TestServer::memory();
    let hidden = |id: u32| {
        let body = format!(r#"{{"id":{id},"name":"smuggled"}}"#);
        format!(
            "POST /plants HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer {TOKEN}\r\n\
             Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        )
    };
    let head = format!(
        "POST /plants HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer {TOKEN}\r\n\
         Content-Type: application/json\r\n"
    );
    let frames = [
        "Content-Length: abc\r\n\r\n".to_owned(),
        "Content-Length: +5\r\n\r\n12345".to_owned(),
        "Content-Length: 0x10\r\n\r\n".to_owned(),
        "Content-Length: 5, 5\r\n\r\n12345".to_owned(),
        "Content-Length: 0\r\nContent-Length: 5\r\n\r\n12345".to_owned(),
        "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n".to_owned(),
        "Transfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n".to_owned(),
        "Transfer-Encoding: chunked\r\n\r\nffffffffffffffff1\r\nx\r\n0\r\n\r\n".to_owned(),
        "Transfer-Encoding: chunked\r\n\r\n0;ext\n\r\n".to_owned(),
        // Lenient forms tiny_http alone would take (issue: smuggling behind a strict
        // proxy): chunk sizes with blanks or signs, bare LF, a LF inside an extension,
        // a trailer, obs-fold and bare LF in the head, a coding name not in lower case.
        "Transfer-Encoding: chunked\r\n\r\n 2\r\n{}\r\n0\r\n\r\n".to_owned(),
        "Transfer-Encoding: chunked\r\n\r\n+2\r\n{}\r\n0\r\n\r\n".to_owned(),
        "Transfer-Encoding: chunked\r\n\r\n2\n{}\r\n0\r\n\r\n".to_owned(),
        "Transfer-Encoding: chunked\r\n\r\n2\r\n{}\n0\r\n\r\n".to_owned(),
        "Transfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0;ext\nx\r\n\r\n".to_owned(),
        "Transfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\nX-Trailer: 1\r\n\r\n".to_owned(),
        "Transfer-Encoding: chunked\r\n\r\n2;a\x01b\r\n{}\r\n0\r\n\r\n".to_owned(),
        "Transfer-Encoding: Chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n".to_owned(),
        "X-Folded: a\r\n Transfer-Encoding: chunked\r\nContent-Length: 2\r\n\r\n{}".to_owned(),
        "X-Bare: a\nContent-Length: 2\r\n\r\n{}".to_owned(),
        "X-Bare: a\rb\r\nContent-Length: 2\r\n\r\n{}".to_owned(),
        "X.Dotted: a\r\nContent-Length: 2\r\n\r\n{}".to_owned(),
        // Two callers in one request: a proxy taking the last and a server the first
        // would disagree on who asks (framing::ONCE_ONLY_HEADERS).
        "Authorization: Bearer another-token-0123\r\nContent-Length: 2\r\n\r\n{}".to_owned(),
        "Host: u\r\nContent-Length: 2\r\n\r\n{}".to_owned(),
        // More chunk framing than allowed: refused, never cut short (the rest would be
        // read by tiny_http's lenient decoder, unchecked).
        format!(
            "Transfer-Encoding: chunked\r\n\r\n{}0 ;x HTTP/1.1\r\n\r\n",
            format!("1;{}\r\na\r\n", "x".repeat(1000)).repeat(6)
        ),
        // Framing is bounded on its own: 60 KB of it beside a body of under 64 KiB of
        // data is 400 for its framing (it was a 413 that called the body too large).
        format!(
            "Transfer-Encoding: chunked\r\n\r\n{}ef80\r\n{}\r\n0\r\n\r\n",
            format!("1;{}\r\n \r\n", "x".repeat(1000)).repeat(60),
            " ".repeat(0xef80)
        ),
    ];
    for (i, frame) in frames.iter().enumerate() {
        let mut c = s.connect();
        let bytes = format!("{head}{frame}{}", hidden(i as u32 + 1));
        c.write_all(bytes.as_bytes()).unwrap();
        let r = read_response(&mut c).unwrap();
        assert_eq!(r.status, 400, "{frame:?}: {}", r.text());
        // Every refusal is ours: JSON, and the connection closes after it.
        assert_eq!(r.json()["error"], 400, "{frame:?}");
        assert_eq!(r.header("Connection"), Some("close"), "{frame:?}");
        if frame.contains("Chunked") {
            assert!(r.text().contains("lower case"), "{}", r.text());
        }
        if let Some(name) = ["Authorization", "Host"]
            .iter()
            .find(|h| frame.starts_with(**h))
        {
            let why = format!("the {name} header is given more than once");
            assert!(r.text().contains(&why), "{}", r.text());
        }
        assert!(
            rest_until_closed(&mut c).is_empty(),
            "{frame:?}: a second answer came"
        );
    }
    assert_eq!(s.list(), "[]", "a hidden request was executed");
    // A well-framed chunked body still works, on a connection that goes on.
    let mut c = s.connect();
    let body = r#"{"id":99,"name":"fine"}"#;
    let chunked = format!(
        "{head}Transfer-Encoding: chunked\r\n\r\n{:x}\r\n{body}\r\n0\r\n\r\n\
         GET /plants HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer {TOKEN}\r\n\r\n",
        body.len()
    );
    c.write_all(chunked.as_bytes()).unwrap();
    assert_eq!(read_response(&mut c).unwrap().status, 200);
    assert_eq!(
        read_response(&mut c).unwrap().text(),
        r#"[{"name":"fine"}]"#
    );
}

#[test]
fn an_http2_preface_is_505_and_closed_not_a_hung_connection() {
    let s = Launch::memory().arg("--max-connections 4").start();
    // More prefaces than connection slots: each must give its slot back.
    for _ in 0..8 {
        let mut c = s.connect();
        c.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n").unwrap();
        let r = read_response(&mut c).unwrap();
        assert_eq!(r.status, 505, "{}", r.text());
        assert!(rest_until_closed(&mut c).is_empty());
        drop(c);
        // The slot comes back once the server has seen the client close (its linger):
        // the client's close and the next connect would otherwise race it. The scrape's
        // own connection is the one left open.
        eventually(Duration::from_secs(5), || {
            s.metric("plant_store_connections_open") <= 1.0
        });
    }
    served_promptly(&s, 2);
}

/// The server's CPU time (user + system) so far, from /proc.
fn cpu_time(s: &TestServer) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{}/stat", s.pid())).unwrap();
    let after_name = &stat[stat.rfind(')').unwrap() + 2..];
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
    // SAFETY: sysconf has no preconditions.
    let per_second = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as u64;
    Duration::from_millis(ticks * 1000 / per_second)
}

/// A strict prefix of the HTTP/2 preface (or any head that stops arriving) costs no CPU
/// while it waits, and its thread ends when the client closes or the head deadline
/// passes: such connections cannot fill the cap for good.
#[test]
fn a_head_that_stops_arriving_costs_nothing_and_ends() {
    let s = Launch::memory()
        .arg("--max-connections 300 --read-timeout 2")
        .start();
    let threads_before = s.proc_status("Threads");
    let held: Vec<TcpStream> = (0..200)
        .map(|_| {
            let mut c = s.connect();
            c.write_all(b"P").unwrap();
            c
        })
        .collect();
    eventually(Duration::from_secs(5), || {
        s.proc_status("Threads") >= threads_before + 200
    });
    let cpu = cpu_time(&s);
    thread::sleep(Duration::from_secs(1));
    let spent = cpu_time(&s) - cpu;
    assert!(
        spent < Duration::from_millis(100),
        "200 waiting heads used {spent:?} of CPU in 1 s"
    );
    drop(held);
    // Closed by the clients: every thread ends at once (not at the deadline).
    let t = Instant::now();
    eventually(Duration::from_secs(5), || {
        s.proc_status("Threads") <= threads_before
    });
    assert!(
        t.elapsed() < Duration::from_millis(1500),
        "{:?}",
        t.elapsed()
    );
    // Held open: closed at the head deadline, without an answer.
    let mut c = s.connect();
    c.write_all(b"PRI * HTTP").unwrap();
    let t = Instant::now();
    assert!(rest_until_closed(&mut c).is_empty());
    assert!(t.elapsed() < Duration::from_secs(4), "{:?}", t.elapsed());
    served_promptly(&s, 2);
}

/// Every answer that ends a connection ends it: a refused request (bad framing, a body
/// that stalls, large or small) gives its slot back within seconds even when the client
/// keeps its side open and sends nothing more, so a few such clients never fill the cap.
#[test]
fn a_refused_request_gives_its_connection_back() {
    let s = Launch::memory()
        // Four clients, and one slot for the scrape below, whose own close the server may
        // not have seen yet when the next round connects.
        .arg("--max-connections 5 --read-timeout 2 --body-timeout 1")
        .start();
    let head = "GET /healthz HTTP/1.1\r\nHost: t\r\n";
    let post = format!(
        "POST /plants HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer {TOKEN}\r\n\
         Content-Type: application/json\r\n"
    );
    let cases = [
        (
            format!("{head}Content-Length: 2000\r\nContent-Length: 2000\r\n\r\n"),
            400,
        ),
        (format!("{head}Content-Length: +2000\r\n\r\n"), 400),
        // Bodies that stall, over and under 1 KiB: 408 at the body deadline.
        (format!("{post}Content-Length: 2000\r\n\r\n{{\"id\":1"), 408),
        (format!("{post}Content-Length: 100\r\n\r\n{{\"id\":1"), 408),
    ];
    for round in 0..2 {
        let clients: Vec<_> = cases
            .iter()
            .map(|(bytes, status)| {
                let (addr, bytes, status) = (s.addr.clone(), bytes.clone(), *status);
                thread::spawn(move || {
                    let mut c = TcpStream::connect(addr).unwrap();
                    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
                    c.write_all(bytes.as_bytes()).unwrap();
                    let t = Instant::now();
                    let r = read_response(&mut c).unwrap();
                    assert_eq!(r.status, status, "{bytes:?}: {}", r.text());
                    assert_eq!(r.json()["error"], status);
                    // The client sends nothing more and keeps its side open.
                    assert!(rest_until_closed(&mut c).is_empty());
                    let closed = t.elapsed();
                    assert!(
                        closed < Duration::from_secs(4),
                        "{bytes:?}: closed after {closed:?}"
                    );
                })
            })
            .collect();
        for c in clients {
            c.join().unwrap();
        }
        // All four slots are free again once the server has seen the clients' closes
        // (the cap would answer 503 until then): the server reports only the scrape's.
        eventually(Duration::from_secs(3), || {
            Req::get("/metrics")
                .send_to(&s.addr)
                .is_ok_and(|r| r.text().contains("\nplant_store_connections_open 1\n"))
        });
        let _ = round;
    }
    assert_eq!(s.list(), "[]");
}

/// A whole request sent together with the client's close (half-close after writing) is
/// answered, with or without a body.
#[test]
fn a_request_that_arrives_with_the_close_is_answered() {
    let s = TestServer::memory();
    for i in 0..20 {
        let mut c = s.connect();
        let body = format!(r#"{{"id":{i},"name":"n"}}"#);
        let req = match i % 2 {
            0 => Req::get("/healthz"),
            _ => Req::create(&body),
        };
        c.write_all(&req.keep_alive().bytes()).unwrap();
        c.shutdown(std::net::Shutdown::Write).unwrap();
        let r = read_response(&mut c).unwrap();
        assert_eq!(r.status, 200, "{i}: {}", r.text());
    }
    assert_eq!(names(&s.list()).len(), 10);
}

/// Bodies that arrive in many small pieces, and the largest request the limits allow (a
/// head near `MAX_HEAD_BYTES` with a chunked body near 64 KiB), are served.
#[test]
fn large_and_finely_split_requests_within_the_limits_are_served() {
    let s = TestServer::memory();
    let head = format!(
        "POST /plants HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer {TOKEN}\r\n\
         Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n"
    );
    // 300 chunks of one byte, each written alone.
    let mut c = s.connect();
    c.set_nodelay(true).unwrap();
    c.write_all(format!("{head}\r\n").as_bytes()).unwrap();
    let body = format!(r#"{{"id":1,"name":"fine"}}{}"#, " ".repeat(280));
    for b in body.bytes() {
        c.write_all(format!("1\r\n{}\r\n", b as char).as_bytes())
            .unwrap();
        thread::sleep(Duration::from_micros(200));
    }
    c.write_all(b"0\r\n\r\n").unwrap();
    let r = read_response(&mut c).unwrap();
    assert_eq!(r.status, 200, "{}", r.text());
    // 60 KB of body in 300 chunks of 200 bytes, each written alone: within the looks'
    // budget (it was refused with a 4 MiB budget).
    let mut c = s.connect();
    c.set_nodelay(true).unwrap();
    c.write_all(format!("{head}\r\n").as_bytes()).unwrap();
    let start = r#"{"id":3,"name":"chunks"}"#;
    let body = format!("{start}{}", " ".repeat(60_000 - start.len()));
    assert_eq!(body.len(), 60_000);
    for piece in body.as_bytes().chunks(200) {
        let mut chunk = format!("{:x}\r\n", piece.len()).into_bytes();
        chunk.extend_from_slice(piece);
        chunk.extend_from_slice(b"\r\n");
        c.write_all(&chunk).unwrap();
        // The client's pace: each chunk arrives alone.
        thread::sleep(Duration::from_millis(2));
    }
    c.write_all(b"0\r\n\r\n").unwrap();
    let r = read_response(&mut c).unwrap();
    assert_eq!(r.status, 200, "{}", r.text());
    // A 30 KiB head and 60 KB of body in one chunk.
    let padding: String = (0..30)
        .map(|i| format!("X-Pad-{i}: {}\r\n", "p".repeat(1000)))
        .collect();
    let body = format!(r#"{{"id":2,"name":"big"}}{}"#, " ".repeat(60_000));
    let mut c = s.connect();
    c.write_all(format!("{head}{padding}\r\n{:x}\r\n{body}\r\n0\r\n\r\n", body.len()).as_bytes())
        .unwrap();
    let r = read_response(&mut c).unwrap();
    assert_eq!(r.status, 200, "{}", r.text());
    // A head that arrives in pieces, the first over 512 bytes (a long header cut by a
    // segment boundary, as on any network): it was closed without an answer.
    for first in [600, 3_000, 20_000] {
        let mut c = s.connect();
        c.set_nodelay(true).unwrap();
        let whole = format!(
            "GET /plants HTTP/1.1\r\nX-Long: {}\r\nAuthorization: Bearer {TOKEN}\r\n\r\n",
            "l".repeat(first)
        );
        let (a, b) = whole.split_at(first);
        c.write_all(a.as_bytes()).unwrap();
        // The client's pace: the server looks at the first piece alone.
        thread::sleep(Duration::from_millis(100));
        c.write_all(b.as_bytes()).unwrap();
        let r = read_response(&mut c).unwrap();
        assert_eq!(r.status, 200, "first piece {first} bytes: {}", r.text());
    }
    assert_eq!(names(&s.list()), ["fine", "big", "chunks"]);
}

/// A large body trickled in tiny pieces is refused as too many pieces, early: once its
/// pieces fill the socket's memory or looking at it has copied 16 MiB
/// (`MAX_LOOKED_BYTES`), not after 1,024 looks of 60 KB each (nor as a 413 that called
/// it too large).
#[test]
fn a_large_body_trickled_in_tiny_pieces_is_refused_early() {
    let s = TestServer::memory();
    let mut c = s.connect();
    c.set_nodelay(true).unwrap();
    let head = format!(
        "POST /plants HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer {TOKEN}\r\n\
         Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
    );
    c.write_all(format!("{head}ea60\r\n{}\r\n", " ".repeat(60_000)).as_bytes())
        .unwrap();
    let mut sent = 0;
    let mut answer = [0u8; 1];
    c.set_nonblocking(true).unwrap();
    // Tiny chunks, each written alone, until the server answers.
    while c.peek(&mut answer).is_err() && sent < 1_000 {
        if c.write_all(b"1\r\n \r\n").is_err() {
            break;
        }
        sent += 1;
        // The client's pace: each piece arrives alone.
        thread::sleep(Duration::from_millis(3));
    }
    c.set_nonblocking(false).unwrap();
    let r = read_response(&mut c).unwrap();
    assert_eq!(
        (r.status, r.text()),
        (400, err(400, "the request arrived in too many pieces"))
    );
    // At most about 280 looks; the bound leaves room for pieces that arrive together.
    assert!(sent < 800, "refused only after {sent} pieces");
}

/// `Expect: 100-continue` on a pipelined chunked request: the interim answer comes after
/// the answer to the request before it, never inside it, and once.
#[cfg(feature = "fault-injection")]
#[test]
fn a_pipelined_100_continue_comes_in_order() {
    let s = TestServer::memory();
    let mut c = s.connect();
    // One write: requests pipelined in separate writes may race tiny_http's read-ahead,
    // and the connection then closes after the first answer (docs/design.md, "The HTTP layer").
    let mut both = Req::get("/__sleep").keep_alive().bytes();
    let post = Req::new("POST", "/plants")
        .token(TOKEN)
        .header("Content-Type", "application/json")
        .header("Transfer-Encoding", "chunked")
        .header("Expect", "100-continue")
        .keep_alive()
        .bytes();
    both.extend(post);
    c.write_all(&both).unwrap();
    let first = read_response(&mut c).unwrap();
    assert_eq!((first.status, first.text()), (200, "{}".to_owned()));
    let interim = read_interim(&mut c);
    assert!(
        interim.starts_with("HTTP/1.1 100 Continue\r\n"),
        "{interim}"
    );
    let body = r#"{"id":3,"name":"after"}"#;
    write!(c, "{:x}\r\n{body}\r\n0\r\n\r\n", body.len()).unwrap();
    let r = read_response(&mut c).unwrap();
    assert_eq!(
        (r.status, r.text()),
        (200, r#"{"name":"after"}"#.to_owned())
    );
}

/// After an answer that ends at the close (a long list to an HTTP/1.0 keep-alive client),
/// a request pipelined behind it is neither answered nor run.
#[test]
fn nothing_pipelined_behind_a_list_that_ends_at_the_close_runs() {
    if native_only(EMULATED_TCP_INFO) {
        return;
    }
    let s = TestServer::memory();
    let mut c = s.connect();
    let posts: Vec<u8> = (0..300)
        .flat_map(|id| {
            Req::create(&format!(r#"{{"id":{id},"name":"p"}}"#))
                .keep_alive()
                .bytes()
        })
        .collect();
    c.write_all(&posts).unwrap();
    for _ in 0..300 {
        assert_eq!(read_response(&mut c).unwrap().status, 200);
    }
    let mut c = s.connect();
    // One write, so that the server cannot close the connection while the client is
    // still writing the second request (its close would then reset the answer).
    let mut both = Req::get("/plants")
        .http10()
        .header("Connection", "keep-alive")
        .token(TOKEN)
        .keep_alive()
        .bytes();
    both.extend(Req::create(r#"{"id":999,"name":"x"}"#).keep_alive().bytes());
    c.write_all(&both).unwrap();
    let mut all = Vec::new();
    c.read_to_end(&mut all).unwrap();
    let text = String::from_utf8(all).unwrap();
    assert!(text.starts_with("HTTP/1.0 200 OK\r\n"), "{}", &text[..100]);
    assert_eq!(text.matches("HTTP/1.").count(), 1, "a second answer came");
    assert_eq!(names(text.split_once("\r\n\r\n").unwrap().1).len(), 300);
    assert_eq!(names(&s.list()).len(), 300, "the pipelined create ran");
}
