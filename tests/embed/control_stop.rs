//! Test control in process across the server's stop: a journal listing that waits is
//! answered at the stop, as the HTTP surface answers its own then.

use crate::client::get;
use crate::control::controlled;
use crate::shared;
use plant_store::control::Query;
use std::sync::atomic::Ordering;
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Whether thread `tid` of this process sleeps (blocked: its listing parked, as nothing
/// else in the call blocks).
fn sleeping(tid: &str) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/self/task/{tid}/stat")).unwrap();
    stat.rsplit_once(')')
        .unwrap()
        .1
        .trim_start()
        .starts_with('S')
}

#[test]
fn a_waiting_listing_is_answered_at_the_stop() {
    let _g = shared();
    let s = controlled();
    let control = s.control().unwrap();
    assert_eq!(get(s.addr(), "/healthz", None).status, 200);
    let (tell, told) = mpsc::channel();
    std::thread::scope(|t| {
        let waiter = t.spawn(move || {
            let me = std::fs::read_link("/proc/thread-self").unwrap();
            tell.send(me.file_name().unwrap().to_string_lossy().into_owned())
                .unwrap();
            // Two answered entries: only one will come.
            control.journal(Query::all().min(2).wait(Duration::from_secs(30)))
        });
        let tid = told.recv().unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        while !sleeping(&tid) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        let stopped = Instant::now();
        s.stop_flag().store(true, Ordering::SeqCst);
        let listed = waiter.join().unwrap();
        let took = stopped.elapsed();
        assert!(
            took < Duration::from_secs(5),
            "answered {took:?} after the stop"
        );
        match listed {
            // What the journal holds, as the HTTP listing is answered at a stop.
            Ok(entries) => {
                let paths: Vec<&str> = entries.iter().map(|e| e.path.as_str()).collect();
                assert_eq!(paths, ["/healthz"]);
            }
            // The stop came before the call (it is refused as any call after it).
            Err(e) => assert_eq!(e.status(), 503, "{e}"),
        }
    });
    s.stop().unwrap();
}
