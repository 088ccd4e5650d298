//! With the `fault-injection` feature (`GET /__panic`): the panic hook writes its line
//! itself, at once and never waiting for standard error; a build whose panics abort (the
//! device build: `cargo build --profile small --no-default-features --features
//! fault-injection`, run with `PLANT_STORE_BIN`) ends the process after that line and
//! loses nothing acknowledged. A build that unwinds answers 500 (`robustness.rs`).
#![cfg(feature = "fault-injection")]

use crate::logs::fill_the_log;
use crate::support::*;
use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A pipe nobody reads is full and the log drops lines; a panicking handler is still
/// answered 500 at once (its line is lost, never waited for), and the worker, the only
/// one, serves on.
#[test]
fn a_panic_never_waits_for_a_log_nobody_reads() {
    if panics_abort() {
        eprintln!("not in this build: its panics end the process");
        return;
    }
    let s = Launch::memory().arg("--workers 1").stderr_unread().start();
    fill_the_log(&s);
    for _ in 0..3 {
        let r = s.send("GET", "/__panic", &[], None);
        assert_eq!(r.status, 500, "{}", r.text());
        assert_eq!(s.get("/plants").status, 200);
    }
}

/// The device build's way: a panicking request ends the process (SIGABRT) after the
/// hook's line (the thread, the place, the message), while writers run; a restart on the
/// same file has every write that was acknowledged.
#[test]
fn a_panic_in_a_build_that_aborts_ends_it_and_loses_nothing_acknowledged() {
    if !panics_abort() {
        eprintln!("not in this build: its panics unwind (robustness.rs has its test)");
        return;
    }
    let dir = TempDir::new();
    let mut s = TestServer::start(&dir.db());
    let acked = Arc::new(Mutex::new(BTreeSet::new()));
    let writers: Vec<_> = (0..4i64)
        .map(|w| {
            let (addr, acked) = (s.addr.clone(), acked.clone());
            std::thread::spawn(move || {
                for i in 0.. {
                    let id = w * 1_000_000 + i;
                    let body = format!(r#"{{"id":{id},"name":"p{id}"}}"#);
                    match Req::create(&body).send_to(&addr) {
                        Ok(r) if r.status == 200 => acked.lock().unwrap().insert(id),
                        Ok(r) => panic!("create {id}: {} {}", r.status, r.text()),
                        // The process has ended (or ends under this request).
                        Err(_) => return,
                    };
                }
            })
        })
        .collect();
    eventually(Duration::from_secs(20), || {
        acked.lock().unwrap().len() >= 100
    });
    assert!(
        Req::get("/__panic").send_to(&s.addr).is_err(),
        "a panicking request was answered"
    );
    eventually(Duration::from_secs(10), || {
        s.child.try_wait().unwrap().is_some()
    });
    let status = s.child.try_wait().unwrap().unwrap();
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(status.signal(), Some(libc::SIGABRT), "{status:?}");
    for w in writers {
        w.join().unwrap();
    }
    let log = s.log_when(|log| log.contains("fault injection: a handler panicked"));
    let line = log
        .lines()
        .find(|l| l.contains("fault injection: a handler panicked"))
        .unwrap();
    assert!(
        line.contains("[ERROR] panic in thread 'worker-")
            && line.contains(" at src/api/routes/fault.rs:")
            && line.ends_with("; the process ends (panic = \"abort\")"),
        "{line}"
    );
    let acked = acked.lock().unwrap().clone();
    let s = TestServer::start(&dir.db());
    let listed = listed_ids(&s);
    let lost: Vec<_> = acked.difference(&listed).collect();
    assert!(lost.is_empty(), "acknowledged and lost: {lost:?}");
}
