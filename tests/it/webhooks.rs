//! Webhooks: an endpoint gets its principal's events committed after it was added,
//! posted one at a time in seq order, signed (Standard Webhooks v1), retried on the
//! schedule (and a longer `Retry-After`), disabled by a 410 or a used-up schedule,
//! resumed by `webhook enable`; at least once over kill -9 and across two instances;
//! https only with the roots of `--webhook-ca`; and the `webhook` subcommands. The
//! receiving end is `support::Receiver` (`TlsReceiver` over TLS).

use crate::support::*;
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

/// Runs `plant-store webhook ARGS --db DB`: (exit code, stdout, stderr).
pub(crate) fn webhook(db: &Path, args: &[&str]) -> (i32, String, String) {
    let mut all = vec!["webhook"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["--db", db.to_str().unwrap()]);
    run_cli(&all)
}

/// `webhook add PRINCIPAL URL`: the endpoint's id (its first line) and its secret (its
/// last line), checked for their form.
pub(crate) fn add_webhook(db: &Path, principal: &str, url: &str) -> (String, String) {
    let (code, out, err) = webhook(db, &["add", principal, url, "--create"]);
    assert_eq!(code, 0, "webhook add failed: {err}");
    let lines: Vec<&str> = out.lines().collect();
    let (id, secret) = (lines[0], *lines.last().unwrap());
    assert!(
        id.len() == 19 && id.starts_with("wh_") && id[3..].bytes().all(|b| b.is_ascii_hexdigit()),
        "the first line is the id: {out}"
    );
    let key = secret.strip_prefix("whsec_").map(|k| STANDARD.decode(k));
    assert!(
        matches!(key, Some(Ok(ref k)) if k.len() == 24),
        "the last line is the secret: {out}"
    );
    (id.to_owned(), secret.to_owned())
}

/// A row of `webhook list`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Row {
    pub(crate) id: String,
    pub(crate) state: String,
    pub(crate) principal: String,
    /// `delivered/last_seq`.
    pub(crate) progress: String,
    pub(crate) failures: String,
    pub(crate) created: String,
    pub(crate) url: String,
    pub(crate) error: String,
}

/// The rows of `webhook list` (its header checked and left out), and its whole output.
fn list(db: &Path) -> (Vec<Row>, String) {
    let (code, out, err) = webhook(db, &["list"]);
    assert_eq!(code, 0, "webhook list failed: {err}");
    let mut lines = out.lines();
    let header: Vec<&str> = lines
        .next()
        .expect("a header line")
        .split("  ")
        .map(str::trim)
        .filter(|f| !f.is_empty())
        .collect();
    assert_eq!(
        header[..7],
        [
            "id",
            "state",
            "principal",
            "delivered/last",
            "failures",
            "created",
            "url"
        ],
        "{out}"
    );
    let rows = lines
        .map(|line| {
            // Seven columns, each ended by two spaces or more; the last error (which may
            // hold single spaces) is the rest.
            let mut rest = line;
            let mut f = Vec::new();
            for _ in 0..7 {
                let (field, r) = rest
                    .split_once("  ")
                    .unwrap_or_else(|| panic!("a short row: {line:?}"));
                f.push(field.trim().to_owned());
                rest = r.trim_start();
            }
            Row {
                id: f[0].clone(),
                state: f[1].clone(),
                principal: f[2].clone(),
                progress: f[3].clone(),
                failures: f[4].clone(),
                created: f[5].clone(),
                url: f[6].clone(),
                error: rest.trim_end().to_owned(),
            }
        })
        .collect();
    (rows, out)
}

/// The row of endpoint `id`.
#[track_caller]
pub(crate) fn row(db: &Path, id: &str) -> Row {
    let (rows, out) = list(db);
    rows.into_iter()
        .find(|r| r.id == id)
        .unwrap_or_else(|| panic!("no {id} in:\n{out}"))
}

/// `plant_store_webhook_attempts_total{outcome="…"}`.
fn attempts(s: &TestServer, outcome: &str) -> f64 {
    s.metric(&format!(
        "plant_store_webhook_attempts_total{{outcome=\"{outcome}\"}}"
    ))
}

/// How long a test waits for the server to see an endpoint added with the command line:
/// the `webhooks` thread reads the endpoints at least every second, but a read that took T
/// waits 10 T before the next (`SCAN_SHARE`), and a loaded machine (CI, under qemu) makes
/// T long. Waits end as soon as the endpoint is seen.
pub(crate) const ENDPOINT_SEEN: Duration = Duration::from_secs(30);

/// `plant_store_webhook_endpoints{state="…"}`.
pub(crate) fn endpoints(s: &TestServer, state: &str) -> f64 {
    s.metric(&format!(
        "plant_store_webhook_endpoints{{state=\"{state}\"}}"
    ))
}

