//! PostgreSQL only: a group commit whose answer is lost or never comes (through a proxy
//! that cuts the connection) is answered by what happened, and a group that fails
//! answers a write given by its token as checking the token first would.

use crate::support::*;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// What a proxy between plant-store and PostgreSQL does to the next group commit (the
/// query that writes the group's marker row).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Cut {
    Pass = 0,
    /// The connection is cut before the query reaches the database.
    Before = 1,
    /// The query reaches the database and commits; its answer is lost with the connection.
    After = 2,
    /// The query reaches the database and commits; its answer never comes, and the
    /// connection stays open until `Cutter::release`.
    Stall = 3,
}

/// A TCP proxy to the cluster that cuts one group commit the way it is armed.
struct Cutter {
    port: u16,
    mode: std::sync::Arc<std::sync::atomic::AtomicU8>,
    released: std::sync::Arc<AtomicBool>,
}

impl Cutter {
    fn start(to: u16) -> Cutter {
        use std::io::{Read, Write};
        use std::net::{Shutdown, TcpListener, TcpStream};
        use std::sync::Arc;
        use std::sync::atomic::AtomicU8;
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let mode = Arc::new(AtomicU8::new(Cut::Pass as u8));
        let released = Arc::new(AtomicBool::new(false));
        let (armed, release) = (mode.clone(), released.clone());
        std::thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(mut client) = client else { return };
                let Ok(mut server) = TcpStream::connect(("127.0.0.1", to)) else {
                    continue;
                };
                let (mut from_server, mut to_client) =
                    (server.try_clone().unwrap(), client.try_clone().unwrap());
                let deaf = Arc::new(AtomicBool::new(false));
                let deaf_b = deaf.clone();
                std::thread::spawn(move || {
                    let mut buf = [0u8; 16384];
                    while let Ok(n @ 1..) = from_server.read(&mut buf) {
                        if deaf_b.load(Ordering::SeqCst) || to_client.write_all(&buf[..n]).is_err()
                        {
                            break;
                        }
                    }
                });
                let (armed, release) = (armed.clone(), release.clone());
                std::thread::spawn(move || {
                    let mut buf = [0u8; 65536];
                    let mut tail: Vec<u8> = Vec::new();
                    while let Ok(n @ 1..) = client.read(&mut buf) {
                        tail.extend_from_slice(&buf[..n]);
                        let commit = tail
                            .windows(30)
                            .any(|w| w == b"INSERT INTO plant_store_groups");
                        let keep = tail.len().saturating_sub(40);
                        let cut = if commit {
                            armed.swap(Cut::Pass as u8, Ordering::SeqCst)
                        } else {
                            Cut::Pass as u8
                        };
                        if cut == Cut::After as u8 || cut == Cut::Stall as u8 {
                            deaf.store(true, Ordering::SeqCst);
                        }
                        if cut != Cut::Before as u8 && server.write_all(&buf[..n]).is_err() {
                            break;
                        }
                        if cut == Cut::Stall as u8 {
                            // The proxy holds the answer until the test releases it.
                            while !release.load(Ordering::SeqCst) {
                                std::thread::sleep(Duration::from_millis(50));
                            }
                        }
                        if cut != Cut::Pass as u8 {
                            // The proxy's behaviour, not a wait for a state: the commit
                            // (After) goes on at the database for a moment, then the cut.
                            std::thread::sleep(Duration::from_millis(300));
                            let _ = client.shutdown(Shutdown::Both);
                            let _ = server.shutdown(Shutdown::Both);
                            break;
                        }
                        tail.drain(..keep);
                    }
                    let _ = server.shutdown(Shutdown::Both);
                    let _ = client.shutdown(Shutdown::Both);
                });
            }
        });
        Cutter {
            port,
            mode,
            released,
        }
    }

    /// Ends a stall: the connection is cut.
    fn release(&self) {
        self.released.store(true, Ordering::SeqCst);
    }

    fn arm(&self, cut: Cut) {
        self.mode.store(cut as u8, Ordering::SeqCst);
    }
}

