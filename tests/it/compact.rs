//! Compaction (docs/device.md, "Flash wear"): a database file made with 4 KiB pages
//! (an older version's) is written again with 1 KiB pages at a server's start when nobody
//! else has it open, or by `plant-store compact` (refused while a server has it open),
//! atomically: killed at any step, the old file or the new one is there, whole, with every
//! write acknowledged before, and the next start finishes the work. Its test-control mark
//! and its identity are kept. A device build (no test control) runs it all on unmarked
//! files.

use crate::files::names;
use crate::support::*;
use std::path::Path;

/// The page size in a SQLite file's header.
fn page_size(db: &Path) -> u32 {
    let h = std::fs::read(db).unwrap();
    match u16::from_be_bytes([h[16], h[17]]) {
        1 => 65536,
        p => u32::from(p),
    }
}

/// Makes `db`, a file this version made, into one with 4 KiB pages, as an older version
/// made them (`VACUUM` with another page size, as `benches/flash.sh`'s PAGES does).
fn with_4_kib_pages(db: &Path) {
    let c = rusqlite::Connection::open(db).unwrap();
    c.execute_batch(
        "PRAGMA journal_mode=DELETE; PRAGMA page_size=4096; VACUUM; PRAGMA journal_mode=WAL;",
    )
    .unwrap();
    drop(c);
    assert_eq!(page_size(db), 4096);
}

/// A server on `db`, with test control when the binary has it (the file is then marked,
/// and the mark is kept through the compaction); a device build has none.
fn server(db: &str) -> Launch<'_> {
    if without(Feature::TestControl) {
        Launch {
            db,
            ..Launch::memory()
        }
    } else {
        crate::control::controlled(db)
    }
}