#[track_caller]
pub(crate) fn create(s: &TestServer, token: &str, id: i64) {
    let r = s.post_as(token, &format!(r#"{{"id":{id},"name":"p{id}"}}"#));
    assert_eq!(r.status, 200, "{}", r.text());
}

fn unix_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

/// The seqs with consecutive repeats removed.
fn deduped(seqs: &[i64]) -> Vec<i64> {
    let mut out = seqs.to_vec();
    out.dedup();
    out
}

/// Every request of one seq carries the same `webhook-id` and body as its first.
#[track_caller]
fn repeats_are_the_same_message(got: &[Received]) {
    for r in got {
        let first = got.iter().find(|f| f.seq() == r.seq()).unwrap();
        assert_eq!(r.header("webhook-id"), first.header("webhook-id"));
        assert_eq!(r.text(), first.text(), "a repeat is the same body");
    }
}

/// Expected absence: that nothing more arrives is only seen by waiting for it.
fn nothing_more_within(rx: &Receiver, n: usize, wait: Duration) {
    std::thread::sleep(wait);
    assert_eq!(rx.seqs().len(), n, "nothing more arrives: {:?}", rx.seqs());
}

#[test]
fn deliveries_are_the_feed_s_new_events_of_the_principal_signed_in_seq_order() {
    if without(Feature::Webhooks) {
        return;
    }
    let dir = TempDir::new();
    let db = dir.db();
    let alice = add_token(&db, "alice", false);
    let bob = add_token(&db, "bob", false);
    let s = TestServer::start(&db);
    let rx = Receiver::start();
    // Committed before the endpoint was added: never sent.
    create(&s, &alice, 100);
    let (_, secret) = add_webhook(&db, "alice", &rx.url());
    let t0 = unix_now();
    for id in 1..=3 {
        create(&s, &alice, id);
    }
    // Another principal's event: never sent to alice's endpoint.
    create(&s, &bob, 1);
    let r = s.send(
        "DELETE",
        "/plants/2",
        &[("Authorization", &bearer(&alice))],
        None,
    );
    assert_eq!(r.status, 204);
    let got = rx.wait_for(4, Duration::from_secs(10));
    let t1 = unix_now();
    let feed = elements(&events_as(&s, &alice, "?after=1").text());
    assert_eq!(feed.len(), 4);
    assert_eq!(
        got.iter().map(Received::seq).collect::<Vec<_>>(),
        [2, 3, 4, 5]
    );
    for (r, event) in got.iter().zip(&feed) {
        assert_eq!((r.method.as_str(), r.path.as_str()), ("POST", "/hook"));
        assert_eq!(
            String::from_utf8_lossy(&r.body),
            *event,
            "the body is the feed's element, byte for byte"
        );
        assert_eq!(r.header("content-type"), Some("application/json"));
        assert_eq!(r.header("webhook-id"), r.json()["id"].as_str());
        assert!(r.header("webhook-id").unwrap().starts_with("evt_"));
        let ts: i64 = r.header("webhook-timestamp").unwrap().parse().unwrap();
        assert!(
            (t0 - 1..=t1 + 1).contains(&ts),
            "timestamp {ts} is the time of the attempt ({t0}..{t1})"
        );
        assert!(r.header("webhook-signature").unwrap().starts_with("v1,"));
        assert!(verify(&secret, r), "the signature verifies: {r:?}");
    }
    let kinds: Vec<_> = got.iter().map(|r| r.json()["type"].clone()).collect();
    assert_eq!(
        kinds,
        [
            "plant.created",
            "plant.created",
            "plant.created",
            "plant.deleted"
        ]
    );
    // The verifier itself refuses another secret and a changed body.
    let (_, other) = add_webhook(&db, "carol", "http://127.0.0.1:9/x");
    assert!(!verify(&other, &got[0]));
    let mut changed = got[0].clone();
    changed.body.push(b' ');
    assert!(!verify(&secret, &changed));
    eventually(Duration::from_secs(5), || attempts(&s, "delivered") == 4.0);
    assert_eq!(attempts(&s, "failed"), 0.0);
    // Expected absence: neither the earlier event nor bob's comes later.
    nothing_more_within(&rx, 4, Duration::from_millis(1500));
}

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

#[test]
fn the_webhook_subcommands_list_without_secrets_remove_and_refuse_what_is_wrong() {
    if without(Feature::Webhooks) {
        return;
    }
    let dir = TempDir::new();
    let db = dir.db();
    let rx = Receiver::start();
    let (id, secret) = add_webhook(&db, "default", &rx.url());
    // https only where the build has TLS (a build without it refuses such a URL).
    let url = if without(Feature::Tls) {
        "http://example.com/in?x=1"
    } else {
        "https://example.com/in?x=1"
    };
    let (other, other_secret) = add_webhook(&db, "bob", url);
    assert_ne!(secret, other_secret);
    let (rows, out) = list(&db);
    for s in [&secret, &other_secret] {
        assert!(
            !out.contains(s.as_str()) && !out.contains(&s["whsec_".len()..]),
            "list never shows a secret:\n{out}"
        );
    }
    let mut rows = rows;
    rows.sort_by(|a, b| a.principal.cmp(&b.principal));
    assert_eq!(rows.len(), 2, "{out}");
    for (r, (id, principal, url)) in rows
        .iter()
        .zip([(&other, "bob", url), (&id, "default", rx.url().as_str())])
    {
        assert_eq!(
            (
                r.id.as_str(),
                r.state.as_str(),
                r.principal.as_str(),
                r.progress.as_str(),
                r.failures.as_str(),
                r.url.as_str(),
                r.error.as_str()
            ),
            (id.as_str(), "active", principal, "0/0", "0", url, "-"),
            "{out}"
        );
        assert!(
            r.created.len() == 20 && r.created.ends_with('Z') && r.created.as_bytes()[10] == b'T',
            "{out}"
        );
    }
    let s = TestServer::start(&db);
    create(&s, TOKEN, 1);
    rx.wait_for(1, Duration::from_secs(10));
    let (code, out, err) = webhook(&db, &["remove", &id]);
    assert_eq!(
        (code, out.trim()),
        (0, format!("webhook {id} removed").as_str()),
        "{err}"
    );
    create(&s, TOKEN, 2);
    // Expected absence: no attempt starts after the removal.
    nothing_more_within(&rx, 1, Duration::from_millis(1500));
    assert_eq!(list(&db).0.len(), 1);
    // Unknown ids: exit status 2, as other input errors.
    for args in [
        ["remove", id.as_str()],
        ["enable", id.as_str()],
        ["remove", "wh_0000000000000000"],
        ["enable", "nope"],
    ] {
        let (code, _, err) = webhook(&db, &args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(err.contains("no webhook has the identifier"), "{err}");
    }
    // Bad URLs: exit status 2, nothing stored.
    for url in [
        "ftp://example.com/x",
        "not a url",
        "example.com/x",
        "http://",
    ] {
        let (code, out, err) = webhook(&db, &["add", "default", url]);
        assert_eq!((code, out.as_str()), (2, ""), "{url}: {err}");
        assert!(err.contains("invalid URL"), "{url}: {err}");
    }
    assert_eq!(list(&db).0.len(), 1);
}

/// A TLS receiver with the test CA's certificate for 127.0.0.1.
fn tls_receiver(pki: &Pki) -> TlsReceiver {
    TlsReceiver::start(&pki.file("server.crt"), &pki.file("server.key"))
}

/// `serve --webhook-ca CA` (when given) and `--webhook-schedule 1h` on a database of its
/// own, with an endpoint for `default` at a TLS receiver of the test CA's certificate,
/// and one event to deliver.
fn https_case(pki: &Pki, ca: Option<&str>) -> (TempDir, TestServer, TlsReceiver, String, String) {
    let dir = TempDir::new();
    let db = dir.db();
    let mut launch = Launch::new(&db).arg("--webhook-schedule 1h");
    if let Some(ca) = ca {
        launch = launch.arg(&format!("--webhook-ca {}", pki.file(ca).display()));
    }
    let s = launch.start();
    let tls = tls_receiver(pki);
    let url = format!("https://127.0.0.1:{}/hook", tls.port);
    let (id, secret) = add_webhook(&db, "default", &url);
    create(&s, TOKEN, 1);
    (dir, s, tls, id, secret)
}

#[test]
fn an_https_endpoint_with_a_certificate_of_the_webhook_ca_gets_its_events() {
    if without(Feature::Tls) {
        return;
    }
    let pki = Pki::new("IP:127.0.0.1");
    let (dir, s, mut tls, id, secret) = https_case(&pki, Some("ca.crt"));
    let r = tls.request(Duration::from_secs(15));
    assert_eq!((r.method.as_str(), r.path.as_str()), ("POST", "/hook"));
    assert_eq!(r.header("content-type"), Some("application/json"));
    assert_eq!(
        String::from_utf8_lossy(&r.body),
        elements(&s.get("/events").text())[0]
    );
    assert!(verify(&secret, &r), "{r:?}");
    eventually(Duration::from_secs(10), || {
        row(&dir.db(), &id).progress == "1/1"
    });
    assert_eq!(attempts(&s, "delivered"), 1.0);
}

/// With another CA as `--webhook-ca`, or with the built-in roots, the test CA's
/// certificate is not trusted: the attempt fails, and `webhook list` says it was TLS
/// (docs/operating.md: "what failed: … `TLS: …`").
#[test]
fn an_https_endpoint_with_a_certificate_of_another_ca_fails_with_a_tls_error() {
    if without(Feature::Tls) {
        return;
    }
    let pki = Pki::new("IP:127.0.0.1");
    let mut errors = Vec::new();
    for ca in [Some("other-ca.crt"), None] {
        let (dir, s, tls, id, _) = https_case(&pki, ca);
        eventually(Duration::from_secs(10), || {
            row(&dir.db(), &id).failures == "1"
        });
        let r = row(&dir.db(), &id);
        assert_eq!((r.state.as_str(), r.progress.as_str()), ("active", "0/1"));
        assert_eq!(attempts(&s, "failed"), 1.0);
        assert_eq!(attempts(&s, "delivered"), 0.0);
        drop(tls);
        eprintln!("roots {ca:?}: last error {:?}", r.error);
        errors.push((ca, r.error));
    }
    for (ca, error) in errors {
        assert!(
            error.starts_with("TLS: "),
            "roots {ca:?}: the last error names TLS, not {error:?}"
        );
    }
}

#[test]
fn a_webhook_ca_file_without_a_certificate_stops_serve_from_starting() {
    if without(Feature::Tls) {
        return;
    }
    let dir = TempDir::new();
    let empty = dir.0.join("empty.pem");
    std::fs::write(&empty, "no certificate here\n").unwrap();
    let db = dir.db();
    let mut child = plant_store()
        .args(["serve", "--addr", "127.0.0.1:0", "--db"])
        .arg(&db)
        .arg("--webhook-ca")
        .arg(&empty)
        .env("PLANT_STORE_TOKEN", TOKEN)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("serve with a CA file without a certificate still runs");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let out = child.wait_with_output().unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(!status.success(), "{stdout}{stderr}");
    assert!(!stdout.contains("listening on"), "{stdout}");
    assert!(stderr.contains("--webhook-ca"), "{stderr}");
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

#[test]
fn the_retention_keeps_what_an_active_endpoint_still_has_to_get_and_enable_skips_what_it_removed_while_disabled()
 {
    if without(Feature::Webhooks) {
        return;
    }
    let dir = TempDir::new();
    let db = dir.db();
    let s = Launch::new(&db)
        .arg("--event-retention 1s --webhook-schedule 1h")
        .start();
    let alice = add_token(&db, "alice", false);
    // `default`'s endpoint stays active, failing: its events wait an hour for a retry.
    let held = Receiver::start();
    held.set_default(Answer::status(500));
    let (held_id, _) = add_webhook(&db, "default", &held.url());
    // alice's is disabled by a 410 at her first event.
    let gone = Receiver::start();
    gone.push(Answer::status(410));
    let (gone_id, _) = add_webhook(&db, "alice", &gone.url());
    eventually(Duration::from_secs(5), || endpoints(&s, "active") == 2.0);
    create(&s, TOKEN, 1);
    create(&s, TOKEN, 2);
    for n in 1..=3 {
        create(&s, &alice, n);
    }
    eventually(Duration::from_secs(5), || {
        held.count() == 1 && gone.count() == 1 && endpoints(&s, "disabled") == 1.0
    });
    // The sweep removes alice's events (her endpoint is disabled) ...
    eventually(Duration::from_secs(15), || {
        events_as(&s, &alice, "?after=0").status == 410
    });
    // ... and not default's, older than hers, that its active endpoint has still to get.
    let r = events_as(&s, TOKEN, "?after=0");
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json().as_array().unwrap().len(), 2);
    // Enabled, alice's endpoint says what it missed and resumes after it.
    let (code, out, err) = webhook(&db, &["enable", &gone_id]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        out.trim(),
        format!(
            "webhook {gone_id} enabled; events 1 to 3 were removed by the retention while it was disabled and are skipped: it resumes after seq 3"
        )
    );
    create(&s, &alice, 4);
    let got = gone.wait_for(2, Duration::from_secs(10));
    assert_eq!(got.iter().map(Received::seq).collect::<Vec<_>>(), [1, 4]);
    // default's endpoint, enabled (a fresh schedule), gets the events that were kept.
    held.set_default(Answer::ok());
    let (code, out, err) = webhook(&db, &["enable", &held_id]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        out.trim(),
        format!("webhook {held_id} enabled; it resumes after seq 0")
    );
    let got = held.wait_for(3, Duration::from_secs(10));
    assert_eq!(got.iter().map(Received::seq).collect::<Vec<_>>(), [1, 1, 2]);
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
    let restarted = Instant::now();
    rx.wait_for(before + 1, Duration::from_secs(10));
    assert!(
        restarted.elapsed() < Duration::from_secs(5),
        "the lease was given back: {:?}",
        restarted.elapsed()
    );
    drop(s);
}
