//! Test control's `truncate` and `trickle` within their bounds (docs/control.md,
//! "Faults"): a long list is read page by page as its bytes go out (chunked, no worker
//! held, a truncate reads no further than its cut), a list that fails under them is never
//! a complete answer, and a trickle ends at a reset, a restore and a stop (the rest at
//! once, in one go) and when its client leaves. SQLite only (test control is).

use crate::control::{controlled, ctl, list_as, seed_file};
use crate::faults::{fault, raw_until_end};
use crate::support::*;
use serde_json::json;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// `long`'s token, whose 600 plants (`p1` to `p600`) make a list of three pages.
const LONG: &str = "long-seeded-token-0123";

/// A server whose seed gives `long` its 600 plants, with `args`.
fn with_a_long_list(dir: &TempDir, args: &str) -> TestServer {
    let plants: Vec<String> = (1..=600)
        .map(|id| format!(r#"{{"id":{id},"name":"p{id}"}}"#))
        .collect();
    let seed = format!(
        r#"{{"tokens":[{{"token":"{LONG}","principal":"long"}}],"plants":{{"long":[{}]}}}}"#,
        plants.join(",")
    );
    let seed = seed_file(dir, &seed);
    controlled(":memory:")
        .arg(&format!("--seed {seed}"))
        .arg(args)
        .start()
}

/// Sends `GET /plants` as `long` on a new connection, once the list's later pages wait.
#[cfg(feature = "fault-injection")]
fn list_held(s: &TestServer) -> TcpStream {
    let r = s.send("GET", "/__fault/hold-list-pages", &[], None);
    assert_eq!(r.status, 200);
    let mut c = s.connect();
    c.write_all(&Req::get("/plants").token(LONG).bytes())
        .unwrap();
    c
}

#[cfg(feature = "fault-injection")]
fn release(s: &TestServer) {
    let r = s.send("GET", "/__fault/release-list-pages", &[], None);
    assert_eq!(r.status, 200);
}

/// Reads from `c` until what came holds `end` (a read that times out fails the test).
#[cfg(feature = "fault-injection")]
fn read_until(c: &mut TcpStream, got: &mut Vec<u8>, end: &[u8]) {
    let mut buf = [0u8; 4096];
    while !got.windows(end.len()).any(|w| w == end) {
        let n = c
            .read(&mut buf)
            .unwrap_or_else(|e| panic!("{e} with {:?}", String::from_utf8_lossy(got)));
        assert!(n > 0, "ended with {:?}", String::from_utf8_lossy(got));
        got.extend_from_slice(&buf[..n]);
    }
}

#[cfg(feature = "fault-injection")]
#[test]
fn a_long_list_is_trickled_and_cut_as_it_is_read_holding_no_worker() {
    if no_test_control() {
        return;
    }
    let dir = TempDir::new();
    let s = with_a_long_list(&dir, "--workers 1");
    let whole_list = list_as(&s, LONG);
    fault(
        &s,
        json!({"match":{"principal":"long"},"action":{"kind":"trickle","bytes":1000,"every_ms":1},
               "times":1}),
    );
    // Its head and the pieces of its first page go out while the next page waits to be
    // read (the piece that spans the two waits with it).
    let mut c = list_held(&s);
    let mut got = Vec::new();
    read_until(&mut c, &mut got, br#"{"name":"p150"}"#);
    // Meanwhile the one worker answers others.
    assert_eq!(s.get("/healthz").status, 200);
    release(&s);
    c.read_to_end(&mut got).unwrap();
    let answer = read_response(&mut &got[..]).unwrap();
    assert_eq!(answer.status, 200);
    assert_eq!(answer.header("Transfer-Encoding"), Some("chunked"));
    assert_eq!(answer.header("Content-Length"), None);
    assert_eq!(answer.header("Connection"), Some("close"));
    assert_eq!(answer.text(), whole_list);
    assert!(got.ends_with(b"\r\n0\r\n\r\n"), "the last chunk");
    let head = got.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
    // A truncate is sent while the next page waits: it reads no further than its cut.
    for (bytes, cut) in [(Some(200), 200), (Some(head + 5), head + 5), (None, 0)] {
        let action = match bytes {
            Some(n) => json!({"kind":"truncate","bytes":n}),
            None => json!({"kind":"truncate"}),
        };
        fault(
            &s,
            json!({"match":{"principal":"long"},"action":action,"times":1}),
        );
        let mut c = list_held(&s);
        let mut cut_short = Vec::new();
        c.read_to_end(&mut cut_short).unwrap();
        release(&s);
        if bytes.is_some() {
            assert_eq!(cut_short, got[..cut], "the first {cut} bytes");
        } else {
            // Its head and the list's first read: less than the whole body.
            let size_line = got[head..].windows(2).position(|w| w == b"\r\n").unwrap();
            let size = std::str::from_utf8(&got[head..head + size_line]).unwrap();
            let first_chunk = size_line + 2 + usize::from_str_radix(size, 16).unwrap() + 2;
            assert_eq!(cut_short, got[..head + first_chunk]);
            assert!(cut_short.len() < got.len() - 5);
        }
    }
}

#[cfg(feature = "fault-injection")]
#[test]
fn a_list_that_fails_under_a_trickle_or_a_truncate_is_never_a_complete_answer() {
    if no_test_control() {
        return;
    }
    let dir = TempDir::new();
    let s = with_a_long_list(&dir, "");
    let trickle = json!({"kind":"trickle","bytes":1000,"every_ms":1});
    let whole = json!({"kind":"truncate","bytes":1 << 24});
    for action in [trickle, whole] {
        fault(
            &s,
            json!({"match":{"principal":"long"},"action":action,"times":1}),
        );
        let mut c = list_held(&s);
        let mut got = Vec::new();
        read_until(&mut c, &mut got, br#"{"name":"p150"}"#);
        // A reset meets the list between two pages: it cannot go on.
        assert_eq!(s.request(&ctl("POST", "/_control/reset")).status, 204);
        release(&s);
        let _ = c.read_to_end(&mut got);
        let shown = String::from_utf8_lossy(&got);
        assert!(shown.contains("Transfer-Encoding: chunked"), "{shown}");
        assert!(
            read_response(&mut &got[..]).is_err(),
            "an incomplete answer: {shown}"
        );
    }
}

#[test]
fn a_reset_or_a_restore_sends_the_rest_of_a_trickle_at_once() {
    if no_test_control() {
        return;
    }
    let s = controlled(":memory:").start();
    let snapshot = s.request(&ctl("POST", "/_control/snapshots")).json();
    let restore = format!(
        "/_control/snapshots/{}/restore",
        snapshot["id"].as_str().unwrap()
    );
    // About 110 bytes, one every 10 s: 18 minutes, but for the reset or the restore.
    // (The restore first: a reset removes the snapshots.)
    for path in [&restore, "/_control/reset"] {
        fault(
            &s,
            json!({"match":{"path":"/healthz"},"action":{"kind":"trickle","bytes":1,"every_ms":10000},
                   "times":1}),
        );
        let mut c = s.connect();
        c.write_all(&Req::get("/healthz").bytes()).unwrap();
        let mut first = [0u8; 1];
        c.read_exact(&mut first).unwrap();
        assert_eq!(s.request(&ctl("POST", path)).status, 204);
        // Well before the next piece would be due.
        c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut rest = Vec::new();
        c.read_to_end(&mut rest).unwrap();
        let answer = read_response(&mut &[&first[..], &rest].concat()[..]).unwrap();
        assert_eq!(answer.text(), r#"{"status":"ok"}"#, "after {path}");
    }
}

#[test]
fn a_trickle_whose_client_left_frees_its_connection_at_once() {
    if no_test_control() {
        return;
    }
    let s = controlled(":memory:").arg("--max-connections 3").start();
    // Its first piece is the status line's first 12 bytes; the next would be 10 s later.
    fault(
        &s,
        json!({"match":{"path":"/healthz","headers":{"X-Trickle":"yes"}},
               "action":{"kind":"trickle","bytes":12,"every_ms":10000}}),
    );
    let trickled = Req::get("/healthz").header("X-Trickle", "yes");
    // Three trickles take every connection (one refused over the cap, while a closed
    // connection's place is not yet free, is tried again); their clients leave at once.
    let mut left = 0;
    eventually(Duration::from_secs(10), || {
        let mut c = s.connect();
        c.write_all(&trickled.bytes()).unwrap();
        let mut first = [0u8; 12];
        c.read_exact(&mut first).unwrap();
        left += usize::from(&first == b"HTTP/1.1 200");
        left == 3
    });
    // Their connections end long before their next pieces were due.
    eventually(Duration::from_secs(5), || {
        Req::get("/healthz")
            .send_to(&s.addr)
            .is_ok_and(|r| r.status == 200)
    });
}

/// The data segments that came on `c` so far (`TCP_INFO`).
fn segments_in(c: &TcpStream) -> u32 {
    use std::os::fd::AsRawFd;
    // SAFETY: TCP_INFO fills at most `len` bytes of a zeroed `tcp_info` we own.
    let mut info: libc::tcp_info = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::tcp_info>() as libc::socklen_t;
    let r = unsafe {
        libc::getsockopt(
            c.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            (&raw mut info).cast(),
            &mut len,
        )
    };
    assert_eq!(r, 0, "{}", std::io::Error::last_os_error());
    info.tcpi_segs_in
}

#[test]
fn a_stop_sends_the_rest_of_a_trickle_in_one_go() {
    if no_test_control() {
        return;
    }
    let s = controlled(":memory:").start();
    fault(
        &s,
        json!({"match":{"path":"/healthz"},"action":{"kind":"trickle","bytes":1,"every_ms":10000}}),
    );
    let mut c = s.connect();
    c.write_all(&Req::get("/healthz").bytes()).unwrap();
    let mut first = [0u8; 1];
    c.read_exact(&mut first).unwrap();
    let before = segments_in(&c);
    s.signal(libc::SIGTERM);
    let mut rest = Vec::new();
    c.read_to_end(&mut rest).unwrap();
    // About 110 bytes: one write, not one for each of them (the FIN may come apart).
    let segments = segments_in(&c) - before;
    assert!(
        segments <= 3,
        "{segments} segments for {} bytes",
        rest.len()
    );
    let answer = read_response(&mut &[&first[..], &rest].concat()[..]).unwrap();
    assert_eq!(answer.text(), r#"{"status":"ok"}"#);
    assert!(s.stop().success());
}

#[test]
fn a_trickle_on_a_closing_http_1_0_list_ends_at_the_close() {
    if no_test_control() {
        return;
    }
    let dir = TempDir::new();
    let s = with_a_long_list(&dir, "");
    let whole_list = list_as(&s, LONG);
    fault(
        &s,
        json!({"match":{"principal":"long"},"action":{"kind":"trickle","bytes":4096,"every_ms":1},
               "times":1}),
    );
    let (got, reset) = raw_until_end(&s, &Req::get("/plants").token(LONG).http10());
    assert!(!reset);
    let shown = String::from_utf8_lossy(&got);
    let (head, body) = shown.split_once("\r\n\r\n").unwrap();
    assert!(head.starts_with("HTTP/1.0 200 OK\r\n"), "{head}");
    assert!(!head.contains("Content-Length") && !head.contains("Transfer-Encoding"));
    assert!(head.contains("Connection: close"), "{head}");
    assert_eq!(body, whole_list);
}
