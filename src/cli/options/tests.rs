use super::*;
use log::LevelFilter;

pub(super) fn args(s: &str) -> Vec<String> {
    s.split_whitespace().map(str::to_owned).collect()
}

/// docs/reference.md's table is the default build's (with the `webhooks` and
/// `test-control` features).
#[cfg(all(feature = "webhooks", feature = "test-control"))]
#[test]
fn the_reference_s_flags_table_is_the_option_table() {
    let reference = include_str!("../../../docs/reference.md");
    let start = "<!-- options: generated from the option table (src/config/table.rs); a test checks it -->\n";
    let table = reference
        .split_once(start)
        .and_then(|(_, rest)| rest.split_once("<!-- /options -->"))
        .map(|(table, _)| table);
    assert_eq!(
        table,
        Some(help::markdown().as_str()),
        "docs/reference.md's flags table, between the option markers, must read:\n{}",
        help::markdown()
    );
}

#[test]
fn every_option_has_one_entry_and_help_lists_serves() {
    for (i, opt) in OPTIONS.iter().enumerate() {
        assert!(
            OPTIONS[i + 1..].iter().all(|o| o.flag != opt.flag),
            "{} twice",
            opt.flag
        );
        assert_eq!(opt.var.is_some(), opt.commands.contains(&Cmd::Serve));
        if opt.var.is_some() && !help::refused(opt.flag) {
            let help = help::help(&[]).unwrap();
            assert!(help.contains(&format!("  {} ", opt.flag)), "{}", opt.flag);
        }
    }
    assert!(matches!(
        parse(&args("--port 1 --help"), |_| None).unwrap(),
        Command::Help(_)
    ));
    let e = parse(&args("backup x --read-only"), |_| None).unwrap_err();
    assert_eq!(
        e,
        "backup takes no option --read-only: plant-store backup FILE [--db PATH|URL] [--force]"
    );
}

/// Every command the option table names has one entry in the command table, named by
/// words no other command has.
#[test]
fn every_command_has_one_entry() {
    use commands::COMMANDS;
    for opt in OPTIONS {
        for cmd in opt.commands {
            assert_eq!(commands::verb(*cmd).cmd, *cmd);
        }
    }
    for (i, v) in COMMANDS.iter().enumerate() {
        for w in &COMMANDS[i + 1..] {
            assert!(v.cmd != w.cmd && v.words != w.words, "{:?} twice", v.words);
        }
        assert!(
            !(v.words.len() == 1
                && COMMANDS
                    .iter()
                    .any(|w| w.words.len() > 1 && w.words[0] == v.words[0])),
            "{:?} is a command and the first word of others",
            v.words
        );
    }
}

/// Every help fits in 80 columns, and a command's help
/// lists only the options the command takes.
#[test]
fn every_help_fits_and_lists_only_its_commands_options() {
    use commands::COMMANDS;
    let mut helps = vec![help::help(&[]).unwrap()];
    for v in COMMANDS.iter().filter(|v| (v.available)().is_ok()) {
        helps.push(help::help(v.words).unwrap());
        helps.push(help::help(&v.words[..1]).unwrap());
        let own = help::help(v.words).unwrap();
        for opt in OPTIONS {
            let listed = own.contains(&format!("\n  {} ", opt.flag))
                || own.contains(&format!("\n  {}\n", opt.flag));
            assert_eq!(
                listed,
                opt.commands.contains(&v.cmd) && !help::refused(opt.flag),
                "{} in {:?}",
                opt.flag,
                v.words
            );
        }
    }
    for help in &helps {
        for line in help.lines() {
            assert!(line.chars().count() <= 80, "{line}");
        }
    }
}

#[test]
fn an_address_is_an_ip_and_port_or_localhost() {
    let ok = |a: &str| parse_addr(a, "--addr").map(|a| a.to_string());
    assert_eq!(ok("127.0.0.1:8080").as_deref(), Ok("127.0.0.1:8080"));
    assert_eq!(ok("[::]:0").as_deref(), Ok("[::]:0"));
    assert_eq!(ok("localhost:9").as_deref(), Ok("127.0.0.1:9"));
    for bad in [
        "example.com:80",
        "localhost",
        "localhost:x",
        "127.0.0.1",
        "1.2.3.4:70000",
    ] {
        let e = parse_addr(bad, "--addr").unwrap_err();
        assert!(
            e.contains("--addr must be an IP address") && e.contains(bad),
            "{e}"
        );
    }
}

