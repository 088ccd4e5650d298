use super::*;
use crate::ops::clock::Clock;
use serde_json::{Value, json};
use std::sync::atomic::AtomicUsize;

fn journal(size: usize, bytes: usize) -> Arc<Journal> {
    Arc::new(Journal::new(size, bytes, Default::default()))
}

fn arrive(j: &Arc<Journal>, method: &str, target: &str) -> Ticket {
    j.arrived(method, target, [("Host", "h")], 64).unwrap()
}

fn list(j: &Journal, query: &str) -> Value {
    let q = Query::parse(query, 1000).unwrap();
    serde_json::from_slice(&j.list(&q)).unwrap()
}

fn ns(v: &Value) -> Vec<u64> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|e| e["n"].as_u64().unwrap())
        .collect()
}

#[test]
fn entries_are_listed_from_arrival_in_its_order() {
    let j = journal(10, 1 << 20);
    let first = arrive(&j, "GET", "/plants?limit=1");
    let second = arrive(&j, "POST", "/plants");
    assert!(j.arrived("GET", "/_control/requests", [], 64).is_none());
    assert!(j.arrived("GET", "/_control?x", [], 64).is_none());
    let all = list(&j, "");
    assert_eq!(ns(&all), [1, 2]);
    assert_eq!(
        (
            &all[0]["answered"],
            &all[0]["status"],
            &all[0]["duration_ms"]
        ),
        (&json!(false), &Value::Null, &Value::Null)
    );
    assert_eq!(
        (&all[1]["path"], &all[1]["query"]),
        (&json!("/plants"), &json!(""))
    );
    // The second is answered first: the order stays the order of arrival.
    second.answered(Some(201), Some("alice"), Some("flt_1"));
    drop(first);
    let all = list(&j, "");
    assert_eq!(ns(&all), [1, 2]);
    assert_eq!(
        (&all[0]["answered"], &all[0]["status"], &all[0]["principal"]),
        (&json!(true), &Value::Null, &Value::Null),
        "dropped with no answer"
    );
    assert_eq!(
        (&all[1]["status"], &all[1]["principal"], &all[1]["fault"]),
        (&json!(201), &json!("alice"), &json!("flt_1"))
    );
    assert!(all[1]["duration_ms"].as_f64().unwrap() >= 0.0);
}

#[test]
fn at_is_the_reading_at_arrival_whatever_the_clock_does_after() {
    let clock = Arc::new(Clock::new(true));
    let j = Arc::new(Journal::new(10, 1 << 20, clock.clone()));
    clock.set(1_900_000_000_000, true).unwrap();
    let t = arrive(&j, "GET", "/plants");
    // Moved to the earliest reading while the request is in flight.
    clock.set(crate::ops::clock::EARLIEST_MS, true).unwrap();
    t.answered(Some(200), None, None);
    assert_eq!(list(&j, "")[0]["at"], "2030-03-17T17:46:40.000Z");
}

#[test]
fn the_journal_is_bounded_in_entries_and_in_bytes() {
    let j = journal(2, 1 << 20);
    for _ in 0..3 {
        arrive(&j, "GET", "/healthz").answered(Some(200), None, None);
    }
    assert_eq!(ns(&list(&j, "")), [2, 3]);
    // Each entry costs ENTRY_BYTES and its text; a body counts once answered.
    let one = Entry::new("GET", "/healthz", [("Host", "h")], 0, 64).cost();
    let j = journal(100, 3 * one);
    for _ in 0..4 {
        arrive(&j, "GET", "/healthz").answered(Some(200), None, None);
    }
    assert_eq!(ns(&list(&j, "")), [2, 3, 4]);
    let mut t = arrive(&j, "GET", "/healthz");
    t.body(&[b'x'; 500]);
    assert_eq!(ns(&list(&j, "")), [3, 4, 5]);
    t.answered(Some(200), None, None);
    assert_eq!(ns(&list(&j, "")), [4, 5], "the body pushed out the oldest");
    assert_eq!(j.lock().bytes, 2 * one + 500);
    // A body is kept up to MAX_JOURNAL_BODY, and counted so.
    let j = journal(10, 1 << 20);
    let mut t = arrive(&j, "POST", "/plants");
    t.body(&vec![b'y'; MAX_JOURNAL_BODY + 1]);
    t.body(b"read once only");
    let e = &list(&j, "")[0];
    assert_eq!(e["body"].as_str().unwrap().len(), MAX_JOURNAL_BODY);
    assert_eq!(e["body_truncated"], true);
    drop(t);
    let one = Entry::new("POST", "/plants", [("Host", "h")], 0, 64).cost();
    assert_eq!(j.lock().bytes, one + MAX_JOURNAL_BODY);
    let mut t = arrive(&j, "POST", "/plants");
    t.body(&[0xff, 0xfe, b'a']);
    let e = &list(&j, "")[1];
    assert_eq!(
        (&e["body"], &e["body_base64"]),
        (&Value::Null, &json!("//5h"))
    );
    assert_eq!(e["body_truncated"], false);
    let mut t = arrive(&j, "POST", "/plants");
    t.body(b"");
    assert_eq!(
        list(&j, "")[2]["body"],
        Value::Null,
        "an empty body is none"
    );
}

