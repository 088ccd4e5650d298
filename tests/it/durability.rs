//! What is acknowledged stays: restarts, kill -9, migrations, concurrent writers.

use crate::support::*;
use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

#[test]
fn plants_survive_a_restart() {
    let dir = TempDir::new();
    let s = TestServer::start(&dir.db());
    assert_eq!(s.post(r#"{"id":1,"name":"kept","tag":"t"}"#).status, 200);
    assert_eq!(s.post(r#"{"id":2,"name":"deleted"}"#).status, 200);
    assert_eq!(s.delete("2").status, 204);
    assert!(s.stop().success(), "SIGTERM exits 0");
    let s = TestServer::start(&dir.db());
    assert_eq!(s.list(), r#"[{"name":"kept","tag":"t"}]"#);
}

#[test]
fn a_version_1_database_is_migrated_and_keeps_its_plants() {
    let dir = TempDir::new();
    if on_postgres() {
        // The same state in PostgreSQL's dialect: version 1 of plants.sql and two plants.
        psql(
            &dir.db(),
            "CREATE TABLE plant_store_schema (version bigint NOT NULL);
             INSERT INTO plant_store_schema VALUES (1);
             CREATE TABLE plants (principal text NOT NULL, id bigint NOT NULL,
                 name bytea NOT NULL, tag bytea, PRIMARY KEY (principal, id));
             INSERT INTO plants VALUES
                 ('default', 1, convert_to('Monstera', 'UTF8'), convert_to('tropical', 'UTF8')),
                 ('default', 2, convert_to('Fern', 'UTF8'), NULL);",
        );
    } else {
        let fixture = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/schema-v1.sql"
        ))
        .unwrap();
        rusqlite::Connection::open(dir.db())
            .unwrap()
            .execute_batch(&fixture)
            .unwrap();
    }
    let token = add_token(&dir.db(), "frank", false);
    let s = TestServer::start(&dir.db());
    assert_eq!(
        s.list(),
        r#"[{"name":"Monstera","tag":"tropical"},{"name":"Fern"}]"#
    );
    assert_eq!(s.post_as(&token, r#"{"id":1,"name":"mine"}"#).status, 200);
    assert_eq!(s.post(r#"{"id":1,"name":"dup"}"#).status, 409);
    // Plants from before the change feed have no events: a log starts with the next change.
    assert_eq!(s.get("/events").text(), "[]");
    let frank: Vec<serde_json::Value> = serde_json::from_slice(
        &s.send(
            "GET",
            "/events",
            &[("Authorization", &bearer(&token))],
            None,
        )
        .body,
    )
    .unwrap();
    assert_eq!((frank.len(), &frank[0]["seq"]), (1, &serde_json::json!(1)));
    let version: i64 = if on_postgres() {
        psql(&dir.db(), "SELECT version FROM plant_store_schema")
            .trim()
            .parse()
            .unwrap()
    } else {
        rusqlite::Connection::open(dir.db())
            .unwrap()
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .unwrap()
    };
    assert_eq!(version, schema_version());
}

/// A database at schema version 6 (the release before the flash-wear changes, plants.sql
/// "-- version 7") with events: migrated, its events read back as they were (ids, kinds,
/// times), its log goes on from its last seq, and `events_by_age` is gone.
#[test]
fn a_version_6_database_keeps_its_events_and_loses_events_by_age() {
    if sqlite_only("the migration rebuilds SQLite's events table") {
        return;
    }
    let dir = TempDir::new();
    let schema =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/plants.sql")).unwrap();
    let upto6 = schema.split("-- version 7").next().unwrap();
    let (created, deleted) = (
        "evt_00112233445566778899aabbccddeeff",
        "evt_ffeeddccbbaa99887766554433221100",
    );
    {
        let c = rusqlite::Connection::open(dir.db()).unwrap();
        c.execute_batch(upto6).unwrap();
        c.execute_batch(&format!(
            "PRAGMA journal_mode = WAL; PRAGMA user_version = 6;
             INSERT INTO plants VALUES ('default', 1, 'Monstera', 'tropical');
             INSERT INTO events VALUES ('default', 1, '{created}', 'plant.created', 1000, 1,
                 'Monstera', 'tropical');
             INSERT INTO events VALUES ('default', 2, '{deleted}', 'plant.deleted', 2000, 2,
                 NULL, NULL);
             INSERT INTO event_logs VALUES ('default', 2, 2000);"
        ))
        .unwrap();
    }
    let s = TestServer::start(&dir.db());
    let old: serde_json::Value = s.get("/events").json();
    assert_eq!(
        old,
        serde_json::json!([
            {"id": created, "seq": 1, "type": "plant.created",
             "timestamp": "1970-01-01T00:00:01.000Z",
             "data": {"id": 1, "name": "Monstera", "tag": "tropical"}},
            {"id": deleted, "seq": 2, "type": "plant.deleted",
             "timestamp": "1970-01-01T00:00:02.000Z", "data": {"id": 2}},
        ]),
        "{old}"
    );
    assert_eq!(s.post(r#"{"id":3,"name":"Fern"}"#).status, 200);
    let all = s.get("/events").json();
    assert_eq!(
        (all[2]["seq"].as_i64(), all[2]["type"].as_str()),
        (Some(3), Some("plant.created"))
    );
    let c = rusqlite::Connection::open(dir.db()).unwrap();
    let (version, by_age): (i64, i64) = c
        .query_row(
            "SELECT (SELECT user_version FROM pragma_user_version),
                    (SELECT count(*) FROM sqlite_master WHERE name = 'events_by_age')",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert_eq!((version, by_age), (schema_version(), 0));
}

#[test]
fn a_database_from_a_newer_version_is_refused() {
    let dir = TempDir::new();
    if on_postgres() {
        psql(
            &dir.db(),
            "CREATE TABLE plant_store_schema (version bigint NOT NULL);
             INSERT INTO plant_store_schema VALUES (99);",
        );
    } else {
        // Ours (today's tables; an empty file at 99 is another application's), newer.
        add_token(&dir.db(), "ann", false);
        rusqlite::Connection::open(dir.db())
            .unwrap()
            .execute_batch("PRAGMA user_version = 99")
            .unwrap();
    }
    let (code, _, err) = run_cli(&["token", "list", "--db", dir.db().to_str().unwrap()]);
    assert_eq!(code, 1);
    assert!(err.contains("schema version 99, newer"), "{err}");
}

/// Writers record what was acknowledged; the server is killed with SIGKILL at a random
/// moment; after a restart every acknowledged create is there (with its exact content) and
/// every acknowledged delete is gone.
#[test]
fn kill_9_loses_no_acknowledged_write() {
    let dir = TempDir::new();
    for round in 0..3u64 {
        let s = TestServer::start(&dir.db());
        let acked_created = Arc::new(Mutex::new(BTreeSet::new()));
        let acked_deleted = Arc::new(Mutex::new(BTreeSet::new()));
        // A delete whose answer never came may or may not have happened.
        let tried_delete = Arc::new(Mutex::new(BTreeSet::new()));
        let writers: Vec<_> = (0..8u64)
            .map(|w| {
                let addr = s.addr.clone();
                let (created, deleted, tried) = (
                    acked_created.clone(),
                    acked_deleted.clone(),
                    tried_delete.clone(),
                );
                std::thread::spawn(move || {
                    let client = Client { addr };
                    for n in 0..100_000u64 {
                        let id = (round * 8 + w) * 1_000_000 + n;
                        match client.post(&format!(r#"{{"id":{id},"name":"p{id}","tag":"w{w}"}}"#))
                        {
                            Some(200) => created.lock().unwrap().insert(id),
                            Some(_) => panic!("create {id} refused"),
                            None => return,
                        };
                        if n % 3 == 0 {
                            tried.lock().unwrap().insert(id);
                            match client.delete(id) {
                                Some(204) => deleted.lock().unwrap().insert(id),
                                Some(s) => panic!("delete {id} answered {s}"),
                                None => return,
                            };
                        }
                    }
                })
            })
            .collect();
        kill_at_a_random_moment(&s);
        for w in writers {
            w.join().expect("a writer saw a wrong answer");
        }
        drop(s);

        let s = TestServer::start(&dir.db());
        let listed: serde_json::Value = serde_json::from_str(&s.list()).unwrap();
        let present: BTreeSet<u64> = listed
            .as_array()
            .unwrap()
            .iter()
            .map(|p| {
                let name = p["name"].as_str().unwrap();
                let id: u64 = name[1..].parse().unwrap();
                let writer = (id / 1_000_000) % 8;
                assert_eq!(p["tag"], format!("w{writer}"), "half-written plant {p}");
                id
            })
            .collect();
        let created = acked_created.lock().unwrap();
        let deleted = acked_deleted.lock().unwrap();
        assert!(
            created.len() > 10,
            "the writers made too little progress to test anything"
        );
        let tried = tried_delete.lock().unwrap();
        for id in created.difference(&tried) {
            assert!(
                present.contains(id),
                "acknowledged create {id} lost (round {round})"
            );
        }
        for id in deleted.iter() {
            assert!(
                !present.contains(id),
                "acknowledged delete {id} undone (round {round})"
            );
        }
        drop(s);
    }
}

/// A client for writer threads: the status, or None once the server is gone.
struct Client {
    addr: String,
}

impl Client {
    fn status(&self, req: Req) -> Option<u16> {
        req.send_to(&self.addr).ok().map(|r| r.status)
    }

    fn post(&self, body: &str) -> Option<u16> {
        self.status(Req::create(body))
    }

    fn delete(&self, id: u64) -> Option<u16> {
        self.status(Req::new("DELETE", &format!("/plants/{id}")).token(TOKEN))
    }
}

#[test]
fn concurrent_creates_and_deletes_of_the_same_ids_stay_consistent() {
    let s = TestServer::memory();
    let statuses = Arc::new(Mutex::new(Vec::new()));
    let deadline = Instant::now() + Duration::from_secs(3);
    let threads: Vec<_> = (0..8u64)
        .map(|t| {
            let (addr, statuses) = (s.addr.clone(), statuses.clone());
            std::thread::spawn(move || {
                let client = Client { addr };
                let mut n = t;
                while Instant::now() < deadline {
                    n = n
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    let id = (n >> 33) % 10;
                    let status = if n & 1 == 0 {
                        client.post(&format!(r#"{{"id":{id},"name":"{id}"}}"#))
                    } else {
                        client.delete(id)
                    };
                    statuses
                        .lock()
                        .unwrap()
                        .push(status.expect("server answered"));
                }
            })
        })
        .collect();
    let mut lists = 0;
    while Instant::now() < deadline {
        let ids = names(&s.list());
        let unique: BTreeSet<&String> = ids.iter().collect();
        assert_eq!(
            unique.len(),
            ids.len(),
            "a list showed a duplicate: {ids:?}"
        );
        let nums: Vec<i64> = ids.iter().map(|i| i.parse().unwrap()).collect();
        assert!(nums.windows(2).all(|w| w[0] < w[1]), "{nums:?}");
        lists += 1;
    }
    for t in threads {
        t.join().unwrap();
    }
    let statuses = statuses.lock().unwrap();
    assert!(lists > 5 && statuses.len() > 50);
    for st in statuses.iter() {
        assert!([200, 204, 404, 409].contains(st), "unexpected status {st}");
    }
    // Every create is answered 200 or 409, every delete 204 or 404, and the counts agree
    // with what is left.
    let count = |c: u16| statuses.iter().filter(|s| **s == c).count();
    assert_eq!(count(200) - count(204), names(&s.list()).len());
}

/// `backup` under a concurrent write load: the copy opens, passes `integrity_check`,
/// holds every plant whose create was acknowledged before the backup started, and a
/// server started on it serves them. Bad targets are exit 2 and touch nothing.
#[test]
fn a_backup_taken_under_writes_is_consistent_and_complete() {
    if sqlite_only("`backup` copies SQLite files; on PostgreSQL it refuses (next test)") {
        return;
    }
    let dir = TempDir::new();
    let s = TestServer::start(&dir.db());
    let acknowledged = Arc::new(Mutex::new(BTreeSet::new()));
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writers: Vec<_> = (0..4)
        .map(|w| {
            let (addr, acknowledged, stop) = (s.addr.clone(), acknowledged.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut id = w * 1_000_000;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    id += 1;
                    let body = format!(r#"{{"id":{id},"name":"p{id}"}}"#);
                    if Req::create(&body)
                        .send_to(&addr)
                        .is_ok_and(|r| r.status == 200)
                    {
                        acknowledged.lock().unwrap().insert(id);
                    }
                }
            })
        })
        .collect();
    // Writes are under way.
    eventually(Duration::from_secs(10), || {
        acknowledged.lock().unwrap().len() >= 50
    });
    let before: BTreeSet<u64> = acknowledged.lock().unwrap().clone();
    let copy = dir.0.join("copy.db");
    let (code, out, err) = run_cli(&[
        "backup",
        copy.to_str().unwrap(),
        "--db",
        dir.db().to_str().unwrap(),
    ]);
    // Writes go on after the backup too.
    let after = acknowledged.lock().unwrap().len();
    eventually(Duration::from_secs(10), || {
        acknowledged.lock().unwrap().len() >= after + 20
    });
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for w in writers {
        w.join().unwrap();
    }
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("written to"), "{out}");
    assert!(!before.is_empty());
    let conn = rusqlite::Connection::open(&copy).unwrap();
    let check: String = conn
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap();
    assert_eq!(check, "ok");
    let mut st = conn
        .prepare("SELECT id FROM plants WHERE principal = 'default'")
        .unwrap();
    let in_copy: BTreeSet<u64> = st
        .query_map([], |r| r.get::<_, i64>(0))
        .unwrap()
        .map(|id| id.unwrap() as u64)
        .collect();
    let missing: Vec<_> = before.difference(&in_copy).collect();
    assert!(
        missing.is_empty(),
        "acknowledged before the backup, not in it: {missing:?}"
    );
    drop(st);
    drop(conn);
    drop(s);
    let restored = TestServer::start(&copy);
    assert_eq!(names(&restored.list()).len(), in_copy.len());
    // No temporary file is left beside it.
    let left: Vec<_> = std::fs::read_dir(&dir.0)
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.contains("partial"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn backup_refuses_bad_targets_with_exit_2_and_writes_nothing() {
    let dir = TempDir::new();
    let db = dir.db();
    let db = db.to_str().unwrap();
    add_token(&dir.db(), "lu", false);
    let existing = dir.0.join("existing.db");
    std::fs::write(&existing, b"keep me").unwrap();
    if on_postgres() {
        let (code, _, err) =
            run_cli(&["backup", existing.to_str().unwrap(), "--db", db, "--force"]);
        assert_eq!(code, 2, "{err}");
        assert!(err.contains("pg_dump"), "{err}");
        assert_eq!(std::fs::read(&existing).unwrap(), b"keep me");
        return;
    }
    let missing_dir = dir.0.join("no-such-dir").join("b.db");
    for (target, extra, why) in [
        (missing_dir.to_str().unwrap(), None, "no directory"),
        (existing.to_str().unwrap(), None, "add --force"),
        (db, Some("--force"), "is the live database"),
        (dir.0.to_str().unwrap(), None, "is a directory"),
    ] {
        let mut args = vec!["backup", target, "--db", db];
        args.extend(extra);
        let (code, _, err) = run_cli(&args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(err.contains(why), "{args:?}: {err}");
    }
    assert_eq!(std::fs::read(&existing).unwrap(), b"keep me");
    let (code, _, err) = run_cli(&["backup", existing.to_str().unwrap(), "--db", db, "--force"]);
    assert_eq!(code, 0, "{err}");
    let (code, out, _) = run_cli(&["token", "list", "--db", existing.to_str().unwrap()]);
    assert_eq!(code, 0);
    assert!(out.contains("lu"), "{out}");
    let (code, _, err) = run_cli(&["backup", "x.db", "--db", ":memory:"]);
    assert_eq!(code, 2, "{err}");
}
