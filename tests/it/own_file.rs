//! A file of its own (docs/testing.md): test control refuses a database file that another
//! process has open, and a reset or restore is 409 while one does (the `token`, `webhook`
//! and `backup` commands go on); a file test control has written is marked, and a server
//! without test control refuses it unless `--allow-test-file` accepts it; a control token
//! the file stores as a principal's is refused; `--db file:…` (a SQLite URI) is refused.

use crate::control::{CONTROL, controlled, ctl, seed_file};
use crate::files::names;
use crate::support::*;
use std::path::Path;
use std::time::Duration;

/// `plant-store serve --addr 127.0.0.1:0 ARGS` with `env` (and no token from the test's
/// environment), in `dir` when given, which must exit within 20 s: (exit code, stderr).
fn refused(args: &[&str], env: &[(&str, &str)], dir: Option<&Path>) -> (i32, String) {
    let mut cmd = plant_store();
    cmd.args(["serve", "--addr", "127.0.0.1:0"])
        .args(args)
        .env_remove("PLANT_STORE_TOKEN")
        .env_remove("PLANT_STORE_CONTROL_TOKEN")
        .env_remove("PLANT_STORE_DB")
        .envs(env.iter().copied());
    if let Some(dir) = dir {
        cmd.current_dir(dir);
    }
    exits(cmd)
}

const WITH_CONTROL: [(&str, &str); 1] = [("PLANT_STORE_CONTROL_TOKEN", CONTROL)];

/// A connection of this (the test's) process on the file, in WAL mode, as any program's.
fn another_process_opens(db: &Path) -> rusqlite::Connection {
    let c = rusqlite::Connection::open(db).unwrap();
    c.busy_timeout(Duration::from_secs(5)).unwrap();
    let _: i64 = c
        .query_row("SELECT count(*) FROM plants", [], |r| r.get(0))
        .unwrap();
    c
}

