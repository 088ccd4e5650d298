//! Webhook attempts that fail: the schedule's retries and a longer `Retry-After`, a 410
//! or a used-up schedule disabling the endpoint and `webhook enable` resuming it, a
//! redirect, a refused connection, an answer cut short or late, and a delivery that panics.

use crate::support::*;
use crate::webhooks::{
    ENDPOINT_SEEN, add_webhook, attempts, create, endpoints, nothing_more_within,
    repeats_are_the_same_message, row, webhook,
};
use std::time::Duration;

#[test]
fn a_failed_attempt_is_made_again_after_the_schedule_s_delay_then_the_next_events_follow() {
    if without(Feature::Webhooks) {
        return;
    }
    let dir = TempDir::new();
    let db = dir.db();
    let s = Launch::new(&db).arg("--webhook-schedule 1s,1s,1s").start();
    let rx = Receiver::start();
    rx.push(Answer::status(500));
    rx.push(Answer::status(500));
    let (id, secret) = add_webhook(&db, "default", &rx.url());
    for n in 1..=3 {
        create(&s, TOKEN, n);
    }
    let got = rx.wait_for(5, Duration::from_secs(20));
    assert_eq!(
        got.iter().map(Received::seq).collect::<Vec<_>>(),
        [1, 1, 1, 2, 3]
    );
    assert_eq!(
        got.iter().map(|r| r.status).collect::<Vec<_>>(),
        [500, 500, 200, 200, 200]
    );
    repeats_are_the_same_message(&got);
    for r in &got {
        assert!(verify(&secret, r), "every attempt is signed: {r:?}");
    }
    // The server's clock counts whole milliseconds: 1 ms is the only slack.
    for w in got[..3].windows(2) {
        let gap = w[1].at - w[0].at;
        assert!(
            gap >= Duration::from_millis(999),
            "a retry waits the 1 s delay: {gap:?}"
        );
    }
    eventually(Duration::from_secs(5), || {
        attempts(&s, "failed") == 2.0 && attempts(&s, "delivered") == 3.0
    });
    eventually(Duration::from_secs(5), || row(&db, &id).progress == "3/3");
    let r = row(&db, &id);
    assert_eq!((r.state.as_str(), r.failures.as_str()), ("active", "0"));
    nothing_more_within(&rx, 5, Duration::from_millis(1500));
}

#[test]
fn a_410_disables_the_endpoint_and_enable_resumes_from_the_event_answered_410() {
    if without(Feature::Webhooks) {
        return;
    }
    let dir = TempDir::new();
    let db = dir.db();
    let s = Launch::new(&db).arg("--webhook-schedule 1s").start();
    let rx = Receiver::start();
    rx.push(Answer::status(410));
    let (id, secret) = add_webhook(&db, "default", &rx.url());
    create(&s, TOKEN, 1);
    let first = rx.wait_for(1, Duration::from_secs(10))[0].clone();
    eventually(Duration::from_secs(5), || row(&db, &id).state == "disabled");
    let r = row(&db, &id);
    assert_eq!(r.progress, "0/1");
    assert!(r.error.contains("410"), "{r:?}");
    eventually(Duration::from_secs(5), || {
        attempts(&s, "gone") == 1.0
            && endpoints(&s, "disabled") == 1.0
            && endpoints(&s, "active") == 0.0
    });
    assert_eq!(attempts(&s, "failed"), 0.0);
    assert_eq!(
        s.metric("plant_store_webhook_pending_events"),
        0.0,
        "a disabled endpoint has nothing pending"
    );
    // Committed while it is disabled.
    create(&s, TOKEN, 2);
    create(&s, TOKEN, 3);
    // Expected absence: with a 1 s schedule, a retry (or the later events) would be here
    // by now.
    nothing_more_within(&rx, 1, Duration::from_millis(2500));
    let (code, out, err) = webhook(&db, &["enable", &id]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        out.trim(),
        format!("webhook {id} enabled; it resumes after seq 0")
    );
    let got = rx.wait_for(4, Duration::from_secs(10));
    assert_eq!(
        got.iter().map(Received::seq).collect::<Vec<_>>(),
        [1, 1, 2, 3]
    );
    assert_eq!(got[1].header("webhook-id"), first.header("webhook-id"));
    assert_eq!(got[1].body, first.body);
    assert!(got.iter().all(|r| verify(&secret, r)));
    eventually(Duration::from_secs(5), || row(&db, &id).progress == "3/3");
    assert_eq!(row(&db, &id).state, "active");
    nothing_more_within(&rx, 4, Duration::from_millis(1500));
}

