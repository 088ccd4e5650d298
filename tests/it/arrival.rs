//! The same answer however a request's bytes arrive (a chunk line's bound in one write or
//! split, a head trickled byte by byte), and answers that end a connection saying so.

use crate::support::*;
use std::io::Write;
use std::thread;
use std::time::Duration;

/// A chunked create whose first chunk line is `line` bytes long (CRLF included).
fn chunked_create(line: usize) -> (String, String) {
    let head = format!(
        "POST /plants HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer {TOKEN}\r\n\
         Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
    );
    let body = r#"{"id":1,"name":"long line"}"#;
    let size = format!("{:x};", body.len());
    let chunk_line = format!("{size}{}\r\n", "e".repeat(line - size.len() - 2));
    assert_eq!(chunk_line.len(), line);
    (head + &chunk_line, format!("{body}\r\n0\r\n\r\n"))
}

/// A chunk line over 1 KiB is 400 whether it arrives in one write or in two; one of
/// 1 KiB is served either way. (A line of 1,105 bytes was served in one write and
/// refused split.)
#[test]
fn a_chunk_line_s_bound_is_the_same_in_one_write_or_two() {
    let s = TestServer::memory();
    for (line, status) in [(1105, 400), (1025, 400), (1024, 200)] {
        for split in [false, true] {
            let (first, rest) = chunked_create(line);
            let mut c = s.connect();
            c.set_nodelay(true).unwrap();
            if split {
                // The line cut before its end: the server looks at the first piece alone.
                let (a, b) = first.split_at(first.len() - 10);
                c.write_all(a.as_bytes()).unwrap();
                thread::sleep(Duration::from_millis(100));
                // A refusal may already have closed the connection.
                let _ = c.write_all(format!("{b}{rest}").as_bytes());
            } else {
                c.write_all(format!("{first}{rest}").as_bytes()).unwrap();
            }
            let r = read_response(&mut c).unwrap();
            assert_eq!(
                r.status,
                status,
                "{line} bytes, split {split}: {}",
                r.text()
            );
            if status == 400 {
                assert_eq!(r.text(), err(400, "a chunk line is too long"));
            } else {
                let deleted = s.delete("1");
                assert_eq!(deleted.status, 204, "{}", deleted.text());
            }
        }
    }
}

/// A head trickled a byte at a time is answered 400 "too many pieces", as a body is,
/// with an access log line: it was closed without an answer or a log line once its
/// pieces filled the socket's memory (at 512 bytes).
#[test]
fn a_head_trickled_byte_by_byte_is_answered_400_and_logged() {
    let s = TestServer::memory();
    let mut c = s.connect();
    c.set_nodelay(true).unwrap();
    let head = format!(
        "GET /plants HTTP/1.1\r\nHost: t\r\nX-Long: {}\r\n\r\n",
        "l".repeat(4000)
    );
    let mut sent = 0;
    let mut answer = [0u8; 1];
    c.set_nonblocking(true).unwrap();
    for b in head.bytes() {
        // Stops at the answer, or at the close without one (read as 0 bytes).
        if c.peek(&mut answer).is_ok() || c.write_all(&[b]).is_err() {
            break;
        }
        sent += 1;
        // The client's pace: each byte arrives alone.
        thread::sleep(Duration::from_millis(2));
    }
    c.set_nonblocking(false).unwrap();
    assert!(
        sent < head.len(),
        "the whole head was taken a byte at a time"
    );
    let r = read_response(&mut c).expect("an answer, not a silent close");
    assert_eq!(
        (r.status, r.text()),
        (400, err(400, "the request arrived in too many pieces"))
    );
    assert_eq!(r.header("Connection"), Some("close"));
    // The access line: no method or path (the head never became a request), 400, 64 bytes.
    s.log_when(|log| log.lines().any(|l| l.contains(" - - 400 64 ")));
}

/// Every answer after which the connection ends carries `Connection: close`: the 413s
/// and the 408 too (tiny_http dropped the header from them).
#[test]
fn answers_that_end_the_connection_say_connection_close() {
    let s = Launch::memory().arg("--body-timeout 1").start();
    let head = format!(
        "POST /plants HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer {TOKEN}\r\n\
         Content-Type: application/json\r\n"
    );
    let chunk = format!("{:x}\r\n{}\r\n", 70_000, " ".repeat(70_000));
    for (request, status) in [
        (format!("{head}Content-Length: 100000\r\n\r\n"), 413),
        (
            format!("{head}Transfer-Encoding: chunked\r\n\r\n{chunk}0\r\n\r\n"),
            413,
        ),
        (format!("{head}Content-Length: 10\r\n\r\n{{}}"), 408),
    ] {
        let mut c = s.connect();
        let _ = c.write_all(request.as_bytes());
        let r = read_response(&mut c).unwrap();
        assert_eq!(r.status, status, "{}", r.text());
        assert_eq!(r.header("Connection"), Some("close"), "{status}");
        assert_eq!(r.json()["error"], status);
        assert!(rest_until_closed(&mut c).is_empty());
    }
    // An answer that keeps the connection says nothing of it.
    let r = s.get("/healthz");
    assert_eq!((r.status, r.header("Connection")), (200, None));
}

/// Tabs around a header value are blanks (RFC 9110's OWS) and are dropped; a tab inside
/// one is allowed by RFC 9110 but not by the HTTP parser behind the gate (tiny_http_fork
/// 0.12.17), so it is refused with a message that says so, not as "a control character".
#[test]
fn tabs_around_a_header_value_are_blanks_and_one_inside_is_refused_by_name() {
    let s = TestServer::memory();
    let r = s.send(
        "GET",
        "/events",
        &[
            ("Authorization", &bearer(TOKEN)),
            ("Accept", "\tapplication/json\t"),
        ],
        None,
    );
    assert_eq!((r.status, r.text()), (200, "[]".to_owned()));
    let r = s.send("GET", "/healthz", &[("X-Padded", "\t a \t")], None);
    assert_eq!(r.status, 200, "{}", r.text());
    let inside = "a header value holds a tab inside it, which this server's HTTP parser does not accept; send a space";
    for (path, name, value) in [
        ("/events", "Accept", "a\tb"),
        ("/healthz", "X-Plain", "one\ttwo"),
    ] {
        let r = s.send(
            "GET",
            path,
            &[("Authorization", &bearer(TOKEN)), (name, value)],
            None,
        );
        assert_eq!((r.status, r.text()), (400, err(400, inside)), "{name}");
        assert_eq!(r.header("Connection"), Some("close"));
    }
    // Other control characters stay refused as such, at the ends too.
    for value in ["a\u{1}b", "a\u{c}"] {
        let r = s.send("GET", "/healthz", &[("X-Ctl", value)], None);
        assert_eq!(
            (r.status, r.text()),
            (
                400,
                err(400, "a header value holds a control or non-ASCII character")
            ),
            "{value:?}"
        );
    }
}
