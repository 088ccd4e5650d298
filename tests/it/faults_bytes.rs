//! Test control's faults on an answer's bytes (docs/control.md, "Faults"), as a raw TCP
//! client sees them: `truncate` at a byte, exactly, and `trickle` (its pieces' timing, the
//! whole answer in the end, no worker held, a stop). SQLite only (test control is).

use crate::control::{controlled, create_as, ctl, list_as};
use crate::faults::{fault, faults, plant, principal, raw_until_end};
use crate::support::*;
use serde_json::json;
use std::io::{Read, Write};
use std::time::{Duration, Instant};

/// Sends `req` on a new connection and reads until the server ends it: the bytes, and
/// each read's time since the request was sent with the bytes read by then.
fn timed_until_end(s: &TestServer, req: &Req) -> (Vec<u8>, Vec<(Duration, usize)>) {
    let mut c = s.connect();
    c.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let sent = Instant::now();
    c.write_all(&req.bytes()).unwrap();
    let (mut got, mut reads, mut buf) = (Vec::new(), Vec::new(), [0u8; 4096]);
    loop {
        match c.read(&mut buf) {
            Ok(0) => return (got, reads),
            Ok(n) => {
                got.extend_from_slice(&buf[..n]);
                reads.push((sent.elapsed(), got.len()));
            }
            Err(e) => panic!("reading after {:?}: {e}", sent.elapsed()),
        }
    }
}

/// A whole answer read off the wire, and the length of its head: its body must be
/// exactly its `Content-Length`, and nothing follows it.
fn whole(bytes: &[u8]) -> (Resp, usize) {
    let shown = String::from_utf8_lossy(bytes);
    let head = shown.find("\r\n\r\n").expect("a whole head") + 4;
    let r = read_response(&mut &bytes[..]).unwrap();
    let length = r
        .header("Content-Length")
        .map(|n| n.parse::<usize>().unwrap());
    assert_eq!(length, Some(bytes.len() - head), "{shown:?}");
    (r, head)
}

#[test]
fn truncate_sends_exactly_the_first_bytes_then_closes() {
    if no_test_control() {
        return;
    }
    let s = controlled(":memory:").start();
    let p = principal(&s, "cut");
    for id in 1..=3 {
        assert_eq!(s.request(&create_as(&p, &plant(id))).status, 200);
    }
    let cut = |bytes: u64| {
        let f = json!({"match":{"principal":"cut","method":"GET"},
                       "action":{"kind":"truncate","bytes":bytes},"times":1});
        assert_eq!(fault(&s, f)["action"]["bytes"], bytes);
        raw_until_end(&s, &Req::get("/plants").token(&p)).0
    };
    // More than the answer has: the whole answer, then the connection closes.
    let all = cut(1 << 24);
    let (answer, head) = whole(&all);
    assert_eq!(answer.text(), list_as(&s, &p));
    assert_eq!(answer.header("Connection"), Some("close"));
    for n in [0, 1, 17, head - 1, head, head + 1, all.len() - 1, all.len()] {
        assert_eq!(cut(n as u64), all[..n], "truncated at {n}");
    }
}

#[test]
fn a_trickle_sends_the_answer_in_pieces_apart_and_whole_in_the_end() {
    if no_test_control() {
        return;
    }
    let s = controlled(":memory:").start();
    let p = principal(&s, "drip");
    for id in 1..=3 {
        assert_eq!(s.request(&create_as(&p, &plant(id))).status, 200);
    }
    let (piece, every) = (40, Duration::from_millis(60));
    let f = fault(
        &s,
        json!({"match":{"principal":"drip"},"action":{"kind":"trickle","bytes":piece,"every_ms":60}}),
    );
    assert_eq!(f["when"], "after");
    let (got, reads) = timed_until_end(&s, &Req::get("/plants").token(&p));
    let (answer, _) = whole(&got);
    assert_eq!(answer.status, 200);
    assert_eq!(answer.header("Connection"), Some("close"));
    // The k-th piece (from 0) leaves the server `every` after the one before: it cannot
    // have arrived sooner than k × `every` after the request was sent. (The client may
    // read two pieces at once when it is slow: only this lower bound holds.)
    let pieces = got.len().div_ceil(piece);
    assert!(pieces >= 4, "{} bytes", got.len());
    for (at, read) in &reads {
        let k = read.div_ceil(piece) - 1;
        assert!(
            *at >= every * k as u32,
            "{read} bytes after {at:?}: {reads:?}"
        );
    }
    assert!(reads.last().unwrap().0 >= every * (pieces as u32 - 1));
    // Delete the fault: the same list comes back whole at once.
    assert_eq!(
        s.request(&ctl(
            "DELETE",
            &format!("/_control/faults/{}", f["id"].as_str().unwrap())
        ))
        .status,
        204
    );
    assert_eq!(answer.text(), list_as(&s, &p));
    // A stream of events is never trickled; its list is.
    fault(
        &s,
        json!({"match":{"path":"/events"},"action":{"kind":"trickle","bytes":1000,"every_ms":1}}),
    );
    let stream = Sse::open(&s, &p, "/events", &[]);
    assert_eq!(stream.head.status, 200);
    assert_eq!(faults(&s)[0]["hits"], 0);
    drop(stream);
    assert_eq!(events_as(&s, &p, "").status, 200);
    assert_eq!(faults(&s)[0]["hits"], 1);
}

#[test]
fn a_trickle_holds_no_worker_and_a_stop_sends_the_rest_at_once() {
    if no_test_control() {
        return;
    }
    let s = controlled(":memory:").arg("--workers 1").start();
    let p = principal(&s, "w");
    // About 110 bytes, one every 10 s: the whole answer in 18 minutes.
    fault(
        &s,
        json!({"match":{"path":"/healthz"},"action":{"kind":"trickle","bytes":1,"every_ms":10000}}),
    );
    let mut c = s.connect();
    c.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    c.write_all(&Req::get("/healthz").bytes()).unwrap();
    let mut first = [0u8; 1];
    c.read_exact(&mut first).unwrap();
    assert_eq!(&first, b"H");
    // The one worker is free while the answer trickles.
    assert_eq!(s.request(&Req::get("/plants").token(&p)).status, 200);
    assert_eq!(s.request(&ctl("GET", "/_control/faults")).status, 200);
    // A stop sends the rest at once, then the server exits.
    s.signal(libc::SIGTERM);
    let mut rest = Vec::new();
    c.read_to_end(&mut rest).unwrap();
    let (answer, _) = whole(&[&first[..], &rest].concat());
    assert_eq!(answer.text(), r#"{"status":"ok"}"#);
    let status = s.stop();
    assert!(status.success(), "{status:?}");
}