#[test]
fn a_used_up_schedule_disables_the_endpoint_with_its_last_error_and_enable_resumes() {
    if without(Feature::Webhooks) {
        return;
    }
    let dir = TempDir::new();
    let db = dir.db();
    let s = Launch::new(&db).arg("--webhook-schedule 1s").start();
    let rx = Receiver::start();
    rx.set_default(Answer::status(500));
    let (id, _) = add_webhook(&db, "default", &rx.url());
    create(&s, TOKEN, 1);
    let got = rx.wait_for(2, Duration::from_secs(10));
    assert!(got[1].at - got[0].at >= Duration::from_millis(999));
    eventually(Duration::from_secs(5), || row(&db, &id).state == "disabled");
    let r = row(&db, &id);
    assert_eq!(
        (r.progress.as_str(), r.failures.as_str(), r.error.as_str()),
        ("0/1", "2", "HTTP 500; the schedule is used up: disabled")
    );
    // Expected absence: one delay, two attempts, no third.
    nothing_more_within(&rx, 2, Duration::from_millis(2500));
    assert_eq!(attempts(&s, "failed"), 2.0);
    eventually(Duration::from_secs(5), || endpoints(&s, "disabled") == 1.0);
    rx.set_default(Answer::ok());
    create(&s, TOKEN, 2);
    let (code, _, err) = webhook(&db, &["enable", &id]);
    assert_eq!(code, 0, "{err}");
    let got = rx.wait_for(4, Duration::from_secs(10));
    assert_eq!(
        got.iter().map(Received::seq).collect::<Vec<_>>(),
        [1, 1, 1, 2]
    );
    assert_eq!(
        got.iter().map(|r| r.status).collect::<Vec<_>>(),
        [500, 500, 200, 200]
    );
    repeats_are_the_same_message(&got);
    eventually(Duration::from_secs(5), || row(&db, &id).progress == "2/2");
    let r = row(&db, &id);
    assert_eq!((r.state.as_str(), r.failures.as_str()), ("active", "0"));
    eventually(ENDPOINT_SEEN, || endpoints(&s, "active") == 1.0);
}

#[test]
fn a_redirect_is_not_followed_and_counts_as_a_failed_attempt() {
    if without(Feature::Webhooks) {
        return;
    }
    let dir = TempDir::new();
    let db = dir.db();
    let s = Launch::new(&db).arg("--webhook-schedule 1s").start();
    let (rx, elsewhere) = (Receiver::start(), Receiver::start());
    rx.push(Answer::status(302).header("location", &elsewhere.url()));
    let (id, _) = add_webhook(&db, "default", &rx.url());
    create(&s, TOKEN, 1);
    let got = rx.wait_for(2, Duration::from_secs(10));
    assert_eq!(got.iter().map(Received::seq).collect::<Vec<_>>(), [1, 1]);
    assert_eq!(got.iter().map(|r| r.status).collect::<Vec<_>>(), [302, 200]);
    repeats_are_the_same_message(&got);
    eventually(Duration::from_secs(5), || {
        attempts(&s, "failed") == 1.0 && attempts(&s, "delivered") == 1.0
    });
    eventually(Duration::from_secs(5), || row(&db, &id).progress == "1/1");
    // Expected absence: the redirect's target never hears of it.
    nothing_more_within(&elsewhere, 0, Duration::from_millis(1500));
    assert_eq!(rx.count(), 2);
}

#[test]
fn a_longer_retry_after_replaces_the_delay_and_a_shorter_one_does_not() {
    if without(Feature::Webhooks) {
        return;
    }
    let dir = TempDir::new();
    let db = dir.db();
    let s = Launch::new(&db).arg("--webhook-schedule 1s").start();
    let rx = Receiver::start();
    rx.push(Answer::status(503).header("Retry-After", "3"));
    rx.push(Answer::ok());
    rx.push(Answer::status(503).header("Retry-After", "0"));
    let (_, _) = add_webhook(&db, "default", &rx.url());
    create(&s, TOKEN, 1);
    create(&s, TOKEN, 2);
    let got = rx.wait_for(4, Duration::from_secs(20));
    assert_eq!(
        got.iter().map(Received::seq).collect::<Vec<_>>(),
        [1, 1, 2, 2]
    );
    // The server's clock counts whole milliseconds: 1 ms is the only slack below.
    let gap = got[1].at - got[0].at;
    assert!(
        gap >= Duration::from_millis(2999) && gap < Duration::from_secs(5),
        "Retry-After: 3 over a 1 s delay: {gap:?}"
    );
    let gap = got[3].at - got[2].at;
    assert!(
        gap >= Duration::from_millis(999) && gap < Duration::from_secs(3),
        "Retry-After: 0 under a 1 s delay: {gap:?}"
    );
    repeats_are_the_same_message(&got);
}