#[test]
fn flags_win_over_environment_over_defaults() {
    let env = |k: &str| match k {
        "PLANT_STORE_ADDR" => Some("0.0.0.0:1".to_owned()),
        "PLANT_STORE_WORKERS" => Some("3".to_owned()),
        _ => None,
    };
    let Command::Serve(c) = parse(&args("serve --addr=127.0.0.1:0"), env).unwrap() else {
        panic!("not serve")
    };
    assert_eq!(
        (
            c.addr.to_string().as_str(),
            c.workers,
            c.db.to_string().as_str()
        ),
        ("127.0.0.1:0", 3, DEFAULT_DB)
    );
    assert_eq!(
        (c.queue_timeout, c.log_level, c.token),
        (DEFAULT_QUEUE_TIMEOUT, LevelFilter::Info, None)
    );
}

#[test]
fn expiry_durations_and_rfc3339_times() {
    assert_eq!(parse_duration("90d"), Some(90 * 86_400));
    assert_eq!(parse_duration("12h"), Some(43_200));
    assert_eq!(parse_duration("1s"), Some(1));
    assert_eq!(parse_duration("1"), Some(1), "a bare number is seconds");
    for bad in [
        "",
        "d",
        "1w",
        "+1",
        "1 s",
        "1S",
        "1d ",
        "1e3",
        "-1d",
        "1.5h",
        " 1d",
        "99999999999999999999d",
    ] {
        assert_eq!(parse_duration(bad), None, "{bad:?}");
    }
    let none = |_: &str| None;
    let Command::TokenAdd { expires_at, .. } =
        parse(&args("token add bo --expires-in 1h"), none).unwrap()
    else {
        panic!("not token add")
    };
    let left = expires_at.unwrap() - crate::ops::clock::system_now();
    assert!((3599..=3600).contains(&left), "{left}");
    assert!(
        parse(
            &args("token add bo --expires-at 2001-01-01T00:00:00Z"),
            none
        )
        .is_err()
    );
    assert!(parse(&args("token add bo --expires-in 0s"), none).is_err());
    assert!(
        parse(
            &args("token add bo --expires-in 1d --expires-at 2099-01-01T00:00:00Z"),
            none
        )
        .is_err()
    );
}

#[test]
fn bad_values_and_unknown_flags_are_refused() {
    let none = |_: &str| None;
    assert!(parse(&args("--workers 0"), none).is_err());
    assert!(parse(&args("--workers x"), none).is_err());
    assert!(
        parse(&args("--db-pool 1"), none).is_err(),
        "the writer and one more"
    );
    assert!(parse(&args("--db-pool 1025"), none).is_err());
    let pool = |a: &str| match parse(&args(a), none).unwrap() {
        Command::Serve(c) => c.db_pool,
        other => panic!("{other:?}"),
    };
    assert_eq!(pool("--db-pool 2"), 2);
    assert_eq!(pool(""), crate::store::DEFAULT_DB_POOL);
    assert!(parse(&args("token list --db-pool 3"), none).is_err());
    assert!(parse(&args("--log-level loud"), none).is_err());
    assert!(parse(&args("--port 1"), none).is_err());
    assert!(parse(&args("token list --read-only"), none).is_err());
    assert!(parse(&args("token add"), none).is_err());
    assert!(parse(&args("--db"), none).is_err());
    assert!(matches!(
        parse(&args("token add bob --read-only --db x.db"), none).unwrap(),
        Command::TokenAdd {
            read_only: true,
            ..
        }
    ));
}

#[cfg(feature = "webhooks")]
#[test]
fn one_grammar_for_every_duration() {
    for (v, secs) in [
        ("0", 0),
        ("90", 90),
        ("90s", 90),
        ("15m", 900),
        ("2h", 7200),
        ("7d", 604_800),
        ("007", 7),
    ] {
        assert_eq!(parse_duration(v), Some(secs), "{v}");
    }
    assert_eq!(
        duration("1h", "--x", 1, 3600),
        Ok(std::time::Duration::from_secs(3600))
    );
    let e = duration("3601", "--x", 1, 3600).unwrap_err();
    assert!(
        e.starts_with("--x must be a duration from 1s to 1h: "),
        "{e}"
    );
    assert!(e.ends_with("not `3601`"), "{e}");
    assert!(duration("0", "--x", 1, 3600).is_err());
    assert!(duration("99999999999999999999", "--x", 0, 3600).is_err());
    // Every time flag takes every form, bare seconds included.
    let none = |_: &str| None;
    let serve = |a: &str| match parse(&args(a), none) {
        Ok(Command::Serve(c)) => c,
        other => panic!("{a}: {other:?}"),
    };
    let s = std::time::Duration::from_secs;
    for (flags, want) in [("2", s(2)), ("2s", s(2)), ("2m", s(120)), ("1h", s(3600))] {
        let c = serve(&format!(
            "--queue-timeout {flags} --read-timeout {flags} --body-timeout {flags} \
             --write-timeout {flags} --drain-timeout {flags} --webhook-timeout {flags} \
             --event-retention {flags} --webhook-schedule {flags},{flags}"
        ));
        assert_eq!(
            [
                c.queue_timeout,
                c.read_timeout,
                c.body_timeout,
                c.write_timeout,
                c.drain_timeout,
                c.webhooks.timeout,
                c.event_retention,
                c.webhooks.schedule.0[0],
                c.webhooks.schedule.0[1],
            ],
            [want; 9],
            "{flags}"
        );
    }
    assert_eq!(serve("--drain-timeout 0").drain_timeout, s(0));
    assert_eq!(
        serve("--webhook-schedule 0,5").webhooks.schedule.0,
        [s(0), s(5)]
    );
    assert_eq!(
        serve("--event-retention 400d").event_retention,
        s(400 * 86_400)
    );
    for bad in [
        "--queue-timeout 0",
        "--read-timeout 2h",
        "--webhook-timeout 0s",
        "--webhook-timeout 61m",
        "--event-retention 0d",
        "--webhook-schedule 31d",
        "--webhook-schedule 5s,,5m",
        "--drain-timeout 1.5",
    ] {
        let e = parse(&args(bad), none).unwrap_err();
        let flag = bad.split(' ').next().unwrap();
        assert!(e.starts_with(&format!("{flag} must ")), "{bad}: {e}");
        assert!(e.contains("90, 90s, 15m, 2h, 7d"), "{bad}: {e}");
    }
    let Command::TokenAdd { expires_at, .. } =
        parse(&args("token add bo --expires-in 60"), none).unwrap()
    else {
        panic!("not token add")
    };
    let left = expires_at.unwrap() - crate::ops::clock::system_now();
    assert!((59..=60).contains(&left), "{left}");
}

