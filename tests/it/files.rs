//! The files the program makes and the files it is pointed at: every file it creates is
//! 0600; list commands never write; a file that is not ours is refused untouched; a
//! missing database is not made unless asked; a `-wal` that is not the database's own is
//! never applied; `backup` leaves no litter and refuses the live database's companions.

use crate::support::*;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .permissions()
        .mode()
        & 0o777
}

pub fn beside(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

/// The bytes of a file, to compare before and after a command.
fn bytes(path: &Path) -> Vec<u8> {
    std::fs::read(path).unwrap()
}

/// Runs the binary with `args` (no token), which must exit within 20 s: (exit code,
/// stderr).
fn exits(args: &[&str]) -> (i32, String) {
    let mut cmd = plant_store();
    cmd.args(args).env_remove("PLANT_STORE_TOKEN");
    crate::support::exits(cmd)
}

/// The names in a directory.
pub fn names(dir: &Path) -> Vec<String> {
    let mut n: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    n.sort();
    n
}

/// The usual umask, for this process and so for every program it starts. (It is the
/// default almost everywhere; set here so that a stricter one cannot hide 0644 files.)
pub fn usual_umask() {
    unsafe { libc::umask(0o022) };
}

#[test]
fn every_file_the_program_makes_is_0600_under_umask_022() {
    if sqlite_only("file modes are SQLite's") {
        return;
    }
    usual_umask();
    let dir = TempDir::new();
    let db = dir.db();
    let s = TestServer::start(&db);
    assert_eq!(s.post(r#"{"id":1,"name":"a"}"#).status, 200);
    for f in [db.clone(), beside(&db, "-wal"), beside(&db, "-shm")] {
        assert_eq!(mode(&f), 0o600, "{}", f.display());
    }
    let copy = dir.0.join("copy.db");
    let run = |force: bool| {
        let mut args = vec![
            "backup",
            copy.to_str().unwrap(),
            "--db",
            db.to_str().unwrap(),
        ];
        if force {
            args.push("--force");
        }
        let (code, out, err) = run_cli(&args);
        assert_eq!(code, 0, "{out}{err}");
    };
    run(false);
    assert_eq!(mode(&copy), 0o600, "a new backup");
    // Replacing a backup (0600, as made) gives 0600 again, not SQLite's 0644.
    run(true);
    assert_eq!(mode(&copy), 0o600, "a replaced backup");
    // Nothing else was left beside it.
    let left: Vec<String> = names(&dir.0)
        .into_iter()
        .filter(|n| n.contains("partial") || n.ends_with("-journal"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
    // A database made by `token add --create` too.
    let other = dir.0.join("other.db");
    add_token(&other, "ann", false);
    assert_eq!(mode(&other), 0o600);
    // One made before (0644) is kept as it is, and `serve` says so.
    std::fs::set_permissions(&other, std::fs::Permissions::from_mode(0o644)).unwrap();
    let s = TestServer::start(&other);
    s.log_when(|l| l.contains("has mode 644: others may read it"));
}

/// `token add` and `webhook add` without `--db` would make `./plants.db`, which no
/// server reads: refused with exit 2 and what to do, nothing made.
#[test]
fn an_add_without_a_database_is_refused_unless_asked_to_create_it() {
    if sqlite_only("a missing file is SQLite's") {
        return;
    }
    let dir = TempDir::new();
    for args in [
        &["token", "add", "ann"][..],
        &["webhook", "add", "ann", "http://127.0.0.1:9/h"],
    ]
    .into_iter()
    .filter(has_command)
    {
        let out = plant_store()
            .args(args)
            .current_dir(&dir.0)
            .env_remove("PLANT_STORE_DB")
            .env_remove("PLANT_STORE_TOKEN")
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.contains("no database at plants.db") && err.contains("--create"),
            "{err}"
        );
        assert!(out.stdout.is_empty());
        assert!(names(&dir.0).is_empty(), "{:?}", names(&dir.0));
    }
    let out = plant_store()
        .args(["token", "add", "ann", "--create"])
        .current_dir(&dir.0)
        .env_remove("PLANT_STORE_DB")
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert!(dir.0.join("plants.db").exists());
}

/// Another application's SQLite file: every command, and `serve`, refuse it and leave it
/// as it was (no WAL, no table, its user_version).
#[test]
fn a_file_that_is_not_ours_is_refused_untouched_by_every_command() {
    if sqlite_only("files are SQLite's") {
        return;
    }
    let dir = TempDir::new();
    let foreign = dir.0.join("notes.db");
    {
        let c = rusqlite::Connection::open(&foreign).unwrap();
        c.execute_batch(
            "CREATE TABLE notes (body TEXT); INSERT INTO notes VALUES ('x'); PRAGMA user_version = 3;",
        )
        .unwrap();
    }
    let before = bytes(&foreign);
    let f = foreign.to_str().unwrap();
    let backup = dir.0.join("b.db");
    for args in [
        &["token", "list", "--db", f][..],
        &["webhook", "list", "--db", f],
        &["token", "add", "ann", "--db", f],
        &["token", "revoke", "3f9a1c07", "--db", f],
        &["webhook", "add", "ann", "http://127.0.0.1:9/h", "--db", f],
        &["webhook", "remove", "wh_0000000000000000", "--db", f],
        &["backup", backup.to_str().unwrap(), "--db", f],
        &["serve", "--addr", "127.0.0.1:0", "--db", f],
    ]
    .into_iter()
    .filter(has_command)
    {
        let (code, err) = exits(args);
        assert_ne!(code, 0, "{args:?}");
        assert!(
            err.contains("not a plant-store database"),
            "{args:?}: {err}"
        );
        assert!(bytes(&foreign) == before, "{args:?} changed the file");
    }
    assert_eq!(names(&dir.0), ["notes.db"], "nothing made beside it");
}

/// A database at schema version 5 (the release before webhooks): the list commands read
/// it without migrating it (they say what to run); the file is the same after.
#[test]
fn list_commands_never_write_nor_migrate() {
    if sqlite_only("files are SQLite's") {
        return;
    }
    let dir = TempDir::new();
    let old = dir.0.join("old.db");
    let schema =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/plants.sql")).unwrap();
    let upto5 = schema.split("-- version 6").next().unwrap();
    {
        let c = rusqlite::Connection::open(&old).unwrap();
        c.execute_batch(upto5).unwrap();
        c.execute_batch("PRAGMA journal_mode = WAL; PRAGMA user_version = 5;")
            .unwrap();
    }
    let before = bytes(&old);
    for args in [&["token", "list"][..], &["webhook", "list"]]
        .into_iter()
        .filter(has_command)
    {
        let mut all = args.to_vec();
        all.extend(["--db", old.to_str().unwrap()]);
        let (code, out, err) = run_cli(&all);
        assert_ne!(code, 0, "{args:?}: {out}");
        assert!(
            err.contains("schema version 5") && err.contains("plant-store serve"),
            "{args:?}: {err}"
        );
        assert!(bytes(&old) == before, "{args:?} changed the file");
    }
    // On a current database, a list leaves the file as it was too.
    let db = dir.db();
    add_token(&db, "ann", false);
    let before = bytes(&db);
    for args in [&["token", "list"][..], &["webhook", "list"]]
        .into_iter()
        .filter(has_command)
    {
        let mut all = args.to_vec();
        all.extend(["--db", db.to_str().unwrap()]);
        let (code, out, err) = run_cli(&all);
        assert_eq!(code, 0, "{args:?}: {err}");
        if args[0] == "token" {
            assert!(out.contains("ann"), "{out}");
        }
        assert!(bytes(&db) == before, "{args:?} changed the file");
    }
}

/// A database replaced by a backup (renamed over it) while the old file's WAL is left
/// beside it: the next opener refuses to apply that WAL to the new file.
#[test]
fn a_wal_left_by_another_file_is_never_applied() {
    if sqlite_only("WAL files are SQLite's") {
        return;
    }
    let dir = TempDir::new();
    let db = dir.db();
    let s = TestServer::start(&db);
    assert_eq!(s.post(r#"{"id":1,"name":"in the copy"}"#).status, 200);
    let copy = dir.0.join("copy.db");
    let (code, _, err) = run_cli(&[
        "backup",
        copy.to_str().unwrap(),
        "--db",
        db.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    for i in 2..40 {
        assert_eq!(
            s.post(&format!(r#"{{"id":{i},"name":"after"}}"#)).status,
            200
        );
    }
    s.signal(libc::SIGKILL);
    let wal = beside(&db, "-wal");
    assert!(
        std::fs::metadata(&wal).unwrap().len() > 0,
        "the WAL holds frames"
    );
    std::fs::rename(&copy, &db).unwrap();
    let before = bytes(&db);
    let (code, err) = exits(&[
        "serve",
        "--addr",
        "127.0.0.1:0",
        "--db",
        db.to_str().unwrap(),
    ]);
    assert_ne!(code, 0);
    assert!(err.contains("is not the write-ahead log of"), "{err}");
    let (code, err) = exits(&["token", "add", "ann", "--db", db.to_str().unwrap()]);
    assert_ne!(code, 0);
    assert!(err.contains("is not the write-ahead log of"), "{err}");
    assert!(bytes(&db) == before, "the file was changed");
    // Moved aside as the message says, the copy opens and holds what it held.
    std::fs::rename(&wal, dir.0.join("old-wal")).unwrap();
    let _ = std::fs::remove_file(beside(&db, "-shm"));
    let s = TestServer::start(&db);
    assert_eq!(s.list(), r#"[{"name":"in the copy"}]"#);
}

#[test]
fn help_names_every_column_of_token_list() {
    let (code, out, _) = run_cli(&["--help"]);
    assert_eq!(code, 0);
    let line = out
        .split("plant-store token list")
        .nth(1)
        .unwrap()
        .split("plant-store token revoke")
        .next()
        .unwrap()
        .to_owned();
    assert!(line.contains("expires"), "{line}");
}

/// Under `log_statement = 'mod'` PostgreSQL logs every INSERT and UPDATE with its bind
/// parameters: `webhook add` writes the secret through `COPY … FROM STDIN` instead, whose
/// data no log setting shows.
#[test]
fn webhook_add_keeps_the_secret_out_of_postgresqls_log() {
    if without(Feature::Webhooks) {
        return;
    }
    if postgres_only("the statement log is PostgreSQL's") {
        return;
    }
    let cluster = Cluster::start();
    cluster.psql("postgres", "ALTER SYSTEM SET log_statement = 'mod'");
    cluster.psql("postgres", "SELECT pg_reload_conf()");
    cluster.psql("postgres", "CREATE DATABASE hooks");
    let url = cluster.url("hooks");
    let (code, out, err) = run_cli(&[
        "webhook",
        "add",
        "ann",
        "http://127.0.0.1:9/h",
        "--db",
        &url,
    ]);
    assert_eq!(code, 0, "{err}");
    let secret = out.lines().last().unwrap().to_owned();
    assert!(secret.starts_with("whsec_"), "{out}");
    let stored = cluster.psql("hooks", "SELECT secret FROM webhooks");
    assert_eq!(stored.trim(), secret, "the secret is stored");
    // Statements are logged before they run: the INSERT is in the log by now.
    let log = cluster.log();
    assert!(
        log.contains("INSERT INTO webhooks"),
        "log_statement is on:\n{log}"
    );
    let key = secret.trim_start_matches("whsec_");
    assert!(
        !log.contains(key),
        "the secret is in PostgreSQL's log:\n{log}"
    );
}

/// On PostgreSQL too, the list commands never create nor migrate: on a database without
/// our schema they say so, and no table is made.
#[test]
fn list_commands_never_make_the_schema_on_postgresql() {
    if postgres_only("the schema table is PostgreSQL's") {
        return;
    }
    let dir = TempDir::new();
    let url = dir.db();
    let url = url.to_str().unwrap();
    for args in [
        &["token", "list", "--db", url][..],
        &["webhook", "list", "--db", url],
    ]
    .into_iter()
    .filter(has_command)
    {
        let (code, out, err) = run_cli(args);
        assert_ne!(code, 0, "{args:?}: {out}");
        assert!(err.contains("no plant-store schema"), "{args:?}: {err}");
    }
    let tables = psql(
        Path::new(url),
        "SELECT count(*) FROM information_schema.tables WHERE table_schema = 'public'",
    );
    assert_eq!(tables.trim(), "0");
    add_token(Path::new(url), "ann", false);
    let (code, out, err) = run_cli(&["token", "list", "--db", url]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("ann"), "{out}");
}