#[test]
fn a_refused_connection_fails_the_attempt_and_says_so() {
    if without(Feature::Webhooks) {
        return;
    }
    let dir = TempDir::new();
    let db = dir.db();
    let s = Launch::new(&db).arg("--webhook-schedule 1h").start();
    // A port nothing listens on any more.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let (id, _) = add_webhook(&db, "default", &format!("http://127.0.0.1:{port}/hook"));
    create(&s, TOKEN, 1);
    eventually(Duration::from_secs(10), || row(&db, &id).failures == "1");
    let r = row(&db, &id);
    assert_eq!(
        (r.state.as_str(), r.progress.as_str(), r.error.as_str()),
        ("active", "0/1", "connection error: connection refused")
    );
    assert_eq!(attempts(&s, "failed"), 1.0);
}

/// The answer is part of the attempt: a 2xx whose body is cut short, or does not arrive
/// within `--webhook-timeout`, fails it; a body longer than the 64 KiB read is not waited
/// for, and delivers.
#[test]
fn a_2xx_whose_body_is_cut_short_or_late_fails_the_attempt() {
    if without(Feature::Webhooks) {
        return;
    }
    let dir = TempDir::new();
    let db = dir.db();
    let alice = add_token(&db, "alice", false);
    let bob = add_token(&db, "bob", false);
    let s = Launch::new(&db)
        .arg("--webhook-schedule 1h --webhook-timeout 2s")
        .start();
    let (cut, late, long) = (Receiver::start(), Receiver::start(), Receiver::start());
    cut.set_default(Answer::ok().body(AnswerBody::Cut));
    late.set_default(Answer::ok().body(AnswerBody::Stalled(Duration::from_secs(5))));
    long.set_default(Answer::ok().body(AnswerBody::Whole(200 * 1024)));
    let (cut_id, _) = add_webhook(&db, "default", &cut.url());
    let (late_id, _) = add_webhook(&db, "alice", &late.url());
    let (long_id, _) = add_webhook(&db, "bob", &long.url());
    create(&s, TOKEN, 1);
    create(&s, &alice, 1);
    create(&s, &bob, 1);
    eventually(Duration::from_secs(15), || {
        let (c, l) = (row(&db, &cut_id), row(&db, &late_id));
        c.failures == "1" && l.failures == "1" && row(&db, &long_id).progress == "1/1"
    });
    for (id, error) in [
        (
            &cut_id,
            "HTTP 200, but its body was cut short (connection error: unexpected end of file)",
        ),
        (
            &late_id,
            "HTTP 200, but its body did not arrive within --webhook-timeout",
        ),
    ] {
        let r = row(&db, id);
        assert_eq!(
            (r.state.as_str(), r.progress.as_str(), r.error.as_str()),
            ("active", "0/1", error)
        );
    }
    assert_eq!(attempts(&s, "failed"), 2.0);
    assert_eq!(attempts(&s, "delivered"), 1.0);
}

/// A delivery thread that panics (the fault-injection build panics after an attempt at a
/// URL ending in `/__panic`) gives the endpoint's lease back and leaves it alone for
/// `PANIC_BACKOFF` (5 s): one attempt per 5 s at most, never a tight loop of claims.
#[cfg(feature = "fault-injection")]
#[test]
fn a_delivery_that_panics_gives_its_lease_back_and_waits_before_the_next_attempt() {
    if without(Feature::Webhooks) {
        return;
    }
    const PANIC_BACKOFF: Duration = Duration::from_secs(5);
    let dir = TempDir::new();
    let db = dir.db();
    // A lease of 30 s + 5 s: kept, it would hold the endpoint from the next process.
    let launch = || Launch::new(&db).arg("--webhook-timeout 30s").start();
    let rx = Receiver::start();
    add_webhook(&db, "default", &rx.url_at("/hook/__panic"));
    let s = launch();
    create(&s, TOKEN, 1);
    let got = rx.wait_for(2, Duration::from_secs(20));
    let gap = got[1].at - got[0].at;
    assert!(
        gap >= PANIC_BACKOFF,
        "the next attempt waits the backoff: {gap:?}"
    );
    // Each attempt comes at least the backoff after the one before: at most this many.
    std::thread::sleep(Duration::from_millis(1500));
    let window = got[0].at.elapsed();
    let most = 1 + window.as_millis() / PANIC_BACKOFF.as_millis();
    assert!(
        rx.count() as u128 <= most,
        "{} attempts in {window:?}",
        rx.count()
    );
    let log = s.log();
    assert!(
        log.contains("fault injection: a delivery panicked"),
        "{log}"
    );
    assert!(
        log.contains(
            "a delivery thread panicked; its lease is given back and it is tried again in 5 s"
        ),
        "{log}"
    );
    assert!(s.stop().success());
    // The lease was given back at the panic: the next process posts at once.
    let before = rx.count();
    let s = launch();
    let restarted = std::time::Instant::now();
    rx.wait_for(before + 1, Duration::from_secs(10));
    assert!(
        restarted.elapsed() < Duration::from_secs(5),
        "the lease was given back: {:?}",
        restarted.elapsed()
    );
    drop(s);
}