#[test]
fn errors_name_the_flag_or_the_variable_that_was_read() {
    let env = |pairs: &'static [(&'static str, &'static str)]| {
        move |k: &str| {
            pairs
                .iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        }
    };
    for (var, value) in [
        ("PLANT_STORE_DB_POOL", "1"),
        ("PLANT_STORE_WORKERS", "x"),
        ("PLANT_STORE_ADDR", "nowhere"),
        ("PLANT_STORE_READ_TIMEOUT", "0"),
        ("PLANT_STORE_WEBHOOK_TIMEOUT", "2w"),
        ("PLANT_STORE_WEBHOOK_SCHEDULE", "x"),
        ("PLANT_STORE_EVENT_RETENTION", "-1d"),
        ("PLANT_STORE_RATE_LIMIT", "fast"),
        ("PLANT_STORE_LOG_LEVEL", "loud"),
        ("PLANT_STORE_LOG_FORMAT", "xml"),
        ("PLANT_STORE_WEBHOOK_CA", "/nonexistent/ca.pem"),
    ] {
        let pairs: &'static [(&str, &str)] = Box::leak(Box::new([(var, value)]));
        let e = parse(&[], env(pairs)).unwrap_err();
        assert!(
            e.starts_with(&format!("{var} ")) || e.starts_with(&format!("{var}:")),
            "{e}"
        );
        let flag = format!(
            "--{}",
            var.trim_start_matches("PLANT_STORE_")
                .to_lowercase()
                .replace('_', "-")
        );
        assert!(!e.contains(&flag), "{var} named {flag}: {e}");
        // The flag, given, is named instead.
        let e = parse(&args(&format!("{flag} {value}")), |_| None).unwrap_err();
        assert!(e.starts_with(&flag), "{e}");
    }
    let e = parse(&[], env(&[("PLANT_STORE_RATE_BURST", "5")])).unwrap_err();
    assert!(
        e.starts_with("PLANT_STORE_RATE_BURST needs --rate-limit"),
        "{e}"
    );
}

#[test]
fn an_unusable_plant_store_token_is_refused_without_showing_it() {
    for bad in [
        "two words",
        "s3cret\u{7f}",
        "quo\"ted",
        "=abc",
        "x".repeat(1018).leak(),
    ] {
        let e = match parse(&[], |k| (k == "PLANT_STORE_TOKEN").then(|| bad.to_owned())) {
            Err(e) => e,
            Ok(c) => panic!("{bad:?} accepted: {c:?}"),
        };
        assert!(
            e.starts_with("PLANT_STORE_TOKEN is not a usable bearer token"),
            "{e}"
        );
        assert!(!e.contains(bad), "the message shows the token: {e}");
    }
    for good in ["abc", "a-b.c_d~e+f/g==", "x".repeat(1017).leak()] {
        let Ok(Command::Serve(c)) =
            parse(&[], |k| (k == "PLANT_STORE_TOKEN").then(|| good.to_owned()))
        else {
            panic!("{good:?} refused")
        };
        assert_eq!(c.token.as_ref().map(|t| t.expose()), Some(good));
    }
}

/// What a build without a feature refuses (`tests/features.rs`).
#[cfg(any(not(feature = "webhooks"), not(feature = "test-control")))]
mod features;