/// A fresh database, its URL, a `Cutter` in front of the cluster, and a server that
/// reaches the database through it.
fn behind_a_cutter() -> (TempDir, std::path::PathBuf, Cutter, TestServer) {
    let dir = TempDir::new();
    let cluster = shared_cluster();
    let cutter = Cutter::start(cluster.port);
    let direct = dir.db();
    let url = direct.to_str().unwrap().replace(
        &format!(":{}/", cluster.port),
        &format!(":{}/", cutter.port),
    );
    let s = TestServer::start(&std::path::PathBuf::from(url));
    (dir, direct, cutter, s)
}

/// When the connection breaks during a group's commit, a write is answered by what
/// happened: 200, 204, 409 or 404 when the group committed (its answer lost), 500 only
/// when it did not take effect; also a write whose stored token the group looked up
/// (the marker row keeps what the token was found to be: 401 for a token revoked since
/// it was found valid).
#[test]
fn a_write_whose_commit_answer_is_lost_is_answered_by_what_happened() {
    if postgres_only("several instances share one database only on PostgreSQL") {
        return;
    }
    let (_dir, direct, cutter, s) = behind_a_cutter();
    let (ann, bob) = (
        add_token(&direct, "ann", false),
        add_token(&direct, "bob", false),
    );
    // bob's token is found valid (so its writes go to the commit), then revoked.
    assert_eq!(s.post_as(&bob, r#"{"id":9,"name":"b"}"#).status, 200);
    psql(
        &direct,
        "DELETE FROM plants; DELETE FROM tokens WHERE principal = 'bob'",
    );
    let stored = || psql(&direct, "SELECT id FROM plants ORDER BY id").replace('\n', " ");
    let post = |id: i64| s.post(&format!(r#"{{"id":{id},"name":"n{id}"}}"#));
    let post_as =
        |token: &str, id: i64| s.post_as(token, &format!(r#"{{"id":{id},"name":"n{id}"}}"#));
    let delete_as = |id: i64| {
        let path = format!("/plants/{id}");
        s.send("DELETE", &path, &[("Authorization", &bearer(&ann))], None)
    };
    let cases: [(Cut, &dyn Fn() -> Resp, u16, &str); 11] = [
        (Cut::After, &|| post(1), 200, "1"),
        (Cut::Before, &|| post(2), 500, "1"),
        (Cut::After, &|| post(1), 409, "1"),
        (Cut::After, &|| s.delete("1"), 204, ""),
        (Cut::After, &|| s.delete("1"), 404, ""),
        (Cut::Pass, &|| post(3), 200, "3"),
        (Cut::After, &|| post_as(&ann, 5), 200, "3 5"),
        (Cut::After, &|| post_as(&ann, 5), 409, "3 5"),
        (Cut::After, &|| post_as(&bob, 6), 401, "3 5"),
        (Cut::Before, &|| post_as(&ann, 7), 500, "3 5"),
        (Cut::After, &|| delete_as(5), 204, "3"),
    ];
    for &(cut, request, status, left) in &cases {
        cutter.arm(cut);
        let r = request();
        assert_eq!(r.status, status, "{}\n{}", r.text(), s.log());
        assert_eq!(stored().trim(), left);
    }
    // Every cut after a commit was settled by the marker, bob's refused write too.
    let after = cases.iter().filter(|c| matches!(c.0, Cut::After)).count();
    let log = s.log_when(|log| log.matches("writes had committed").count() >= after);
    assert_eq!(log.matches("writes had committed").count(), after, "{log}");
    // The writes of the stored token's principal are in its log once each.
    let r = s.send("GET", "/events", &[("Authorization", &bearer(&ann))], None);
    let kinds: Vec<String> = serde_json::from_str::<Vec<serde_json::Value>>(&r.text())
        .unwrap()
        .iter()
        .map(|e| format!("{} {}", e["seq"], e["type"]))
        .collect();
    assert_eq!(kinds, ["1 \"plant.created\"", "2 \"plant.deleted\""]);
}

/// A commit whose answer never comes (the connection stays up) holds the writer: after
/// 20 s `/healthz` says so (503); once the connection breaks, the write is answered by
/// what happened (it had committed: 200).
#[test]
fn a_commit_whose_answer_never_comes_fails_the_health_check_then_settles() {
    if postgres_only("several instances share one database only on PostgreSQL") {
        return;
    }
    let (_dir, direct, cutter, s) = behind_a_cutter();
    cutter.arm(Cut::Stall);
    std::thread::scope(|scope| {
        let write = scope.spawn(|| {
            // Held past the usual client timeout: a connection that waits a minute.
            let mut c = std::net::TcpStream::connect(&s.addr).unwrap();
            c.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
            let body = r#"{"id":7,"name":"held"}"#;
            let bytes = Req::create(body).bytes();
            std::io::Write::write_all(&mut c, &bytes).unwrap();
            read_response(&mut c).unwrap()
        });
        let started = Instant::now();
        eventually(Duration::from_secs(30), || {
            s.send("GET", "/healthz", &[], None).status == 503
        });
        let after = started.elapsed();
        assert!(after >= Duration::from_secs(19), "503 after {after:?}");
        cutter.release();
        let r = write.join().unwrap();
        assert_eq!(
            (r.status, r.text()),
            (200, r#"{"name":"held"}"#.to_owned()),
            "{}",
            s.log()
        );
    });
    assert_eq!(psql(&direct, "SELECT id FROM plants").trim(), "7");
    eventually(Duration::from_secs(10), || {
        s.send("GET", "/healthz", &[], None).status == 200
    });
}

/// A group that fails (a trigger refuses its marker row) answers a write given by its
/// stored token as checking the token first would: 401 for a token revoked since it was
/// found valid, and for a valid one the failure (500) with its principal in the log and
/// its rate-limit headers. Once the group can commit again, the write is served.
#[test]
fn a_failed_group_answers_a_write_given_by_its_token_as_checking_it_first_would() {
    if postgres_only("a write's token is looked up by its group only on PostgreSQL") {
        return;
    }
    let dir = TempDir::new();
    let db = dir.db();
    let (ann, zed) = (add_token(&db, "ann", false), add_token(&db, "zed", false));
    let s = Launch::new(&db).arg("--rate-limit 100/s").start();
    let post = |token: &str| s.post_as(token, r#"{"id":1,"name":"a"}"#);
    for t in [&ann, &zed] {
        let r = s.send("GET", "/plants", &[("Authorization", &bearer(t))], None);
        assert_eq!(r.status, 200, "found able to write");
    }
    psql(
        &db,
        "CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS \
         $$ BEGIN RAISE EXCEPTION 'refused by the test'; END $$; \
         CREATE TRIGGER refuse BEFORE INSERT ON plant_store_groups \
         FOR EACH ROW EXECUTE FUNCTION refuse(); \
         DELETE FROM tokens WHERE principal = 'zed';",
    );
    let r = post(&zed);
    assert_eq!(
        (r.status, r.text()),
        (
            401,
            r#"{"error":401,"message":"the bearer token is unknown or revoked"}"#.into()
        )
    );
    assert_eq!(r.header("RateLimit"), None);
    let r = post(&ann);
    assert_eq!(r.status, 500, "{}", r.text());
    assert!(r.header("RateLimit").is_some());
    s.log_when(|log| {
        log.lines()
            .any(|l| l.contains("POST /plants 500 ") && l.ends_with(" ann"))
    });
    psql(&db, "DROP TRIGGER refuse ON plant_store_groups");
    eventually(Duration::from_secs(10), || post(&ann).status == 200);
    assert_eq!(
        names(
            &s.send("GET", "/plants", &[("Authorization", &bearer(&ann))], None)
                .text()
        ),
        ["a"]
    );
}
