//! Every option's values: switches and their variables, a bad value for each option
//! refused naming where it was read, `--db`'s paths, and the options that need
//! `--test-control`.

use super::tests::args;
use super::*;

/// A switch is on as a flag, or as `--switch=1` or its variable's 1; `=0` or 0 is off;
/// anything else is refused, naming what was read.
#[test]
fn switches_take_1_or_0_inline_or_from_their_variable() {
    let on = |argv: &str, var: Option<&str>| {
        let env = |k: &str| (k == "PLANT_STORE_ALLOW_TEST_FILE").then(|| var.map(str::to_owned))?;
        match parse(&args(argv), env) {
            Ok(Command::Serve(c)) => Ok(c.allow_test_file),
            Ok(_) => panic!("not serve"),
            Err(e) => Err(e),
        }
    };
    assert_eq!(on("serve", None), Ok(false));
    assert_eq!(on("serve --allow-test-file", None), Ok(true));
    assert_eq!(on("serve --allow-test-file=1", None), Ok(true));
    assert_eq!(on("serve --allow-test-file=0", None), Ok(false));
    assert_eq!(on("serve", Some("1")), Ok(true));
    assert_eq!(on("serve --allow-test-file=0", Some("1")), Ok(false));
    let e = on("serve", Some("yes")).unwrap_err();
    assert!(
        e.contains("PLANT_STORE_ALLOW_TEST_FILE must be 1 or 0"),
        "{e}"
    );
    let e = on("serve --allow-test-file=on", None).unwrap_err();
    assert!(e.contains("--allow-test-file must be 1 or 0"), "{e}");
}

/// `file:` is a SQLite URI (its parameters would choose the file, the mode, the VFS):
/// refused on every command, naming the flag or the variable.
#[test]
fn a_sqlite_uri_is_no_database_path() {
    for argv in [
        "serve --db file:x.db",
        "token list --db file:x.db?mode=ro",
        "backup b.db --db file:x",
    ] {
        let e = parse(&args(argv), |_| None).unwrap_err();
        assert!(
            e.contains("--db takes a path, not a SQLite URI"),
            "{argv}: {e}"
        );
    }
    let env = |k: &str| (k == "PLANT_STORE_DB").then(|| "file:x.db".to_owned());
    let e = parse(&args("serve"), env).unwrap_err();
    assert!(e.contains("PLANT_STORE_DB takes a path"), "{e}");
    assert!(parse(&args("serve --db ./file:x.db"), |_| None).is_ok());
}

#[test]
fn a_switch_with_a_variable_takes_1_or_0() {
    let serve = |line: &str, value: &'static str| {
        let env = move |k: &str| (k == "PLANT_STORE_EXIT_ON_STDIN_CLOSE").then(|| value.to_owned());
        match parse(&args(line), env) {
            Ok(Command::Serve(c)) => Ok(c.exit_on_stdin_close),
            Ok(_) => panic!("not serve"),
            Err(e) => Err(e),
        }
    };
    assert_eq!(serve("serve", "1"), Ok(true));
    assert_eq!(serve("serve", "0"), Ok(false));
    assert_eq!(serve("serve --exit-on-stdin-close", "0"), Ok(true));
    assert_eq!(
        serve("serve", "yes"),
        Err("PLANT_STORE_EXIT_ON_STDIN_CLOSE must be 1 or 0, not `yes`".into())
    );
}

