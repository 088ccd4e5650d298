//! The file guard (docs/operating.md, "The database file"): once a server has seen that
//! its database file was swapped (another file renamed over it) or written over in place
//! (another plant-store file copied into it), not a byte of its own reaches that file: no
//! write, no checkpoint at the stop nor SQLite's on close, no retention sweep, no webhook
//! claim; and nothing of it is applied to that file by the next start either. The stop
//! past `--drain-timeout` skips the final checkpoint, and answers (and logs) nothing to a
//! client whose request it cut off.

use crate::files::beside;
use crate::support::*;
use crate::webhooks::add_webhook;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

#[derive(Debug, Clone, Copy)]
enum Swap {
    /// Another file renamed over the path (`mv other.db plants.db`).
    Rename,
    /// Another file's bytes copied into the live file (`cp other.db plants.db`: the same
    /// inode).
    InPlace,
}

/// What writes to a database file.
#[derive(Debug, Clone, Copy)]
enum Writer {
    /// A create.
    Write,
    /// The stop alone: its checkpoint, and SQLite's on close.
    Stop,
    /// The retention sweep.
    Sweep,
    /// A webhook delivery's claim on its endpoint.
    Claim,
}

/// Another plant-store file, as one of its servers left it (stopped: checkpointed, no
/// `-wal`), holding one plant of the test token, "theirs".
fn another_plant_store_file(dir: &Path) -> PathBuf {
    let other = dir.join("other.db");
    let s = TestServer::start(&other);
    assert_eq!(s.post(r#"{"id":1,"name":"theirs"}"#).status, 200);
    assert!(s.stop().success());
    assert!(!beside(&other, "-wal").exists());
    other
}

/// The bytes of a file.
fn bytes(path: &Path) -> Vec<u8> {
    std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// One case of the property: a server with 20 acknowledged creates; its file swapped;
/// then the thing that writes, done (or tried) once the guard can see the swap; then the
/// stop. The file at the path holds exactly the other file's bytes, a new server on it
/// serves the other file's plants only, and (renamed) the server's own file, kept under
/// another name, holds every create it acknowledged.
fn case(swap: Swap, writer: Writer) {
    let dir = TempDir::new();
    let db = dir.db();
    let receiver = Receiver::start();
    let mut launch = Launch::new(&db);
    match writer {
        Writer::Sweep => launch = launch.arg("--event-retention 1"),
        Writer::Claim => {
            // Every attempt fails, and the next is due a second later: a claim each time.
            receiver.set_default(Answer::status(500));
            add_webhook(&db, "default", &receiver.url());
            launch = launch.arg("--webhook-schedule 1s,1s,1s,1s,1s,1s,1s,1s,1s,1s");
        }
        Writer::Write | Writer::Stop => {}
    }
    let s = launch.start();
    for id in 1..=20 {
        let r = s.post(&format!(r#"{{"id":{id},"name":"ours-{id}"}}"#));
        assert_eq!(r.status, 200, "{}", r.text());
    }
    if let Writer::Claim = writer {
        receiver.wait_for(1, Duration::from_secs(10));
    }
    let kept = dir.0.join("kept.db");
    std::fs::hard_link(&db, &kept).unwrap();
    let other = another_plant_store_file(&dir.0);
    let theirs = bytes(&other);
    match swap {
        Swap::Rename => std::fs::rename(&other, &db).unwrap(),
        Swap::InPlace => {
            std::fs::copy(&other, &db).unwrap();
        }
    }
    let case = format!("{swap:?} then {writer:?}");
    match writer {
        Writer::Write => {
            let r = s.post(r#"{"id":100,"name":"after the swap"}"#);
            assert_eq!(r.status, 500, "{case}: {}", r.text());
        }
        Writer::Stop => {}
        Writer::Sweep => {
            s.log_when(|l| l.contains("the event retention sweep failed"));
        }
        Writer::Claim => {
            // The claim refused (or, in place, the endpoints not even readable).
            eventually(Duration::from_secs(10), || {
                let log = s.log();
                log.contains("cannot claim it") || log.contains("cannot read the webhook endpoints")
            });
        }
    }
    assert!(s.stop().success(), "{case}");
    assert!(bytes(&db) == theirs, "{case}: the file was written to");
    // Nothing of this server's is applied to it by the next start either.
    let next = TestServer::start(&db);
    assert_eq!(next.list(), r#"[{"name":"theirs"}]"#, "{case}");
    assert!(next.stop().success());
    if let Swap::Rename = swap {
        let own = TestServer::start(&kept);
        let listed = own.list();
        for id in 1..=20 {
            assert!(
                listed.contains(&format!("\"ours-{id}\"")),
                "{case}: {listed}"
            );
        }
    }
}

#[test]
fn a_swapped_file_gets_nothing_of_the_server_that_saw_it_swapped() {
    if sqlite_only("the database file is SQLite's") {
        return;
    }
    let mut writers = vec![Writer::Write, Writer::Stop, Writer::Sweep];
    if !without(Feature::Webhooks) {
        writers.push(Writer::Claim);
    }
    // Every case is run, and every one that fails is named.
    let mut failed = Vec::new();
    for writer in writers {
        for swap in [Swap::Rename, Swap::InPlace] {
            if std::panic::catch_unwind(|| case(swap, writer)).is_err() {
                failed.push(format!("{swap:?} then {writer:?}"));
            }
        }
    }
    assert!(failed.is_empty(), "failed: {failed:?}");
}

/// Written over in place, the server says so, keeps refusing even if the file's header
/// looks right again, and moves its WAL (which belongs to what was there before) aside.
#[test]
fn written_over_in_place_is_for_good_and_the_wal_is_moved_aside() {
    if sqlite_only("the database file is SQLite's") {
        return;
    }
    let dir = TempDir::new();
    let db = dir.db();
    let s = TestServer::start(&db);
    assert_eq!(s.post(r#"{"id":1,"name":"ours"}"#).status, 200);
    let before = bytes(&db);
    let other = another_plant_store_file(&dir.0);
    std::fs::copy(&other, &db).unwrap();
    assert_eq!(s.get("/healthz").status, 503);
    s.log_when(|l| l.contains("was written over by another program"));
    // The old bytes back: still not this server's file (its WAL no longer matches what
    // may have been read meanwhile).
    std::fs::write(&db, &before).unwrap();
    assert_eq!(s.post(r#"{"id":2,"name":"b"}"#).status, 500);
    assert!(s.stop().success());
    let aside: Vec<String> = crate::files::names(&dir.0)
        .into_iter()
        .filter(|n| n.starts_with("plants.db-wal.not-applied-"))
        .collect();
    assert_eq!(aside.len(), 1, "{:?}", crate::files::names(&dir.0));
    assert!(!beside(&db, "-wal").exists());
}

/// Past `--drain-timeout` the server exits 0 without the final checkpoint (every
/// acknowledged write is in the WAL, which the next start applies), and a client whose
/// request body was still arriving gets nothing, and no answer is logged for it.
#[test]
fn past_the_drain_timeout_it_exits_without_the_checkpoint_and_answers_no_one() {
    if sqlite_only("the checkpoint is SQLite's") {
        return;
    }
    let dir = TempDir::new();
    let db = dir.db();
    let s = Launch::new(&db).arg("--drain-timeout 1").start();
    for id in 1..=5 {
        assert_eq!(
            s.post(&format!(r#"{{"id":{id},"name":"p{id}"}}"#)).status,
            200
        );
    }
    let mut half = s.connect();
    half.write_all(
        format!(
            "POST /plants HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\nContent-Type: application/json\r\nContent-Length: 40\r\n\r\n{{\"id\":9,\""
        )
        .as_bytes(),
    )
    .unwrap();
    // The request is under way (its head read, after the five creates') before the stop.
    s.log_when(|l| {
        l.matches("a request head was read; its body is awaited")
            .count()
            == 6
    });
    let started = Instant::now();
    let mut s = s;
    s.signal(libc::SIGTERM);
    let status = s.child.wait().unwrap();
    assert!(status.success(), "{status:?}");
    // The log's last lines reach the reader thread after the exit.
    let log = s.log_when(|l| l.contains("stopped"));
    assert!(started.elapsed() < Duration::from_secs(5));
    assert!(
        log.contains("database closed without the final checkpoint"),
        "{log}"
    );
    assert!(!log.contains("database checkpointed"), "{log}");
    assert!(
        !log.lines().any(|l| l.contains(" 400 ")),
        "an answer was logged for a request cut off:\n{log}"
    );
    let mut answer = Vec::new();
    let _ = std::io::Read::read_to_end(&mut half, &mut answer);
    assert!(answer.is_empty(), "{}", String::from_utf8_lossy(&answer));
    assert!(std::fs::metadata(beside(&db, "-wal")).unwrap().len() > 0);
    drop(s);
    let s = TestServer::start(&db);
    assert_eq!(
        s.list(),
        r#"[{"name":"p1"},{"name":"p2"},{"name":"p3"},{"name":"p4"},{"name":"p5"}]"#
    );
}
