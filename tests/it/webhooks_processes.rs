//! Webhook deliveries across processes: at least once over kill -9 mid-attempt, in order
//! from two instances, and an attempt under way at SIGTERM finished within the drain or
//! its lease given back.

use crate::support::*;
use crate::webhooks::{
    add_webhook, create, deduped, nothing_more_within, repeats_are_the_same_message, row,
};
use std::time::{Duration, Instant};

#[test]
fn kill_9_mid_attempt_sends_the_event_again_and_loses_none() {
    if without(Feature::Webhooks) {
        return;
    }
    let dir = TempDir::new();
    let db = dir.db();
    let launch = || {
        Launch::new(&db)
            .arg("--webhook-timeout 1s --webhook-schedule 1s,1s,1s,1s,1s")
            .start()
    };
    let rx = Receiver::start();
    // Slow enough that the kill lands while an answer is still held back.
    rx.set_default(Answer::ok().after(Duration::from_millis(600)));
    let (id, secret) = add_webhook(&db, "default", &rx.url());
    const N: i64 = 12;
    let s = launch();
    for n in 1..=N {
        create(&s, TOKEN, n);
    }
    rx.wait_for(4, Duration::from_secs(15));
    s.signal(libc::SIGKILL);
    let at_kill = rx.requests();
    drop(s);
    let in_flight = at_kill.last().unwrap().clone();
    assert!(
        in_flight.answered.is_none(),
        "the test needs the kill to land before the answer: {at_kill:?}"
    );
    rx.set_default(Answer::ok());
    // The old lease runs out (1 s timeout + 5 s) before the new process posts.
    let s = launch();
    eventually(Duration::from_secs(30), || {
        rx.seqs().contains(&N) && rx.requests().iter().all(|r| r.answered.is_some())
    });
    let got = rx.requests();
    let seqs: Vec<i64> = got.iter().map(Received::seq).collect();
    assert_eq!(
        deduped(&seqs),
        (1..=N).collect::<Vec<_>>(),
        "each seq at least once, in order: {seqs:?}"
    );
    assert!(
        seqs.iter().filter(|&&q| q == in_flight.seq()).count() >= 2,
        "the attempt the kill cut short is made again: {seqs:?}"
    );
    assert_eq!(
        seqs.len(),
        deduped(&seqs).len() + seqs.iter().filter(|&&q| q == in_flight.seq()).count() - 1,
        "only the event in flight repeats: {seqs:?}"
    );
    repeats_are_the_same_message(&got);
    assert!(got.iter().all(|r| verify(&secret, r)));
    let feed = elements(&s.get("/events").text());
    for r in &got {
        assert_eq!(String::from_utf8_lossy(&r.body), feed[r.seq() as usize - 1]);
    }
    eventually(Duration::from_secs(5), || {
        row(&db, &id).progress == format!("{N}/{N}")
    });
    nothing_more_within(&rx, got.len(), Duration::from_millis(1500));
}

#[test]
fn two_instances_deliver_each_event_in_order_one_attempt_at_a_time() {
    if without(Feature::Webhooks) {
        return;
    }
    if postgres_only("several instances share one database only on PostgreSQL") {
        return;
    }
    let dir = TempDir::new();
    let db = dir.db();
    let rx = Receiver::start();
    // A little time on each answer, so overlapping attempts would show.
    rx.set_default(Answer::ok().after(Duration::from_millis(20)));
    let (id, secret) = add_webhook(&db, "default", &rx.url());
    let (a, b) = (TestServer::start(&db), TestServer::start(&db));
    const EACH: i64 = 25;
    create_through(&[&a, &b], 2, EACH);
    let total = 4 * EACH;
    eventually(Duration::from_secs(60), || {
        rx.seqs().contains(&total) && rx.requests().iter().all(|r| r.answered.is_some())
    });
    let got = rx.requests();
    let seqs: Vec<i64> = got.iter().map(Received::seq).collect();
    assert_eq!(
        deduped(&seqs),
        (1..=total).collect::<Vec<_>>(),
        "each seq at least once, in order: {seqs:?}"
    );
    if seqs.len() as i64 > total {
        eprintln!(
            "{} repeated attempts without a crash",
            seqs.len() as i64 - total
        );
    }
    repeats_are_the_same_message(&got);
    for w in got.windows(2) {
        assert!(
            w[1].at >= w[0].answered.unwrap(),
            "seq {} arrived before seq {} was answered",
            w[1].seq(),
            w[0].seq()
        );
    }
    let feed = elements(&a.get(&format!("/events?limit={total}")).text());
    for r in &got {
        assert!(verify(&secret, r));
        assert_eq!(String::from_utf8_lossy(&r.body), feed[r.seq() as usize - 1]);
    }
    eventually(Duration::from_secs(5), || {
        row(&db, &id).progress == format!("{total}/{total}")
    });
}

