//! SQLite only, with the `fault-injection` feature: faults of the disk under the store
//! (`GET /__fault/NAME`). A commit whose sync fails is answered by what happened, a full
//! disk keeps `/healthz` at 503 until a write works, a health check during an outage
//! costs one probe at a time and one log line per interval, a panic inside a read leaves
//! no transaction open, and the WAL is cut back to its limit.
#![cfg(feature = "fault-injection")]

use crate::support::*;
use std::time::{Duration, Instant};

const UNKNOWN: &str =
    "the database did not say whether this write took effect; read before retrying";
/// `WAL_SIZE_LIMIT` of `src/store/sqlite/mod.rs`.
const WAL_SIZE_LIMIT: u64 = 8 * 1024 * 1024;

fn arm(s: &TestServer, fault: &str) {
    let r = s.send("GET", &format!("/__fault/{fault}"), &[], None);
    assert_eq!(r.status, 200, "{}", r.text());
}

/// The events of the test token's principal: (seq, type, plant id).
fn events(s: &TestServer) -> Vec<(i64, String, i64)> {
    let r = s.get("/events");
    assert_eq!(r.status, 200, "{}", r.text());
    r.json()
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["seq"].as_i64().unwrap(),
                e["type"].as_str().unwrap().to_owned(),
                e["data"]["id"].as_i64().unwrap(),
            )
        })
        .collect()
}

fn wal_size(dir: &TempDir) -> u64 {
    let mut wal = dir.db().into_os_string();
    wal.push("-wal");
    std::fs::metadata(wal).map_or(0, |m| m.len())
}

