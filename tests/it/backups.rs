//! `backup` and the live file: no litter on any exit, the live database's companions
//! refused by name, and a backup copied over the live file in place detected.

use crate::files::{beside, names};
use crate::support::*;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

/// `backup live.db-wal --db live.db` (and `-shm`, `-journal`) with no server running:
/// the file does not exist, but the name is the live database's; refused with exit 2.
#[test]
fn backup_refuses_the_live_databases_companions_by_name() {
    if sqlite_only("backup copies SQLite files") {
        return;
    }
    let dir = TempDir::new();
    let db = dir.db();
    add_token(&db, "ann", false);
    for suffix in ["-wal", "-shm", "-journal"] {
        let _ = std::fs::remove_file(beside(&db, suffix));
        let target = beside(&db, suffix);
        let (code, _, err) = run_cli(&[
            "backup",
            target.to_str().unwrap(),
            "--db",
            db.to_str().unwrap(),
        ]);
        assert_eq!(code, 2, "{suffix}: {err}");
        assert!(err.contains("live database"), "{err}");
        assert!(!target.exists(), "{suffix}");
    }
    // Also through another spelling of the directory.
    let odd = dir.0.join(".").join("plants.db-wal");
    let (code, _, err) = run_cli(&[
        "backup",
        odd.to_str().unwrap(),
        "--db",
        db.to_str().unwrap(),
    ]);
    assert_eq!(code, 2, "{err}");
    let (code, _, err) = run_cli(&["backup", "--db", db.to_str().unwrap()]);
    assert_eq!(code, 2);
    assert!(
        err.contains("backup needs FILE, where the copy goes: plant-store backup FILE"),
        "{err}"
    );
}

/// SIGTERM during the copy: the backup ends, and neither its partial file nor a
/// `-journal` is left.
#[test]
fn an_interrupted_backup_leaves_nothing() {
    if sqlite_only("backup copies SQLite files") {
        return;
    }
    let dir = TempDir::new();
    let db = dir.db();
    add_token(&db, "ann", false);
    {
        // About 100 MB (rows that fit in their pages): a copy that takes long enough to
        // be interrupted.
        let c = rusqlite::Connection::open(&db).unwrap();
        c.execute_batch(
            "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 100000)
             INSERT INTO plants (principal, id, name) SELECT 'p', i, printf('%.900c', 'x') FROM n;",
        )
        .unwrap();
    }
    let target = dir.0.join("b.db");
    let child = plant_store()
        .args([
            "backup",
            target.to_str().unwrap(),
            "--db",
            db.to_str().unwrap(),
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let partial = || {
        names(&dir.0)
            .into_iter()
            .find(|n| n.contains(".partial-"))
            .map(|n| dir.0.join(n))
    };
    eventually(Duration::from_secs(20), || {
        partial().is_some_and(|p| std::fs::metadata(p).is_ok_and(|m| m.len() > 0))
    });
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("interrupted"), "{err}");
    let left: Vec<String> = names(&dir.0)
        .into_iter()
        .filter(|n| n.contains("partial") || n.ends_with("-journal") || n == "b.db")
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

/// A backup copied over the live database in place (`cp`, same inode) while a server
/// runs: its header (rollback-journal mode) is not the live file's, so writes are
/// refused and `/healthz` fails, instead of checkpointing the WAL into the copy.
#[test]
fn a_backup_copied_over_the_live_file_is_detected() {
    if sqlite_only("the database file is SQLite's") {
        return;
    }
    let dir = TempDir::new();
    let db = dir.db();
    let s = TestServer::start(&db);
    assert_eq!(s.post(r#"{"id":1,"name":"a"}"#).status, 200);
    let copy = dir.0.join("copy.db");
    let (code, _, err) = run_cli(&[
        "backup",
        copy.to_str().unwrap(),
        "--db",
        db.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    let inode = |p: &Path| std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(p).unwrap());
    let before = inode(&db);
    std::fs::copy(&copy, &db).unwrap();
    assert_eq!(inode(&db), before, "written over in place");
    assert_eq!(s.post(r#"{"id":2,"name":"b"}"#).status, 500);
    assert_eq!(s.get("/healthz").status, 503);
    s.log_when(|l| l.contains("was written over by another program"));
}