/// SIGTERM lets an attempt under way finish within `--drain-timeout` and records its
/// answer before the process exits: the next process does not send it again.
#[test]
fn sigterm_mid_attempt_lets_it_finish_and_records_it_so_it_is_not_sent_again() {
    if without(Feature::Webhooks) {
        return;
    }
    let dir = TempDir::new();
    let db = dir.db();
    let rx = Receiver::start();
    rx.set_default(Answer::ok().after(Duration::from_secs(2)));
    let (id, _) = add_webhook(&db, "default", &rx.url());
    let s = TestServer::start(&db);
    create(&s, TOKEN, 1);
    rx.wait_for(1, Duration::from_secs(10));
    // No HTTP connection is open: only the attempt holds the process.
    let stopped = Instant::now();
    let log = s.stderr.clone();
    assert!(
        s.stop().success(),
        "SIGTERM with an attempt under way exits 0"
    );
    let took = stopped.elapsed();
    eprintln!("SIGTERM to exit: {took:?}");
    let answered = rx.requests()[0].answered;
    assert!(
        answered.is_some_and(|t| t <= Instant::now()),
        "the process waited for the answer (it exited after {took:?})"
    );
    assert!(
        took < Duration::from_secs(10),
        "within --drain-timeout: {took:?}"
    );
    eventually(Duration::from_secs(5), || {
        let log = log.lock().unwrap();
        log.contains("stopping: 1 webhook attempt(s) under way are let finish")
    });
    // Recorded before the exit: no process runs now.
    let r = row(&db, &id);
    assert_eq!((r.progress.as_str(), r.failures.as_str()), ("1/1", "0"));
    rx.set_default(Answer::ok());
    let s = TestServer::start(&db);
    // Expected absence: the restarted process would post it again at once.
    nothing_more_within(&rx, 1, Duration::from_millis(2500));
    create(&s, TOKEN, 2);
    let got = rx.wait_for(2, Duration::from_secs(10));
    assert_eq!(got.iter().map(Received::seq).collect::<Vec<_>>(), [1, 2]);
}

/// An attempt that outlasts `--drain-timeout` is not waited for longer: its lease is given
/// back as the process exits, so the next process posts it again at once rather than when
/// the lease runs out.
#[test]
fn sigterm_gives_back_the_lease_of_an_attempt_that_outlasts_the_drain() {
    if without(Feature::Webhooks) {
        return;
    }
    let dir = TempDir::new();
    let db = dir.db();
    // A lease of 30 s + 5 s: a process that kept it would hold the endpoint that long.
    let launch = || {
        Launch::new(&db)
            .arg("--webhook-timeout 30s --drain-timeout 1")
            .start()
    };
    let rx = Receiver::start();
    rx.set_default(Answer::ok().after(Duration::from_secs(20)));
    add_webhook(&db, "default", &rx.url());
    let s = launch();
    create(&s, TOKEN, 1);
    rx.wait_for(1, Duration::from_secs(10));
    let stopped = Instant::now();
    let log = s.stderr.clone();
    assert!(
        s.stop().success(),
        "SIGTERM with an attempt under way exits 0"
    );
    let took = stopped.elapsed();
    assert!(
        (Duration::from_millis(900)..Duration::from_secs(5)).contains(&took),
        "the drain waited its 1 s for the attempt, no longer: {took:?}"
    );
    eventually(Duration::from_secs(5), || {
        log.lock().unwrap().contains(
            "drain timeout passed with 1 webhook attempt(s) under way: their endpoints are given back",
        )
    });
    rx.set_default(Answer::ok());
    let s = launch();
    let restarted = Instant::now();
    let got = rx.wait_for(2, Duration::from_secs(10));
    assert!(
        restarted.elapsed() < Duration::from_secs(5),
        "the next process takes the endpoint over at once: {:?}",
        restarted.elapsed()
    );
    assert_eq!(got.iter().map(Received::seq).collect::<Vec<_>>(), [1, 1]);
    repeats_are_the_same_message(&got);
    drop(s);
}
