//! Webhooks: an endpoint gets its principal's events committed after it was added,
//! posted one at a time in seq order, signed (Standard Webhooks v1); the retention keeps
//! what an endpoint still has to get; the `webhook` subcommands; and the helpers the
//! `webhooks_*` modules share. Failed attempts and retries are in `webhooks_retries`,
//! endpoints in turn in `webhooks_fairness`, kill -9, SIGTERM and two instances in
//! `webhooks_processes`, https in `webhooks_tls`. The receiving end is
//! `support::Receiver` (`TlsReceiver` over TLS).

use crate::support::*;
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use std::path::Path;
use std::time::Duration;

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
pub(crate) fn attempts(s: &TestServer, outcome: &str) -> f64 {
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
pub(crate) fn deduped(seqs: &[i64]) -> Vec<i64> {
    let mut out = seqs.to_vec();
    out.dedup();
    out
}

/// Every request of one seq carries the same `webhook-id` and body as its first.
#[track_caller]
pub(crate) fn repeats_are_the_same_message(got: &[Received]) {
    for r in got {
        let first = got.iter().find(|f| f.seq() == r.seq()).unwrap();
        assert_eq!(r.header("webhook-id"), first.header("webhook-id"));
        assert_eq!(r.text(), first.text(), "a repeat is the same body");
    }
}

/// Expected absence: that nothing more arrives is only seen by waiting for it.
pub(crate) fn nothing_more_within(rx: &Receiver, n: usize, wait: Duration) {
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