#[test]
fn a_listing_is_never_longer_than_what_the_journal_counts() {
    // Texts that JSON escapes most (a NUL is `\u0000`, six bytes), and bodies in base64.
    let bytes = 256 * 1024;
    let j = journal(1000, bytes);
    let bodies: [&[u8]; 4] = [&[0; 65536], &[b'"'; 30000], &[0xff; 40000], b"plain"];
    for (i, body) in bodies.iter().cycle().take(40).enumerate() {
        let quotes = "\"\\".repeat(i * 10);
        let fields = [("Host", "h"), ("X-Quotes", quotes.as_str())];
        let mut t = j.arrived("POST", "/plants?q=\"", fields, 64).unwrap();
        t.body(body);
        t.answered(Some(400), Some("al\"ice"), Some("flt_1"));
    }
    let listing = j.list(&Query::parse("", 1000).unwrap());
    assert!(listing.len() <= bytes, "{} > {bytes}", listing.len());
    let kept = ns(&serde_json::from_slice(&listing).unwrap());
    assert!(kept.len() >= 3 && kept.last() == Some(&40), "{kept:?}");
}

#[test]
fn a_clear_keeps_the_requests_in_flight_with_fresh_numbers() {
    let j = journal(10, 1 << 20);
    arrive(&j, "GET", "/a").answered(Some(200), None, None);
    let open = arrive(&j, "GET", "/b");
    arrive(&j, "GET", "/c").answered(Some(200), None, None);
    let later = arrive(&j, "GET", "/d");
    j.clear();
    let all = list(&j, "");
    assert_eq!(ns(&all), [1, 2]);
    assert_eq!(
        (&all[0]["path"], &all[1]["path"]),
        (&json!("/b"), &json!("/d"))
    );
    open.answered(Some(503), Some("held"), None);
    drop(later);
    arrive(&j, "GET", "/e");
    assert_eq!(ns(&list(&j, "")), [1, 2, 3]);
    assert_eq!(list(&j, "principal=held")[0]["status"], 503);
}

#[test]
fn filters_choose_and_limit_the_entries() {
    let j = journal(100, 1 << 20);
    for (path, status) in [
        ("/plants", 200),
        ("/plants/1", 404),
        ("/events", 503),
        ("/plants", 201),
    ] {
        arrive(&j, "GET", path).answered(Some(status), Some("p"), None);
    }
    let _open = arrive(&j, "GET", "/plants");
    assert_eq!(ns(&list(&j, "status=2xx")), [1, 4]);
    assert_eq!(ns(&list(&j, "status=503")), [3]);
    assert_eq!(ns(&list(&j, "status=4XX")), [2]);
    assert_eq!(ns(&list(&j, "path=/plants*")), [1, 2, 4, 5]);
    assert_eq!(ns(&list(&j, "path=%2Fplants")), [1, 4, 5]);
    assert_eq!(ns(&list(&j, "after=2")), [3, 4, 5]);
    assert_eq!(ns(&list(&j, "after=2&limit=1")), [3]);
    assert_eq!(ns(&list(&j, "limit=0")), Vec::<u64>::new());
    assert_eq!(ns(&list(&j, "principal=p&method=GET&after=3")), [4]);
}

#[test]
fn a_bad_query_names_the_parameter() {
    let message = |q: &str| match Query::parse(q, 1000) {
        Ok(_) => panic!("{q} accepted"),
        Err(e) => e.to_string(),
    };
    for (q, part) in [
        (
            "who=x",
            "unknown query parameter `who` (known: method, path, principal, status, after, limit, wait, min)",
        ),
        ("status=600", "`status` must be"),
        ("status=2x", "`status` must be"),
        ("after=-1", "`after` must be a whole number"),
        (
            "limit=1001",
            "`limit` must be a whole number from 0 to 1000",
        ),
        ("wait=31s", "`wait` must be a DURATION from 1s to 30s"),
        ("wait=0", "`wait` must be"),
        (
            "wait=5s&min=0",
            "`min` must be a whole number from 1 to 1000",
        ),
        ("min=2", "`min` needs `wait`"),
        ("after=1&after=2", "`after` is given twice"),
        ("path=%zz", "`path` is not percent-encoded"),
        ("path=%+1", "`path` is not percent-encoded"),
    ] {
        let m = message(q);
        assert!(m.contains(part), "{q}: {m}");
    }
    let q = Query::parse("wait=2s", 10).unwrap();
    assert_eq!(
        (q.wait, q.min),
        (Some(std::time::Duration::from_secs(2)), 1)
    );
}

