//! A refused start leaves nothing it made (docs/reference.md, "Start refusals"): `serve` takes
//! its port before it opens the database, so a port in use makes no file; a refusal after
//! the database was opened (a seed file that is not one, a seed that does not fit the
//! store) removes the files the start made, and leaves a file that was there as it was.

use crate::control::seed_file;
use crate::files::names;
use crate::support::*;

/// `plant-store serve ARGS` (no token): (exit code, stderr); it must exit within 20 s.
fn serve(args: &[&str]) -> (i32, String) {
    let mut cmd = plant_store();
    cmd.arg("serve")
        .args(args)
        .env_remove("PLANT_STORE_TOKEN")
        .env_remove("PLANT_STORE_CONTROL_TOKEN");
    exits(cmd)
}

#[test]
fn a_port_in_use_makes_no_database_file() {
    if sqlite_only("the database file is SQLite's") {
        return;
    }
    let dir = TempDir::new();
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let db = dir.db();
    let (code, err) = serve(&["--addr", &addr, "--db", db.to_str().unwrap()]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("cannot listen on"), "{err}");
    assert!(names(&dir.0).is_empty(), "{:?}", names(&dir.0));
}

#[test]
fn a_bad_seed_leaves_no_file_it_made_and_a_file_that_was_there_as_it_was() {
    if sqlite_only("the database file is SQLite's") {
        return;
    }
    let dir = TempDir::new();
    let db = dir.db();
    let path = db.to_str().unwrap();
    // Not a seed: refused before anything is opened.
    let bad = seed_file(&dir, r#"{"plants":[1,2]}"#);
    let (code, err) = serve(&["--addr", "127.0.0.1:0", "--db", path, "--seed", &bad]);
    assert_eq!(code, 2, "{err}");
    assert_eq!(names(&dir.0), [bad.rsplit('/').next().unwrap()]);
    // A seed that does not fit a new file (an id twice): the file it made is removed.
    let twice = seed_file(
        &dir,
        r#"{"plants":{"alice":[{"id":1,"name":"a"},{"id":1,"name":"b"}]}}"#,
    );
    let (code, err) = serve(&["--addr", "127.0.0.1:0", "--db", path, "--seed", &twice]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("plants.alice[1].id"), "{err}");
    assert!(!db.exists(), "{:?}", names(&dir.0));
    assert_eq!(names(&dir.0).len(), 2, "{:?}", names(&dir.0));
    // A file that was there (at an older schema: a start would migrate it) is as it was.
    let s = TestServer::start(&db);
    let alice = add_token(&db, "alice", false);
    assert_eq!(s.post_as(&alice, r#"{"id":1,"name":"kept"}"#).status, 200);
    assert!(s.stop().success());
    {
        let c = rusqlite::Connection::open(&db).unwrap();
        c.execute_batch("DROP TABLE test_control; PRAGMA user_version = 7")
            .unwrap();
    }
    let before = std::fs::read(&db).unwrap();
    let files = names(&dir.0);
    let taken = seed_file(&dir, r#"{"plants":{"alice":[{"id":1,"name":"again"}]}}"#);
    let (code, err) = serve(&["--addr", "127.0.0.1:0", "--db", path, "--seed", &taken]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("already owns a plant with id 1"), "{err}");
    assert!(
        std::fs::read(&db).unwrap() == before,
        "the file was changed"
    );
    let mut after = names(&dir.0);
    after.retain(|n| !n.starts_with("seed-"));
    let mut files = files;
    files.retain(|n| !n.starts_with("seed-"));
    assert_eq!(after, files);
}
