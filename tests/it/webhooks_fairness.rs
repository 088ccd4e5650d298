//! Webhook endpoints in turn: a receiver slower than the timeout holds up neither other
//! endpoints nor the API, and many endpoints on few threads each get every event once, in
//! order.

use crate::support::*;
use crate::webhooks::{add_webhook, attempts, create, endpoints, nothing_more_within, row};
use std::time::{Duration, Instant};

#[test]
fn a_receiver_slower_than_the_timeout_holds_up_neither_other_endpoints_nor_the_api() {
    if without(Feature::Webhooks) {
        return;
    }
    let dir = TempDir::new();
    let db = dir.db();
    let alice = add_token(&db, "alice", false);
    let bob = add_token(&db, "bob", false);
    let s = Launch::new(&db)
        .arg("--webhook-timeout 1s --webhook-schedule 1s,1s,1s,1s,1s,1s,1s,1s,1s,1s")
        .start();
    let (slow, fast) = (Receiver::start(), Receiver::start());
    slow.set_default(Answer::ok().after(Duration::from_secs(5)));
    let (slow_id, _) = add_webhook(&db, "alice", &slow.url());
    let (fast_id, _) = add_webhook(&db, "bob", &fast.url());
    for id in 1..=3 {
        create(&s, &alice, id);
    }
    // A delivery thread now waits on the slow receiver.
    slow.wait_for(1, Duration::from_secs(10));
    for n in 1..=5 {
        let t = Instant::now();
        create(&s, &bob, n);
        let got = fast.wait_for(n as usize, Duration::from_secs(5));
        let late = got[n as usize - 1].at - t;
        assert!(
            late < Duration::from_secs(1),
            "bob's event {n} arrived {late:?} after its commit"
        );
    }
    assert_eq!(fast.seqs(), [1, 2, 3, 4, 5]);
    for n in 4..54 {
        let t = Instant::now();
        create(&s, &alice, n);
        assert!(
            t.elapsed() < Duration::from_millis(500),
            "create {n} took {:?}",
            t.elapsed()
        );
    }
    // The attempt gave up after 1 s (not the 5 s the answer takes), then waited 1 s.
    let got = slow.wait_for(2, Duration::from_secs(10));
    let gap = got[1].at - got[0].at;
    assert!(
        gap >= Duration::from_millis(1900) && gap < Duration::from_secs(4),
        "{gap:?}"
    );
    assert_eq!(
        got.iter().map(Received::seq).collect::<Vec<_>>()[..2],
        [1, 1]
    );
    let r = row(&db, &slow_id);
    assert_eq!(
        (r.state.as_str(), r.progress.as_str(), r.error.as_str()),
        ("active", "0/53", "no answer within --webhook-timeout")
    );
    assert_eq!(row(&db, &fast_id).progress, "5/5");
    eventually(Duration::from_secs(5), || {
        s.metric("plant_store_webhook_pending_events") == 53.0
            && s.metric("plant_store_webhook_oldest_pending_seconds") > 0.0
    });
    assert!(attempts(&s, "failed") >= 1.0);
    assert_eq!(attempts(&s, "delivered"), 5.0);
}

#[test]
fn many_endpoints_on_few_threads_each_get_every_event_once_in_order_and_in_turn() {
    if without(Feature::Webhooks) {
        return;
    }
    let dir = TempDir::new();
    let db = dir.db();
    let s = Launch::new(&db).arg("--webhook-threads 2").start();
    let receivers: Vec<Receiver> = (0..6).map(|_| Receiver::start()).collect();
    for rx in &receivers {
        add_webhook(&db, "default", &rx.url());
    }
    eventually(Duration::from_secs(5), || endpoints(&s, "active") == 6.0);
    const N: i64 = 400;
    for n in 1..=N {
        create(&s, TOKEN, n);
    }
    let got: Vec<Vec<Received>> = receivers
        .iter()
        .map(|rx| rx.wait_for(N as usize, Duration::from_secs(60)))
        .collect();
    for (i, g) in got.iter().enumerate() {
        // No restart here: not even one repeat.
        assert_eq!(
            g.iter().map(Received::seq).collect::<Vec<_>>(),
            (1..=N).collect::<Vec<_>>(),
            "endpoint {i} gets every event once, in order"
        );
    }
    // In turn: two threads take the six endpoints a turn of about a second each, so none
    // waits for the others to finish their backlog (they each take a few seconds).
    let firsts: Vec<Instant> = got.iter().map(|g| g[0].at).collect();
    let lasts: Vec<Instant> = got.iter().map(|g| g[g.len() - 1].at).collect();
    let (earliest, latest) = (*firsts.iter().min().unwrap(), *firsts.iter().max().unwrap());
    assert!(
        latest - earliest < Duration::from_secs(4),
        "every endpoint starts within a few turns: {:?}",
        firsts.iter().map(|f| *f - earliest).collect::<Vec<_>>()
    );
    assert!(
        *lasts.iter().min().unwrap() > latest,
        "no endpoint gets its whole backlog before the last one starts"
    );
    nothing_more_within(&receivers[0], N as usize, Duration::from_millis(1000));
}
