//! Options checked before anything is touched: a bad value exits 2, names the flag or the
//! variable it was read from, and opens no database; every time flag takes one grammar.

use crate::support::*;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

/// `serve` with `args` and `env`, on `db`, to completion: (exit code, stderr). Panics if
/// it is still running after 10 s (it started, instead of refusing its options).
fn serve(db: &std::path::Path, args: &[&str], env: &[(&str, &str)]) -> (i32, String) {
    let mut child = plant_store()
        .args(["serve", "--addr", "127.0.0.1:0", "--db"])
        .arg(db)
        .args(args)
        .env_remove("PLANT_STORE_TOKEN")
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("serve {args:?} {env:?} started");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A `--webhook-ca` that is missing or holds no PEM certificate exits 2 before the
/// database is opened (it exited 1 after opening and migrating it).
#[test]
fn a_bad_webhook_ca_exits_2_before_the_database_is_created() {
    if without(Feature::Tls) {
        return;
    }
    let dir = TempDir::new();
    let not_pem = dir.0.join("not.pem");
    std::fs::write(&not_pem, "no certificate here\n").unwrap();
    let missing = dir.0.join("missing.pem");
    let db = dir.db();
    for ca in [&not_pem, &missing] {
        let ca = ca.to_str().unwrap();
        let (code, err) = serve(&db, &["--webhook-ca", ca], &[]);
        assert_eq!(code, 2, "{err}");
        assert!(err.contains("--webhook-ca") && err.contains(ca), "{err}");
        let (code, err) = serve(&db, &[], &[("PLANT_STORE_WEBHOOK_CA", ca)]);
        assert_eq!(code, 2, "{err}");
        assert!(err.contains("PLANT_STORE_WEBHOOK_CA: "), "{err}");
        assert!(!db.exists(), "the database was created");
    }
}

/// An error about a value read from a variable names the variable, not the flag.
/// A `--db` URL that no connection could be made with exits 2 naming `--db` or
/// `PLANT_STORE_DB`, whichever was read, in every command (it exited 1, naming neither),
/// and never shows the password.
#[test]
fn a_bad_db_url_exits_2_naming_the_flag_or_the_variable() {
    let url = "postgres://u:s3cret@127.0.0.1:1/db?sslmode=allow";
    let run = |args: &[&str], env: &[(&str, &str)]| {
        let out = plant_store()
            .args(args)
            .env_remove("PLANT_STORE_TOKEN")
            .env_remove("PLANT_STORE_DB")
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    for (args, env, named) in [
        (&["--addr", "127.0.0.1:0", "--db", url][..], &[][..], "--db"),
        (
            &["--addr", "127.0.0.1:0"][..],
            &[("PLANT_STORE_DB", url)][..],
            "PLANT_STORE_DB",
        ),
        (&["token", "list", "--db", url][..], &[][..], "--db"),
        (&["backup", "copy.db", "--db", url][..], &[][..], "--db"),
    ] {
        let (code, err) = run(args, env);
        assert_eq!(code, Some(2), "{args:?} {env:?}: {err}");
        assert!(
            err.starts_with(&format!("plant-store: {named}: cannot use ")),
            "{args:?} {env:?}: {err}"
        );
        assert!(!err.contains("s3cret"), "{err}");
    }
}

/// `--journal-size`, `--journal-bytes` and `--test-seed` work only with test control:
/// without `--test-control` the start is refused as `--test-seed`'s is (it was accepted
/// and did nothing). A build without the `test-control` feature (the device build)
/// refuses each of test control's options, flag or variable, `--test-control` itself
/// too, naming the feature; either way with exit status 2, before any database is made.
#[test]
fn test_control_s_options_exit_2_without_it_or_without_the_feature() {
    let dir = TempDir::new();
    let db = dir.0.join("p.db");
    let has = !without(Feature::TestControl);
    let feature =
        "this build has no test control (it was built without the `test-control` cargo feature)";
    let control = ("PLANT_STORE_CONTROL_TOKEN", crate::control::CONTROL);
    let mut cases = vec![
        (&["--journal-size", "5"][..], vec![], "--journal-size"),
        (
            &[][..],
            vec![("PLANT_STORE_JOURNAL_SIZE", "5")],
            "PLANT_STORE_JOURNAL_SIZE",
        ),
        (&["--journal-bytes", "5"][..], vec![], "--journal-bytes"),
        (&["--test-seed", "5"][..], vec![], "--test-seed"),
        (
            &[][..],
            vec![("PLANT_STORE_TEST_SEED", "5")],
            "PLANT_STORE_TEST_SEED",
        ),
    ];
    if !has {
        // What a build with the feature would start with.
        cases.extend([
            (&["--test-control"][..], vec![control], "--test-control"),
            (
                &[][..],
                vec![("PLANT_STORE_TEST_CONTROL", "1"), control],
                "PLANT_STORE_TEST_CONTROL",
            ),
            (
                &["--test-control", "--test-seed", "5"][..],
                vec![control],
                "--test-control",
            ),
        ]);
    }
    for (args, env, named) in cases {
        let (code, err) = serve(&db, args, &env);
        let said = match has {
            true => format!("plant-store: {named} needs --test-control\n"),
            false => format!("plant-store: {named}: {feature}\n"),
        };
        assert_eq!((code, err), (2, said), "{args:?} {env:?}");
        assert!(!db.exists(), "the database was created");
    }
    // `--seed` is no test control's: a device build loads it too.
    if sqlite_only("seeds are SQLite's") {
        return;
    }
    let seed = dir.0.join("seed.json");
    std::fs::write(
        &seed,
        r#"{"tokens":[{"token":"seeded-token-1","principal":"ann"}]}"#,
    )
    .unwrap();
    let s = Launch::memory()
        .arg(&format!("--seed {}", seed.display()))
        .start();
    assert_eq!(
        s.request(&Req::get("/plants").token("seeded-token-1"))
            .status,
        200
    );
}

/// A switch given a value but 1 or 0 (`--create=no`) is refused, not taken as given.
#[test]
fn a_switch_given_a_value_exits_2() {
    let dir = TempDir::new();
    let db = dir.0.join("p.db");
    let (code, _, err) = run_cli(&[
        "token",
        "add",
        "bob",
        "--create=no",
        "--db",
        db.to_str().unwrap(),
    ]);
    assert_eq!(code, 2, "{err}");
    assert_eq!(err, "plant-store: --create must be 1 or 0, not `no`\n");
    assert!(!db.exists(), "--create=no made the database");
}

#[test]
fn an_option_error_names_the_flag_or_the_variable_read() {
    let dir = TempDir::new();
    let db = dir.db();
    let (code, err) = serve(&db, &[], &[("PLANT_STORE_DB_POOL", "1")]);
    assert_eq!(code, 2);
    assert!(
        err.contains("PLANT_STORE_DB_POOL must be a whole number from 2 to 1024"),
        "{err}"
    );
    assert!(!err.contains("--db-pool"), "{err}");
    let (code, err) = serve(&db, &["--db-pool", "1"], &[]);
    assert_eq!(code, 2);
    assert!(err.contains("plant-store: --db-pool must be"), "{err}");
    if !without(Feature::Webhooks) {
        let (code, err) = serve(&db, &[], &[("PLANT_STORE_WEBHOOK_TIMEOUT", "2w")]);
        assert_eq!(code, 2);
        assert!(
            err.contains("PLANT_STORE_WEBHOOK_TIMEOUT must be a duration"),
            "{err}"
        );
    }
    assert!(!db.exists());
}

/// Every time flag takes a bare number of seconds as well as `s`, `m`, `h`, `d`
/// (`--webhook-timeout 2` was refused while `--read-timeout 10` took seconds).
#[test]
fn every_time_flag_takes_the_one_duration_grammar() {
    let mut s = Launch::memory()
        .arg("--read-timeout 10s --body-timeout 1m --queue-timeout 5")
        .arg("--write-timeout 10 --drain-timeout 0 --event-retention 86400");
    if !without(Feature::Webhooks) {
        s = s.arg("--webhook-timeout 2 --webhook-schedule 5,1m,2h");
    }
    let s = s.start();
    assert_eq!(s.get("/healthz").status, 200);
}

/// A `PLANT_STORE_TOKEN` that no request could carry (a space in it) is refused at start,
/// exit 2, and the message does not show it.
#[test]
fn an_unusable_plant_store_token_is_refused_at_start_unshown() {
    let dir = TempDir::new();
    let db = dir.db();
    for token in ["my secret token", "tok\"en"] {
        let (code, err) = serve(&db, &[], &[("PLANT_STORE_TOKEN", token)]);
        assert_eq!(code, 2, "{err}");
        assert!(
            err.contains("PLANT_STORE_TOKEN is not a usable bearer token"),
            "{err}"
        );
        assert!(!err.contains(token) && !err.contains("secret"), "{err}");
    }
    assert!(!db.exists());
}

/// The `webhooks` feature decides the webhook commands, options and threads. Without it
/// (the device build), each `webhook` command and each `--webhook-*` option of `serve`
/// (flag or variable) exits 2 naming the feature, before any database is opened;
/// `--webhook-hold`, the retention's, is taken; and the server runs no webhook thread.
/// With it, the `webhooks` thread and one delivery thread per `--webhook-threads` run.
#[test]
fn the_webhooks_feature_decides_the_webhook_commands_options_and_threads() {
    let dir = TempDir::new();
    let db = dir.db();
    let webhooks = !without(Feature::Webhooks);
    let feature = "this build has no webhooks (it was built without the `webhooks` cargo feature)";
    if !webhooks {
        let db = db.to_str().unwrap();
        for args in [
            &["webhook", "list", "--db", db][..],
            &[
                "webhook",
                "add",
                "ann",
                "http://127.0.0.1:9/h",
                "--create",
                "--db",
                db,
            ],
            &["webhook", "remove", "wh_0000000000000000", "--db", db],
            &["webhook", "enable", "wh_0000000000000000", "--db", db],
        ] {
            let (code, out, err) = run_cli(args);
            assert_eq!(
                (code, out.as_str(), err.as_str()),
                (
                    2,
                    "",
                    &*format!("plant-store: the webhook command: {feature}\n")
                ),
                "{args:?}"
            );
        }
        for (flag, value) in [
            ("--webhook-threads", "2"),
            ("--webhook-timeout", "5s"),
            ("--webhook-schedule", "5s,1m"),
            ("--webhook-ca", "ca.pem"),
        ] {
            let (code, err) = serve(Path::new(db), &[flag, value], &[]);
            assert_eq!(
                (code, err),
                (2, format!("plant-store: {flag}: {feature}\n"))
            );
        }
        let (code, err) = serve(Path::new(db), &[], &[("PLANT_STORE_WEBHOOK_THREADS", "2")]);
        assert_eq!(
            (code, err),
            (
                2,
                format!("plant-store: PLANT_STORE_WEBHOOK_THREADS: {feature}\n")
            )
        );
        assert!(!Path::new(db).exists(), "the database was created");
    }
    let mut launch = Launch::new(&db).arg("--webhook-hold 1d");
    if webhooks {
        launch = launch.arg("--webhook-threads 3");
    }
    let s = launch.start();
    assert_eq!(s.post(r#"{"id":1,"name":"Fern"}"#).status, 200);
    if native_only("qemu-user's threads are its own: their names are not the program's") {
        return;
    }
    let mut names: Vec<String> = std::fs::read_dir(format!("/proc/{}/task", s.pid()))
        .unwrap()
        .filter_map(|t| std::fs::read_to_string(t.unwrap().path().join("comm")).ok())
        .map(|n| n.trim().to_owned())
        .filter(|n| n.starts_with("webhook"))
        .collect();
    names.sort();
    let want: &[&str] = if webhooks {
        &["webhook-0", "webhook-1", "webhook-2", "webhooks"]
    } else {
        &[]
    };
    assert_eq!(names, want);
}