#[test]
fn a_parked_listing_is_woken_once_enough_answered_entries_match() {
    let j = journal(100, 1 << 20);
    arrive(&j, "POST", "/plants").answered(Some(500), None, None);
    let woken = Arc::new(AtomicUsize::new(0));
    let wake = || {
        let woken = woken.clone();
        Box::new(move || {
            woken.fetch_add(1, Ordering::SeqCst);
        }) as Wake
    };
    let q = |s: &str| Arc::new(Query::parse(s, 1000).unwrap());
    // Already there: woken at once.
    j.park(q("wait=5s&status=5xx"), wake());
    assert_eq!(woken.load(Ordering::SeqCst), 1);
    // Two more 5xx, counted as they are answered; an unanswered one and a 2xx are not.
    j.park(q("wait=5s&status=5xx&min=3"), wake());
    let open = arrive(&j, "POST", "/plants");
    arrive(&j, "POST", "/plants").answered(Some(200), None, None);
    arrive(&j, "POST", "/plants").answered(Some(503), None, None);
    assert_eq!(woken.load(Ordering::SeqCst), 1);
    open.answered(Some(502), None, None);
    assert_eq!(woken.load(Ordering::SeqCst), 2);
    // `after` counts only later entries; a clear starts the count again; unparked, never.
    j.park(q("wait=5s&after=4&path=/x"), wake());
    j.park(q("wait=5s&min=2&path=/x"), wake());
    let id = j.park(q("wait=5s&min=1&path=/y"), wake());
    j.unpark(id);
    arrive(&j, "GET", "/x").answered(Some(200), None, None);
    assert_eq!(woken.load(Ordering::SeqCst), 3);
    j.clear();
    arrive(&j, "GET", "/x").answered(Some(200), None, None);
    assert_eq!(woken.load(Ordering::SeqCst), 3, "the count started again");
    arrive(&j, "GET", "/y").answered(Some(200), None, None);
    arrive(&j, "GET", "/x").answered(Some(200), None, None);
    assert_eq!(woken.load(Ordering::SeqCst), 4);
    assert!(j.lock().waiters.is_empty());
}

/// Arrivals, bodies, answers, drops, clears, listings and parked listings at once: the
/// bounds hold, `bytes` is what the kept entries are charged, `n` rises, and every parked
/// listing is woken (each waits for one answer, and answers keep coming).
#[test]
fn the_journal_holds_its_rules_under_concurrent_use() {
    let j = journal(50, 40_000);
    let done = std::sync::atomic::AtomicBool::new(false);
    let woken = Arc::new(AtomicUsize::new(0));
    let check = |j: &Journal| {
        let kept = j.lock();
        let charged: usize = kept
            .entries
            .iter()
            .map(|e| e.charged.load(Ordering::Relaxed))
            .sum();
        assert_eq!(kept.bytes, charged);
        assert!(kept.entries.len() <= 50 && kept.bytes <= 40_000);
        assert!(
            kept.entries
                .iter()
                .all(|e| e.charged.load(Ordering::Relaxed) > 0)
        );
        let ns: Vec<u64> = kept.entries.iter().map(|e| e.n()).collect();
        assert!(ns.windows(2).all(|w| w[0] < w[1]), "{ns:?}");
    };
    std::thread::scope(|scope| {
        let answering: Vec<_> = (0..4)
            .map(|t| {
                let j = j.clone();
                scope.spawn(move || {
                    for i in 0..3000 {
                        let mut ticket = arrive(&j, "POST", "/plants");
                        if i % 3 == 0 {
                            ticket.body(&vec![b'b'; 100 * (i % 7)]);
                        }
                        match (i + t) % 4 {
                            0 => drop(ticket),
                            _ => ticket.answered(Some(200), Some("p"), None),
                        }
                    }
                })
            })
            .collect();
        scope.spawn(|| {
            let mut parked = 0;
            while !done.load(Ordering::SeqCst) {
                let woken = woken.clone();
                let q = Arc::new(Query::parse("wait=30s&status=2xx", 100).unwrap());
                j.park(
                    q,
                    Box::new(move || {
                        woken.fetch_add(1, Ordering::SeqCst);
                    }),
                );
                parked += 1;
                if parked % 10 == 0 {
                    j.clear();
                }
                let listed = list(&j, "");
                let ns = ns(&listed);
                assert!(ns.windows(2).all(|w| w[0] < w[1]), "{ns:?}");
                check(&j);
            }
            // The last ones: one more answer wakes them.
            arrive(&j, "GET", "/").answered(Some(200), None, None);
            assert_eq!(woken.load(Ordering::SeqCst), parked);
        });
        for a in answering {
            a.join().unwrap();
        }
        done.store(true, Ordering::SeqCst);
    });
    check(&j);
    assert!(j.lock().waiters.is_empty());
}