#[test]
fn test_control_refuses_a_file_another_process_has_open() {
    if sqlite_only("the database file is SQLite's") || without(Feature::TestControl) {
        return;
    }
    let dir = TempDir::new();
    let db = dir.db();
    let path = db.to_str().unwrap();
    let plain = TestServer::start(&db);
    assert_eq!(plain.post(r#"{"id":1,"name":"a"}"#).status, 200);
    let (code, err) = refused(&["--test-control", "--db", path], &WITH_CONTROL, None);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("test control needs the database file to itself")
            && err.contains(&format!("process {} has it open", plain.pid())),
        "{err}"
    );
    // The refused start changed nothing: the file is not marked, the server goes on.
    assert_eq!(plain.post(r#"{"id":2,"name":"b"}"#).status, 200);
    assert!(plain.stop().success());
    let again = TestServer::start(&db);
    assert_eq!(again.list(), r#"[{"name":"a"},{"name":"b"}]"#);
    assert!(again.stop().success());
    // Any program with it open in WAL mode, such as this test.
    let reader = another_process_opens(&db);
    let (code, err) = refused(&["--test-control", "--db", path], &WITH_CONTROL, None);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains(&format!("process {} has it open", std::process::id())),
        "{err}"
    );
    drop(reader);
    let s = controlled(path).start();
    s.log_when(|l| l.contains("test control is on"));
}

#[test]
fn a_reset_or_restore_is_409_while_another_process_has_the_file_open() {
    if sqlite_only("the database file is SQLite's") || without(Feature::TestControl) {
        return;
    }
    let dir = TempDir::new();
    let db = dir.db();
    let path = db.to_str().unwrap();
    let s = controlled(path).start();
    assert_eq!(s.post(r#"{"id":1,"name":"a"}"#).status, 200);
    let r = s.request(&ctl("POST", "/_control/snapshots"));
    assert_eq!(r.status, 201, "{}", r.text());
    let restore = format!(
        "/_control/snapshots/{}/restore",
        r.json()["id"].as_str().unwrap()
    );
    // The commands on the file go on meanwhile.
    add_token(&db, "ann", false);
    let copy = dir.0.join("copy.db");
    let (code, _, err) = run_cli(&["backup", copy.to_str().unwrap(), "--db", path]);
    assert_eq!(code, 0, "{err}");
    let reader = another_process_opens(&db);
    let held = format!("process {} has it open", std::process::id());
    for path in ["/_control/reset", restore.as_str()] {
        let r = s.request(&ctl("POST", path));
        assert_eq!(r.status, 409, "{path}: {}", r.text());
        let message = r.json()["message"].as_str().unwrap().to_owned();
        assert!(
            message.contains("not this server's alone") && message.contains(&held),
            "{message}"
        );
    }
    assert_eq!(s.list(), r#"[{"name":"a"}]"#, "nothing was rewound");
    drop(reader);
    assert_eq!(s.request(&ctl("POST", restore.as_str())).status, 204);
    assert_eq!(s.request(&ctl("POST", "/_control/reset")).status, 204);
    assert_eq!(s.list(), "[]");
}

#[test]
fn a_file_test_control_wrote_is_refused_without_it_unless_allowed() {
    if sqlite_only("the database file is SQLite's") || without(Feature::TestControl) {
        return;
    }
    let dir = TempDir::new();
    let db = dir.db();
    let path = db.to_str().unwrap();
    let s = controlled(path).arg("--test-seed 42").start();
    let minted = crate::control::mint(&s, r#"{"principal":"p1"}"#);
    let minted = minted["token"].as_str().unwrap().to_owned();
    // A reset goes back to the state at start, which is marked already.
    assert_eq!(s.request(&ctl("POST", "/_control/reset")).status, 204);
    let minted = {
        let again = crate::control::mint(&s, r#"{"principal":"p1"}"#);
        assert_eq!(again["token"].as_str().unwrap(), minted, "--test-seed");
        minted
    };
    assert!(s.stop().success());
    let before = std::fs::read(&db).unwrap();
    let files = names(&dir.0);
    let (code, err) = refused(&["--db", path], &[], None);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("was written by a server with test control")
            && err.contains("--allow-test-file")
            && err.contains("PLANT_STORE_ALLOW_TEST_FILE=1"),
        "{err}"
    );
    assert!(
        std::fs::read(&db).unwrap() == before,
        "the file was changed"
    );
    assert_eq!(names(&dir.0), files, "files were left behind");
    // A backup keeps the mark.
    let copy = dir.0.join("copy.db");
    let (code, _, err) = run_cli(&["backup", copy.to_str().unwrap(), "--db", path]);
    assert_eq!(code, 0, "{err}");
    let (code, err) = refused(&["--db", copy.to_str().unwrap()], &[], None);
    assert_eq!(code, 2, "{err}");
    // Accepted when asked, by the flag or the variable; so is test control again.
    let s = Launch::new(&db).arg("--allow-test-file").start();
    assert_eq!(
        s.request(&Req::get("/plants").token(&minted)).status,
        200,
        "the operator accepted the file, tokens and all"
    );
    assert!(s.stop().success());
    let s = Launch::new(&copy)
        .env("PLANT_STORE_ALLOW_TEST_FILE", "1")
        .start();
    assert!(s.stop().success());
    let s = controlled(path).start();
    assert!(s.stop().success());
    // A file test control never wrote is served as ever.
    let plain = dir.0.join("plain.db");
    let s = TestServer::start(&plain);
    assert!(s.stop().success());
    assert!(TestServer::start(&plain).stop().success());
}

#[test]
fn a_control_token_the_file_stores_as_a_principals_is_refused() {
    if sqlite_only("the database file is SQLite's") || without(Feature::TestControl) {
        return;
    }
    let dir = TempDir::new();
    let db = dir.db();
    let path = db.to_str().unwrap();
    let stored = "seeded-token-that-becomes-control";
    let seed = seed_file(
        &dir,
        &format!(r#"{{"tokens":[{{"token":"{stored}","principal":"alice"}}]}}"#),
    );
    let s = controlled(path).arg(&format!("--seed {seed}")).start();
    assert!(s.stop().success());
    let (code, err) = refused(
        &["--test-control", "--db", path],
        &[("PLANT_STORE_CONTROL_TOKEN", stored)],
        None,
    );
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("PLANT_STORE_CONTROL_TOKEN is stored in")
            && err.contains("the control token is no principal's"),
        "{err}"
    );
    assert!(!err.contains(stored), "the message shows the token: {err}");
}

#[test]
fn a_sqlite_uri_as_db_is_refused_naming_where_it_was_read() {
    let dir = TempDir::new();
    let (code, err) = refused(&["--db", "file:uri.db"], &[], Some(&dir.0));
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("--db takes a path, not a SQLite URI (`file:uri.db`)"),
        "{err}"
    );
    let (code, err) = refused(
        &[],
        &[("PLANT_STORE_DB", "file:uri.db?mode=rwc")],
        Some(&dir.0),
    );
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("PLANT_STORE_DB takes a path"), "{err}");
    let out = plant_store()
        .args(["token", "add", "ann", "--create", "--db", "file:uri.db"])
        .current_dir(&dir.0)
        .env_remove("PLANT_STORE_DB")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(names(&dir.0).is_empty(), "{:?}", names(&dir.0));
    // A file whose name begins with `file:` is given as a path.
    if sqlite_only("files are SQLite's") {
        return;
    }
    let s = Launch::new(Path::new("./file:uri.db")).dir(&dir.0).start();
    assert!(s.stop().success());
    assert!(dir.0.join("file:uri.db").exists());
    assert!(!dir.0.join("uri.db").exists());
}