/// The sync of the log fails after the data reached it (the COMMIT succeeded): the
/// server finds the group committed and answers by its outcomes, not 500; the log says
/// so and never "refused"; a `kill -9` and a restart show what was answered, each event
/// once.
#[test]
fn a_commit_whose_sync_fails_after_it_took_effect_is_answered_by_its_outcome() {
    if sqlite_only("the fault is in the SQLite writer; PostgreSQL's lost commit: lost_commit") {
        return;
    }
    let dir = TempDir::new();
    let s = TestServer::start(&dir.db());
    arm(&s, "sync-fails-after");
    let r = s.post(r#"{"id":1,"name":"a"}"#);
    assert_eq!(r.status, 200, "{}", r.text());
    arm(&s, "sync-fails-after");
    assert_eq!(s.post(r#"{"id":2,"name":"b"}"#).status, 200);
    arm(&s, "sync-fails-after");
    assert_eq!(s.delete("2").status, 204);
    let log = s.log_when(|l| l.matches("but the group had committed").count() == 3);
    assert!(!log.contains("refused"), "{log}");
    let answered = (s.list(), events(&s));
    assert_eq!(names(&answered.0), ["a"]);
    assert_eq!(
        answered.1,
        [
            (1, "plant.created".into(), 1),
            (2, "plant.created".into(), 2),
            (3, "plant.deleted".into(), 2)
        ]
    );
    assert_eq!(s.get("/healthz").status, 200);
    drop(s); // kill -9
    let s = TestServer::start(&dir.db());
    assert_eq!((s.list(), events(&s)), answered);
}

/// The sync fails and the group's frames do not count: once a later commit (the probe
/// the writer makes) is durable, the group can never come back, so it is refused (500)
/// and a restart does not show it.
#[test]
fn a_commit_whose_sync_fails_before_it_took_effect_is_refused_once_that_is_sure() {
    if sqlite_only("the fault is in the SQLite writer") {
        return;
    }
    let dir = TempDir::new();
    let s = TestServer::start(&dir.db());
    arm(&s, "sync-fails-before");
    let r = s.post(r#"{"id":1,"name":"a"}"#);
    assert_eq!(
        (r.status, r.text()),
        (500, err(500, "internal error; the server log has details"))
    );
    s.log_when(|l| {
        l.contains("the group can never take effect") && l.contains("1 change(s) refused")
    });
    assert_eq!(s.list(), "[]");
    assert_eq!(s.get("/healthz").status, 200, "the probe committed");
    assert_eq!(s.post(r#"{"id":2,"name":"b"}"#).status, 200);
    drop(s);
    let s = TestServer::start(&dir.db());
    assert_eq!(names(&s.list()), ["b"]);
    assert_eq!(events(&s), [(1, "plant.created".into(), 2)]);
}

/// The sync fails, the group is not visible, and no later commit can be made durable
/// (the disk is full): the outcome is unknown, answered as PostgreSQL answers a lost
/// commit, and never logged as refused.
#[test]
fn a_commit_whose_outcome_cannot_be_told_is_500_read_before_retrying() {
    if sqlite_only("the fault is in the SQLite writer; PostgreSQL's twin: lost_commit") {
        return;
    }
    let dir = TempDir::new();
    let s = TestServer::start(&dir.db());
    arm(&s, "disk-full");
    arm(&s, "sync-fails-before");
    let r = s.post(r#"{"id":1,"name":"a"}"#);
    assert_eq!((r.status, r.text()), (500, err(500, UNKNOWN)));
    let log = s.log_when(|l| l.contains("database write of unknown outcome, 1 change(s)"));
    assert!(
        log.contains("whether it took effect cannot be told"),
        "{log}"
    );
    assert!(!log.contains("refused"), "{log}");
    assert_eq!(s.get("/healthz").status, 503);
    arm(&s, "disk-ok");
    eventually(Duration::from_secs(5), || s.get("/healthz").status == 200);
}

/// On a full disk every write fails; a retention sweep (which removes nothing, so it
/// writes no page and commits) must not make `/healthz` say 200 meanwhile. Once space is
/// back, the next probe makes it 200 again.
#[test]
fn healthz_stays_503_on_a_full_disk_across_retention_sweeps() {
    if sqlite_only("the fault is in the SQLite writer") {
        return;
    }
    let dir = TempDir::new();
    let s = TestServer::start(&dir.db());
    arm(&s, "disk-full");
    assert_eq!(s.post(r#"{"id":1,"name":"a"}"#).status, 500);
    // SWEEP_EVERY is 2 s: at least two sweeps commit within this.
    let until = Instant::now() + Duration::from_millis(4500);
    while Instant::now() < until {
        let r = s.send("GET", "/healthz", &[], None);
        assert_eq!(
            (r.status, r.text()),
            (503, err(503, "the database is unavailable"))
        );
        std::thread::sleep(Duration::from_millis(250));
    }
    arm(&s, "disk-ok");
    eventually(Duration::from_secs(5), || s.get("/healthz").status == 200);
    assert_eq!(s.post(r#"{"id":1,"name":"a"}"#).status, 200);
}

/// Four clients ask `/healthz` as fast as they can during an outage: at most one probe
/// write a second (PROBE_REUSE), and the repeated cause is logged once (CAUSE_LOG_EVERY
/// is 10 s), not once per request.
#[test]
fn healthz_during_an_outage_probes_once_a_second_and_logs_its_cause_once() {
    if sqlite_only("the fault is in the SQLite writer") {
        return;
    }
    let dir = TempDir::new();
    let s = TestServer::start(&dir.db());
    arm(&s, "disk-full");
    assert_eq!(s.post(r#"{"id":1,"name":"a"}"#).status, 500);
    let failures = s.metric("plant_store_commit_failures_total");
    let started = Instant::now();
    let asked: usize = std::thread::scope(|scope| {
        let clients: Vec<_> = (0..4)
            .map(|_| {
                scope.spawn(|| {
                    let mut n = 0;
                    while started.elapsed() < Duration::from_secs(3) {
                        assert_eq!(s.send("GET", "/healthz", &[], None).status, 503);
                        n += 1;
                    }
                    n
                })
            })
            .collect();
        clients.into_iter().map(|c| c.join().unwrap()).sum()
    });
    let seconds = started.elapsed().as_secs_f64();
    let probes = s.metric("plant_store_commit_failures_total") - failures;
    assert!(asked > 40, "only {asked} requests: nothing was tested");
    assert!(
        probes <= seconds.ceil() + 1.0,
        "{probes} probes for {asked} requests in {seconds:.1} s"
    );
    let log = s.log();
    let lines = log.lines().filter(|l| l.contains("GET /healthz: ")).count();
    assert_eq!(lines, 1, "{asked} requests:\n{log}");
    assert_eq!(
        log.matches("change(s) refused").count(),
        1,
        "the create only: a failed probe is no refused write:\n{log}"
    );
}

/// A read that panics inside its transaction (the worker survives, 500) leaves nothing
/// held: the worker's next reads work, and on SQLite checkpoints pass, so a burst of
/// writes leaves the WAL within its limit. On PostgreSQL (one connection for the workers:
/// `--db-pool 2`) the read's connection goes back to the pool.
#[test]
fn a_panic_inside_a_read_leaves_no_read_transaction_open() {
    if panics_abort() {
        eprintln!(
            "not in this build: its panics end the process; a panic ends the process before any transaction could stay open"
        );
        return;
    }
    let dir = TempDir::new();
    let s = Launch::new(&dir.db())
        .arg(if on_postgres() {
            "--workers 1 --db-pool 2"
        } else {
            "--workers 1"
        })
        .start();
    assert_eq!(s.post(r#"{"id":1,"name":"a"}"#).status, 200);
    for _ in 0..3 {
        let r = s.send("GET", "/__fault/read-panic", &[], None);
        assert_eq!(r.status, 500);
        let r = s.get("/plants");
        assert_eq!((r.status, names(&r.text())), (200, vec!["a".to_owned()]));
        assert_eq!(s.get("/events").status, 200);
    }
    if on_postgres() {
        return;
    }
    // Each create appends frames of about five pages (the plant, its event, the log,
    // their indexes): 1,000 of them are over 20 MiB of log unless checkpoints pass.
    for id in 2..1002 {
        let r = s.post(&format!(r#"{{"id":{id},"name":"{}"}}"#, "n".repeat(200)));
        assert_eq!(r.status, 200, "{}", r.text());
    }
    assert!(
        wal_size(&dir) <= WAL_SIZE_LIMIT,
        "the WAL grew to {} bytes",
        wal_size(&dir)
    );
}

/// A read held open (as a long backup holds one) lets the WAL grow past its limit while
/// writes go on; once it ends, a checkpoint and the next commits cut the file back to
/// `WAL_SIZE_LIMIT`.
#[test]
fn the_wal_is_cut_back_to_its_limit_after_a_long_read_and_a_burst() {
    if sqlite_only("SQLite's write-ahead log") {
        return;
    }
    let dir = TempDir::new();
    let s = Launch::new(&dir.db()).arg("--workers 2").start();
    std::thread::scope(|scope| {
        let holder = scope.spawn(|| s.send("GET", "/__fault/hold-read", &[], None).status);
        s.log_when(|l| l.contains("fault injection: holding a read"));
        let mut id = 0;
        while wal_size(&dir) <= WAL_SIZE_LIMIT + 1024 * 1024 {
            id += 1;
            assert!(id < 20_000, "the WAL never grew past its limit");
            let r = s.post(&format!(r#"{{"id":{id},"name":"{}"}}"#, "n".repeat(200)));
            assert_eq!(r.status, 200, "{}", r.text());
        }
        arm(&s, "release-reads");
        assert_eq!(holder.join().unwrap(), 200);
    });
    let mut id = 100_000;
    eventually(Duration::from_secs(20), || {
        id += 1;
        assert_eq!(s.post(&format!(r#"{{"id":{id},"name":"x"}}"#)).status, 200);
        wal_size(&dir) <= WAL_SIZE_LIMIT
    });
}

/// A probe write that the database holds up (a read locks `:memory:`, so the write waits
/// for its lock) holds no `/healthz` past `PROBE_WAIT` (1 s): the checks answer 503 "a
/// probe write is under way" meanwhile, and 200 once the probe commits.
#[test]
fn a_held_up_probe_holds_no_health_check_past_a_second() {
    if sqlite_only("the fault is in the SQLite store") {
        return;
    }
    let s = Launch::memory().arg("--workers 4").start();
    arm(&s, "disk-full");
    assert_ne!(s.post(r#"{"id":1,"name":"a"}"#).status, 200);
    arm(&s, "disk-ok");
    std::thread::scope(|scope| {
        let holder = scope.spawn(|| s.send("GET", "/__fault/hold-read", &[], None).status);
        s.log_when(|l| l.contains("fault injection: holding a read"));
        // The first check starts the probe, the next finds it under way.
        for _ in 0..2 {
            let asked = Instant::now();
            let r = s.send("GET", "/healthz", &[], None);
            let waited = asked.elapsed();
            assert_eq!(r.status, 503, "{}", r.text());
            // Held, it would wait until the read is released below, which never comes
            // while it waits: any bound short of the client's 20 s tells the two apart,
            // and a loaded machine answers a 1 s wait well within this one.
            assert!(waited < Duration::from_secs(8), "{waited:?}");
        }
        assert!(
            s.log().contains("a probe write is under way"),
            "{}",
            s.log()
        );
        arm(&s, "release-reads");
        assert_eq!(holder.join().unwrap(), 200);
    });
    eventually(Duration::from_secs(10), || s.get("/healthz").status == 200);
}