/// For every option, a value it refuses; a switch is given it glued on (`--force=yes`).
const BAD_VALUES: &[(&str, &str)] = &[
    ("--addr", "nowhere"),
    // Without the `postgres` feature no URL is usable; with it, not this `sslmode`.
    ("--db", "postgres://u:pw@h/db?sslmode=allow"),
    ("--db-pool", "1"),
    ("--event-retention", "0"),
    ("--webhook-hold", "forever"),
    ("--webhook-threads", "0"),
    ("--webhook-timeout", "2w"),
    ("--webhook-schedule", "x"),
    ("--webhook-ca", "/nonexistent/ca.pem"),
    ("--workers", "0"),
    ("--max-connections", "0"),
    ("--max-streams", "-1"),
    ("--max-streams-per-principal", "x"),
    ("--queue-timeout", "0"),
    ("--read-timeout", "1.5s"),
    ("--body-timeout", "2h"),
    ("--write-timeout", "s"),
    ("--rate-limit", "fast"),
    ("--rate-burst", "0"),
    ("--drain-timeout", "-1"),
    ("--log-level", "loud"),
    ("--log-format", "xml"),
    ("--read-only", "no"),
    ("--expires-in", "0"),
    ("--expires-at", "tomorrow"),
    ("--test-control", "yes"),
    ("--seed", "/nonexistent/seed.json"),
    ("--journal-size", "x"),
    ("--journal-bytes", "-1"),
    ("--test-seed", "-1"),
    ("--force", "no"),
    ("--create", "no"),
    ("--allow-test-file", "yes"),
    ("--exit-on-stdin-close", "yes"),
];

/// The arguments that name `cmd` (with its positional arguments).
fn command_args(cmd: Cmd) -> &'static str {
    match cmd {
        Cmd::Serve => "serve",
        Cmd::TokenAdd => "token add bob",
        Cmd::TokenList => "token list",
        Cmd::TokenRevoke => "token revoke tok_0",
        Cmd::WebhookAdd => "webhook add bob http://127.0.0.1:9/h",
        Cmd::WebhookList => "webhook list",
        Cmd::WebhookRemove => "webhook remove wh_0",
        Cmd::WebhookEnable => "webhook enable wh_0",
        Cmd::Backup => "backup copy.db",
        Cmd::Compact => "compact",
        Cmd::Healthcheck => "healthcheck",
    }
}

#[test]
fn every_option_refuses_a_bad_value_naming_the_flag_or_the_variable_it_was_read_from() {
    for opt in OPTIONS {
        let bad = BAD_VALUES.iter().find(|(flag, _)| *flag == opt.flag);
        let &(_, value) = bad.unwrap_or_else(|| panic!("BAD_VALUES has no value for {}", opt.flag));
        for &cmd in opt.commands {
            let mut given = args(command_args(cmd));
            if parse(&given, |_| None).is_err() {
                continue; // a command this build refuses whole (webhooks without the feature)
            }
            match opt.value {
                Some(_) => given.extend([opt.flag.to_owned(), value.to_owned()]),
                None => given.push(format!("{}={value}", opt.flag)),
            }
            let e = parse(&given, |_| None).unwrap_err();
            assert!(e.starts_with(opt.flag), "{given:?}: {e}");
        }
        if let Some(var) = opt.var {
            let e = parse(&[], |k| (k == var).then(|| value.to_owned())).unwrap_err();
            assert!(e.starts_with(var), "{var}={value}: {e}");
            assert!(!e.contains(opt.flag), "{var}={value}: {e}");
        }
    }
    // Every parse error is the command line's: exit status 2 (`cli::run`).
}

#[cfg(feature = "test-control")]
#[test]
fn options_that_work_only_with_test_control_are_refused_without_it() {
    let none = |_: &str| None;
    for (a, var, value) in [
        ("--journal-size 5", "PLANT_STORE_JOURNAL_SIZE", "5"),
        ("--test-seed 7", "PLANT_STORE_TEST_SEED", "7"),
    ] {
        let e = parse(&args(a), none).unwrap_err();
        let flag = a.split(' ').next().unwrap();
        assert_eq!(e, format!("{flag} needs --test-control"));
        let e = parse(&[], |k| (k == var).then(|| value.to_owned())).unwrap_err();
        assert_eq!(e, format!("{var} needs --test-control"));
        let with = format!("--test-control {a}");
        let env = |k: &str| (k == CONTROL_TOKEN_VAR).then(|| "c".repeat(16));
        assert!(parse(&args(&with), env).is_ok(), "{with}");
    }
}