/// A file with 20 plants of the test token, its test-control mark (with test control),
/// then 4 KiB pages.
fn an_old_file(dir: &TempDir) -> std::path::PathBuf {
    let db = dir.db();
    let s = server(db.to_str().unwrap()).start();
    for id in 1..=20 {
        assert_eq!(
            s.post(&format!(r#"{{"id":{id},"name":"p{id}"}}"#)).status,
            200
        );
    }
    assert!(s.stop().success());
    with_4_kib_pages(&db);
    db
}

fn all_twenty() -> String {
    let names: Vec<String> = (1..=20).map(|i| format!(r#"{{"name":"p{i}"}}"#)).collect();
    format!("[{}]", names.join(","))
}

/// `PRAGMA integrity_check` and the test-control mark of a file no server has open.
fn intact_and_marked(db: &Path) {
    let c = rusqlite::Connection::open(db).unwrap();
    let ok: String = c
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap();
    assert_eq!(ok, "ok");
    if without(Feature::TestControl) {
        return;
    }
    let marks: i64 = c
        .query_row("SELECT count(*) FROM test_control", [], |r| r.get(0))
        .unwrap();
    // A row per start with test control: the mark is kept through the compaction.
    assert!(marks >= 1, "the test-control mark is gone");
}

#[test]
fn an_old_file_is_rewritten_with_small_pages_at_start() {
    if sqlite_only("pages are SQLite's") {
        return;
    }
    crate::files::usual_umask();
    let dir = TempDir::new();
    let db = an_old_file(&dir);
    let s = server(db.to_str().unwrap()).start();
    s.log_when(|l| l.contains("rewritten with 1024-byte pages (was 4096)"));
    assert_eq!(s.list(), all_twenty());
    assert_eq!(s.post(r#"{"id":21,"name":"after"}"#).status, 200);
    assert!(s.stop().success());
    assert_eq!(page_size(&db), 1024);
    assert_eq!(
        std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&db).unwrap().permissions())
            & 0o777,
        0o600
    );
    intact_and_marked(&db);
    assert!(
        names(&dir.0).iter().all(|n| !n.contains("compact")),
        "{:?}",
        names(&dir.0)
    );
}

#[test]
fn an_old_file_another_process_has_open_is_served_as_it_is() {
    if sqlite_only("pages are SQLite's") {
        return;
    }
    let dir = TempDir::new();
    let db = an_old_file(&dir);
    let reader = rusqlite::Connection::open(&db).unwrap();
    let _: i64 = reader
        .query_row("SELECT count(*) FROM plants", [], |r| r.get(0))
        .unwrap();
    let s = Launch::new(&db).arg("--allow-test-file").start();
    s.log_when(|l| {
        l.contains(&format!(
            "keeps its 4096-byte pages (process {} has it open)",
            std::process::id()
        ))
    });
    assert_eq!(s.list(), all_twenty());
    // `compact` refuses too, while a server has it open; the file is as it was.
    let before = std::fs::read(&db).unwrap();
    let (code, out, err) = run_cli(&["compact", "--db", db.to_str().unwrap()]);
    assert_eq!(code, 1, "{out}{err}");
    // (F_GETLK names one holder: the server, or this test.)
    assert!(
        (err.contains(&format!("process {} has it open", s.pid()))
            || err.contains(&format!("process {} has it open", std::process::id())))
            && err.contains("stop the server first"),
        "{err}"
    );
    assert!(std::fs::read(&db).unwrap() == before);
    assert!(s.stop().success());
    drop(reader);
    assert_eq!(page_size(&db), 4096);
}

#[test]
fn compact_rewrites_a_file_no_server_has_open() {
    if sqlite_only("pages are SQLite's") {
        return;
    }
    let dir = TempDir::new();
    let db = an_old_file(&dir);
    let path = db.to_str().unwrap();
    let (code, out, err) = run_cli(&["compact", "--db", path]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("rewritten with 1024-byte pages (was 4096)"),
        "{out}"
    );
    assert_eq!(page_size(&db), 1024);
    intact_and_marked(&db);
    let (code, out, err) = run_cli(&["compact", "--db", path]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("its pages are no larger than 1024 bytes already"),
        "{out}"
    );
    let s = server(path).start();
    assert_eq!(s.list(), all_twenty());
    drop(s);
    for (args, said) in [
        (
            &["compact", "--db", ":memory:"][..],
            "needs a database file",
        ),
        (
            &["compact", "--db", dir.0.join("none.db").to_str().unwrap()],
            "no database at",
        ),
    ] {
        let (code, _, err) = run_cli(args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(err.contains(said), "{args:?}: {err}");
    }
}

/// Killed at each step of the rewrite at start (`PLANT_STORE_FAULT_COMPACT` stops it
/// there), with writes acknowledged before still only in the WAL: the next start serves
/// the file whole, with them, and with 1 KiB pages.
#[cfg(feature = "fault-injection")]
#[test]
fn killed_at_any_step_of_a_compaction_the_old_file_or_the_new_one_is_whole() {
    use std::io::{BufRead, BufReader};
    use std::process::Stdio;
    if sqlite_only("pages are SQLite's") {
        return;
    }
    for step in ["checkpointed", "copied", "synced", "renamed"] {
        let dir = TempDir::new();
        let db = an_old_file(&dir);
        // A token stored in the WAL only (not checkpointed): an acknowledged write.
        let token = "a-token-only-in-the-wal-0123456789";
        {
            use sha2::Digest;
            let c = rusqlite::Connection::open(&db).unwrap();
            c.set_db_config(
                rusqlite::config::DbConfig::SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE,
                true,
            )
            .unwrap();
            let hash = sha2::Sha256::digest(token.as_bytes()).to_vec();
            c.execute(
                "INSERT INTO tokens (public_id, hash, principal, scope, created_at) \
                 VALUES ('0000walt', ?1, 'default', 'read-write', 0)",
                [hash],
            )
            .unwrap();
        }
        assert!(
            std::fs::metadata(crate::files::beside(&db, "-wal"))
                .unwrap()
                .len()
                > 0
        );
        let mut child = plant_store()
            .args([
                "serve",
                "--addr",
                "127.0.0.1:0",
                "--db",
                db.to_str().unwrap(),
            ])
            .args(["--log-level", "debug"])
            .args((!without(Feature::TestControl)).then_some("--test-control"))
            .env("PLANT_STORE_CONTROL_TOKEN", crate::control::CONTROL)
            .env("PLANT_STORE_FAULT_COMPACT", step)
            .env_remove("PLANT_STORE_TOKEN")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // The log, line by line, from a thread: a pause that never comes fails in time.
        let (lines, log) = std::sync::mpsc::channel();
        let err = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(err).lines().map_while(Result::ok) {
                let _ = lines.send(line);
            }
        });
        let paused = format!("compaction stopped at {step}");
        loop {
            match log.recv_timeout(std::time::Duration::from_secs(30)) {
                Ok(line) if line.contains(&paused) => break,
                Ok(_) => {}
                Err(e) => {
                    let _ = child.kill();
                    panic!("{step}: no pause ({e})");
                }
            }
        }
        child.kill().unwrap();
        child.wait().unwrap();
        let s = server(db.to_str().unwrap()).start();
        assert_eq!(s.list(), all_twenty(), "{step}");
        let r = s.request(&Req::get("/plants?limit=1").token(token));
        assert_eq!(r.status, 200, "{step}: the token in the WAL");
        assert!(s.stop().success());
        assert_eq!(page_size(&db), 1024, "{step}");
        intact_and_marked(&db);
        assert!(
            names(&dir.0).iter().all(|n| !n.contains("compact")),
            "{step}: {:?}",
            names(&dir.0)
        );
    }
}

/// A compaction keeps the file's mode and owner: a file an operator made 0640 stays so,
/// and one of the service's user stays the service's when `compact` runs as root (the
/// owner part only when this suite runs as root).
#[test]
fn a_compacted_file_keeps_its_mode_and_its_owner() {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    if sqlite_only("pages are SQLite's") {
        return;
    }
    let root = unsafe { libc::geteuid() } == 0;
    let dir = TempDir::new();
    let db = an_old_file(&dir);
    std::fs::set_permissions(&db, std::fs::Permissions::from_mode(0o640)).unwrap();
    if root {
        std::os::unix::fs::chown(&db, Some(65534), Some(65534)).unwrap();
    }
    let path = db.to_str().unwrap();
    let (code, out, err) = run_cli(&["compact", "--db", path]);
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(page_size(&db), 1024);
    let m = std::fs::metadata(&db).unwrap();
    assert_eq!(m.mode() & 0o7777, 0o640);
    if root {
        assert_eq!((m.uid(), m.gid()), (65534, 65534));
    }
    // At a server's start too.
    let dir = TempDir::new();
    let db = an_old_file(&dir);
    std::fs::set_permissions(&db, std::fs::Permissions::from_mode(0o640)).unwrap();
    let s = server(db.to_str().unwrap()).start();
    s.log_when(|l| l.contains("rewritten with 1024-byte pages"));
    assert_eq!(s.list(), all_twenty());
    assert!(s.stop().success());
    assert_eq!(page_size(&db), 1024);
    let m = std::fs::metadata(&db).unwrap();
    assert_eq!(m.mode() & 0o7777, 0o640);
}
