//! PostgreSQL only: several instances on one database, the pool bound, migrations under
//! the advisory lock, the database going away and coming back, and a write's token looked
//! up in its group's round trip.

use crate::support::*;
use std::collections::BTreeSet;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

fn list_as(s: &TestServer, token: &str) -> Resp {
    s.send("GET", "/plants", &[("Authorization", &bearer(token))], None)
}

fn delete_as(s: &TestServer, token: &str, id: i64) -> Resp {
    let path = format!("/plants/{id}");
    s.send("DELETE", &path, &[("Authorization", &bearer(token))], None)
}

#[test]
fn two_instances_share_plants_and_a_revocation_fails_on_both_at_once() {
    if postgres_only("several instances share one database only on PostgreSQL") {
        return;
    }
    let dir = TempDir::new();
    let alice = add_token(&dir.db(), "alice", false);
    let bob = add_token(&dir.db(), "bob", false);
    let (a, b) = (TestServer::start(&dir.db()), TestServer::start(&dir.db()));
    let servers = [&a, &b];
    // Requests alternate between the two instances.
    for id in 0..10i64 {
        let s = servers[id as usize % 2];
        let body = format!(r#"{{"id":{id},"name":"n{id}"}}"#);
        assert_eq!(s.post_as(&alice, &body).status, 200);
    }
    let ten: Vec<String> = (0..10).map(|i| format!("n{i}")).collect();
    for s in servers {
        assert_eq!(names(&list_as(s, &alice).text()), ten);
        assert_eq!(list_as(s, &bob).text(), "[]", "another principal's plants");
    }
    let r = b.post_as(&alice, r#"{"id":3,"name":"again"}"#);
    assert_eq!(
        (r.status, r.text()),
        (
            409,
            r#"{"error":409,"message":"a plant with id 3 already exists"}"#.into()
        )
    );
    assert_eq!(
        delete_as(&b, &bob, 4).status,
        404,
        "bob cannot delete alice's 4"
    );
    assert_eq!(delete_as(&b, &alice, 4).status, 204);
    assert_eq!(
        delete_as(&a, &alice, 4).status,
        404,
        "deleted through the other"
    );
    assert_eq!(names(&list_as(&a, &alice).text()).len(), 9);

    // Revoked through the command line: the very next request fails on each instance.
    revoke_token_of(&dir.db(), "alice");
    for s in servers {
        assert_eq!(list_as(s, &alice).status, 401);
        assert_eq!(list_as(s, &bob).status, 200);
    }
}

#[test]
fn ten_instances_starting_together_migrate_once() {
    if postgres_only("several instances share one database only on PostgreSQL") {
        return;
    }
    let dir = TempDir::new();
    let db = dir.db();
    let servers: Vec<TestServer> = std::thread::scope(|scope| {
        let started: Vec<_> = (0..10)
            .map(|_| scope.spawn(|| TestServer::start(&db)))
            .collect();
        started.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for s in &servers {
        assert_eq!(s.send("GET", "/healthz", &[], None).status, 200);
    }
    // Each log up to its start-up line, which follows any migration's line.
    let migrations: usize = servers
        .iter()
        .map(|s| {
            s.log_when(|log| log.contains("serving "))
                .matches("database migrated from schema version 0")
                .count()
        })
        .sum();
    assert_eq!(migrations, 1, "exactly one instance migrates");
    assert_eq!(
        psql(&db, "SELECT version FROM plant_store_schema").trim(),
        schema_version().to_string()
    );
    assert_eq!(
        psql(&db, "SELECT count(*) FROM plant_store_schema").trim(),
        "1"
    );
}

#[test]
fn a_name_with_nul_is_stored_as_its_exact_bytes() {
    if postgres_only("several instances share one database only on PostgreSQL") {
        return;
    }
    let dir = TempDir::new();
    let s = TestServer::start(&dir.db());
    let r = s.post(r#"{"id":1,"name":"a\u0000b","tag":"\u0000"}"#);
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(s.list(), r#"[{"name":"a\u0000b","tag":"\u0000"}]"#);
    assert_eq!(
        psql(
            &dir.db(),
            "SELECT encode(name, 'hex'), encode(tag, 'hex') FROM plants"
        )
        .trim(),
        "610062|00"
    );
}

#[test]
fn the_pool_bounds_connections_under_load() {
    if postgres_only("several instances share one database only on PostgreSQL") {
        return;
    }
    let dir = TempDir::new();
    let s = Launch::new(&dir.db())
        .arg("--db-pool 3 --workers 8")
        .start();
    for id in 0..300 {
        assert_eq!(
            s.post(&format!(r#"{{"id":{id},"name":"n{id}"}}"#)).status,
            200
        );
    }
    let name = dir
        .db()
        .to_str()
        .unwrap()
        .rsplit('/')
        .next()
        .unwrap()
        .to_owned();
    let count = format!(
        "SELECT count(*) FROM pg_stat_activity WHERE datname = '{name}' AND application_name = 'plant-store'"
    );
    let stop = AtomicBool::new(false);
    let most = std::thread::scope(|scope| {
        let clients: Vec<_> = (0..16)
            .map(|_| {
                scope.spawn(|| {
                    while !stop.load(Ordering::Relaxed) {
                        let r = s.get("/plants?limit=200");
                        assert_eq!(r.status, 200, "{}", r.text());
                        assert!(s.post(r#"{"id":0,"name":"dup"}"#).status == 409);
                    }
                })
            })
            .collect();
        let mut most = 0;
        // Sampled for a second under load: the pool never holds more.
        for _ in 0..20 {
            std::thread::sleep(Duration::from_millis(50));
            most = most.max(psql(&dir.db(), &count).trim().parse::<u32>().unwrap());
        }
        stop.store(true, Ordering::Relaxed);
        for c in clients {
            c.join().unwrap();
        }
        most
    });
    assert!(
        (2..=3).contains(&most),
        "{most} connections with --db-pool 3"
    );
}

/// Writers send creates to two instances in turn; one instance is killed with SIGKILL
/// mid-load. Every create either instance acknowledged is in the database.
#[test]
fn kill_9_of_one_instance_loses_no_acknowledged_write() {
    if postgres_only("several instances share one database only on PostgreSQL") {
        return;
    }
    let dir = TempDir::new();
    let (a, b) = (TestServer::start(&dir.db()), TestServer::start(&dir.db()));
    let acked = Mutex::new(BTreeSet::new());
    let addrs = [a.addr.clone(), b.addr.clone()];
    std::thread::scope(|scope| {
        for w in 0..6i64 {
            let (acked, addrs) = (&acked, &addrs);
            scope.spawn(move || {
                for n in 0..100_000i64 {
                    let id = w * 1_000_000 + n;
                    let body = format!(r#"{{"id":{id},"name":"p{id}"}}"#);
                    match Req::create(&body).send_to(&addrs[(n % 2) as usize]) {
                        Ok(r) if r.status == 200 => {
                            acked.lock().unwrap().insert(id);
                        }
                        Ok(r) => panic!("create {id}: {} {}", r.status, r.text()),
                        // The killed instance: this writer stops.
                        Err(_) => return,
                    }
                }
            });
        }
        // Mid-load: both instances have acknowledged writes.
        eventually(Duration::from_secs(10), || {
            acked.lock().unwrap().len() >= 60
        });
        a.signal(libc::SIGKILL);
    });
    let acked = acked.into_inner().unwrap();
    assert!(acked.len() > 50, "too little progress: {}", acked.len());
    let present = listed_ids(&b);
    let lost: Vec<_> = acked.difference(&present).collect();
    assert!(lost.is_empty(), "acknowledged and lost: {lost:?}");
}

/// PostgreSQL stops under a write load: /healthz is 503 and writes 500 while it is down,
/// nothing acknowledged is lost, and the same instance serves again once it is back.
#[test]
fn the_database_restarting_under_load_is_survived_without_a_restart() {
    if postgres_only("several instances share one database only on PostgreSQL") {
        return;
    }
    let cluster = Cluster::start();
    cluster.psql("postgres", "CREATE DATABASE plants");
    let url = cluster.url("plants");
    let s = Launch::new(std::path::Path::new(&url)).start();
    let pid = s.pid();
    let acked = Mutex::new(BTreeSet::new());
    let refused = Mutex::new(BTreeSet::new());
    let statuses = Mutex::new(BTreeSet::new());
    let stop = AtomicBool::new(false);
    let down_seen = std::thread::scope(|scope| {
        for w in 0..4i64 {
            let (acked, refused, statuses, stop, s) = (&acked, &refused, &statuses, &stop, &s);
            scope.spawn(move || {
                let mut id = w * 1_000_000;
                while !stop.load(Ordering::Relaxed) {
                    id += 1;
                    let r = s.post(&format!(r#"{{"id":{id},"name":"p{id}"}}"#));
                    statuses.lock().unwrap().insert(r.status);
                    match r.status {
                        200 => {
                            acked.lock().unwrap().insert(id);
                        }
                        500 => {
                            assert_eq!(
                                r.text(),
                                r#"{"error":500,"message":"internal error; the server log has details"}"#
                            );
                            refused.lock().unwrap().insert(id);
                        }
                        other => panic!("create {id}: {other} {}", r.text()),
                    }
                    // The writer's own pace, not a wait for a state.
                    std::thread::sleep(Duration::from_millis(2));
                }
            });
        }
        // Under load.
        eventually(Duration::from_secs(10), || {
            acked.lock().unwrap().len() >= 20
        });
        cluster.down("fast");
        let health = s.send("GET", "/healthz", &[], None);
        let write = s.post(r#"{"id":-1,"name":"while down"}"#);
        // Not a stand-in for a state: the database stays away for half a second.
        std::thread::sleep(Duration::from_millis(500));
        cluster.up();
        // Back by itself: healthz and writes succeed again within a few seconds.
        eventually(Duration::from_secs(15), || {
            s.send("GET", "/healthz", &[], None).status == 200
        });
        let before = acked.lock().unwrap().len();
        eventually(Duration::from_secs(15), || {
            acked.lock().unwrap().len() >= before + 20
        });
        stop.store(true, Ordering::Relaxed);
        (health, write)
    });
    let (health, write) = down_seen;
    assert_eq!(health.status, 503, "{}", health.text());
    assert_eq!(write.status, 500, "{}", write.text());
    assert_eq!(s.pid(), pid);
    assert!(
        statuses.lock().unwrap().contains(&500),
        "the outage was seen"
    );
    let present = listed_ids(&s);
    let acked = acked.into_inner().unwrap();
    let lost: Vec<_> = acked.difference(&present).collect();
    assert!(lost.is_empty(), "acknowledged and lost: {lost:?}"); // And the reverse: a write answered 500 did not take effect.
    let refused = refused.into_inner().unwrap();
    let ghosts: Vec<_> = refused.intersection(&present).collect();
    assert!(
        ghosts.is_empty(),
        "answered 500 and stored: {ghosts:?}\n{}",
        s.log()
    );
}

/// With `--db-pool 2`, one connection reads. While it waits on a lock another session
/// holds, the next request finds no free connection for 5 s and gets 503 (overloaded, not
/// broken); the first is answered once the lock goes.
#[test]
fn a_request_that_finds_no_free_connection_is_503_with_retry_after() {
    if postgres_only("several instances share one database only on PostgreSQL") {
        return;
    }
    let dir = TempDir::new();
    let s = Launch::new(&dir.db())
        .arg("--db-pool 2 --workers 4")
        .start();
    assert_eq!(s.post(r#"{"id":1,"name":"kept"}"#).status, 200);
    let db = dir.db();
    std::thread::scope(|scope| {
        let locker = scope.spawn(|| {
            psql(
                &db,
                "BEGIN; LOCK TABLE plants IN ACCESS EXCLUSIVE MODE; SELECT pg_sleep(7); COMMIT;",
            )
        });
        let held = "SELECT count(*) FROM pg_locks WHERE mode = 'AccessExclusiveLock' AND relation = 'plants'::regclass";
        eventually(Duration::from_secs(10), || psql(&db, held).trim() == "1");
        let first = scope.spawn(|| s.get("/plants"));
        let waiting = "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'plant-store' AND wait_event_type = 'Lock'";
        eventually(Duration::from_secs(10), || psql(&db, waiting).trim() == "1");
        let started = Instant::now();
        let second = s.get("/plants");
        assert_eq!(second.status, 503, "{}", second.text());
        assert_eq!(second.header("Retry-After"), Some("1"));
        assert!(
            started.elapsed() >= Duration::from_secs(4),
            "{:?}",
            started.elapsed()
        );
        // A request refused before it queries (no token, a malformed one) takes no
        // connection from the pool: 401 at once, while the only one is held.
        for auth in [None, Some("Basic abc"), Some("Bearer")] {
            let started = Instant::now();
            let headers: Vec<(&str, &str)> =
                auth.map(|a| ("Authorization", a)).into_iter().collect();
            let r = s.send("GET", "/plants", &headers, None);
            assert_eq!(r.status, 401, "{auth:?}: {}", r.text());
            assert!(
                started.elapsed() < Duration::from_secs(2),
                "{auth:?}: {:?}",
                started.elapsed()
            );
        }
        let first = first.join().unwrap();
        assert_eq!(
            (first.status, first.text()),
            (200, r#"[{"name":"kept"}]"#.into())
        );
        locker.join().unwrap();
    });
    assert_eq!(s.list(), r#"[{"name":"kept"}]"#, "served again");
}

/// A password never shows, even partly, in what the server says about its database:
/// not with a `?`, `@` or `/` in it.
#[test]
fn a_password_with_odd_characters_never_shows() {
    if postgres_only("several instances share one database only on PostgreSQL") {
        return;
    }
    for url in [
        "postgres://app:se?cret@127.0.0.1:1/db",
        "postgres://app:se@cr/et@127.0.0.1:1/db",
        "postgres://127.0.0.1:1/db?user=a@b&password=se?cret",
    ] {
        let (code, out, err) = run_cli(&["--db", url, "--addr", "127.0.0.1:0"]);
        assert_ne!(code, 0, "{out}{err}");
        // Refused connecting (1), or as the options are read (2, naming --db).
        assert!(
            err.contains("cannot open the database") || err.starts_with("plant-store: --db: "),
            "{err}"
        );
        for part in ["cret", "cr/et", "se?"] {
            assert!(
                !err.contains(part) && !out.contains(part),
                "`{part}` shown: {err}"
            );
        }
    }
}

/// A write with a stored token is one round trip: once a check has found its token able
/// to write, the token is looked up by the write's group, not by a query of its own
/// before it. A token not yet found so (made up, new here, read-only) is looked up
/// first, and never reaches the writer; so is the token of a write that fails its own
/// checks, so that a bad token is still 401 before a bad body is 400.
#[test]
fn a_write_s_stored_token_is_looked_up_in_its_group_s_round_trip() {
    if postgres_only("round trips to PostgreSQL") {
        return;
    }
    let dir = TempDir::new();
    let db = dir.db();
    let name = db.to_str().unwrap().rsplit('/').next().unwrap().to_owned();
    let cluster = shared_cluster();
    // Only this database's sessions log their statements, and only those opened after.
    cluster.psql(
        "postgres",
        &format!("ALTER DATABASE {name} SET log_statement = 'all'"),
    );
    let ann = add_token(&db, "ann", false);
    let reads = add_token(&db, "ann", true);
    let s = TestServer::start(&db);
    let (lookup, folded) = ("FROM tokens WHERE hash = $1", "plant_store.t0");
    let during = |req: Req, status: u16| {
        let before = cluster.log().len();
        assert_eq!(s.request(&req).status, status);
        cluster.log()[before..].to_owned()
    };
    let post = |token: &str, body: &str| Req::new("POST", "/plants").token(token).json(body);
    let delete = |id: &str| Req::new("DELETE", &format!("/plants/{id}")).token(&ann);
    let made_up = "0".repeat(64);
    // (request, status, looked up first)
    let cases = [
        (post(&made_up, r#"{"id":1,"name":"a"}"#), 401, true),
        (post(&ann, r#"{"id":1,"name":"a"}"#), 200, true),
        (post(&ann, r#"{"id":2,"name":"b"}"#), 200, false),
        (delete("1"), 204, false),
        (delete("1"), 404, false),
        (post(&ann, "{"), 400, true),
        (post(&reads, r#"{"id":3,"name":"c"}"#), 403, true),
        (post(&reads, r#"{"id":3,"name":"c"}"#), 403, true),
        (post(&made_up, r#"{"id":1,"name":"a"}"#), 401, true),
    ];
    for (i, (req, status, first)) in cases.into_iter().enumerate() {
        let log = during(req, status);
        assert_eq!(log.contains(lookup), first, "case {i}: {log}");
        assert_eq!(log.contains(folded), !first, "case {i}: {log}");
    }
}

/// Two instances writing for several principals at once, by stored tokens (looked up by
/// the commit) and by the environment token (its principal known before), so that groups
/// mix both: every write is answered as it should be, none with 500 (a deadlock between
/// the instances' groups would be one; they take their principals' locks in one order),
/// and each principal's log holds each of its writes once, without a gap.
#[test]
fn writes_of_many_principals_through_two_instances_at_once_never_deadlock() {
    if postgres_only("several instances share one database only on PostgreSQL") {
        return;
    }
    let dir = TempDir::new();
    let db = dir.db();
    let mut tokens: Vec<String> = (0..4)
        .map(|p| add_token(&db, &format!("p{p}"), false))
        .collect();
    tokens.push(TOKEN.to_owned());
    let (a, b) = (TestServer::start(&db), TestServer::start(&db));
    const THREADS: usize = 8;
    const EACH: usize = 40;
    let threads: Vec<_> = (0..THREADS)
        .map(|t| {
            let addr = [&a, &b][t % 2].addr.clone();
            let tokens = tokens.clone();
            std::thread::spawn(move || {
                for i in 0..EACH {
                    let token = &tokens[(t + i) % tokens.len()];
                    let id = t * 1000 + i;
                    let body = format!(r#"{{"id":{id},"name":"n"}}"#);
                    let created = Req::new("POST", "/plants").token(token).json(&body);
                    assert_eq!(created.send_to(&addr).unwrap().status, 200);
                    let deleted = Req::new("DELETE", &format!("/plants/{id}")).token(token);
                    assert_eq!(deleted.send_to(&addr).unwrap().status, 204);
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let per_principal = THREADS * EACH / tokens.len();
    for token in &tokens {
        assert_eq!(list_as(&a, token).text(), "[]");
        let r = a.send(
            "GET",
            "/events?limit=1000",
            &[("Authorization", &bearer(token))],
            None,
        );
        let events: Vec<serde_json::Value> = serde_json::from_str(&r.text()).unwrap();
        let seqs: Vec<i64> = events.iter().map(|e| e["seq"].as_i64().unwrap()).collect();
        let expected: Vec<i64> = (1..=2 * per_principal as i64).collect();
        assert_eq!(seqs, expected);
    }
}
