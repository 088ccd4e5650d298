use super::*;
use log::LevelFilter;

fn args(s: &str) -> Vec<String> {
    s.split_whitespace().map(str::to_owned).collect()
}

#[test]
fn the_readme_flags_table_is_the_option_table() {
    let readme = include_str!("../../../README.md");
    let start = "<!-- options: generated from the option table (src/cli/options/table.rs); a test checks it -->\n";
    let table = readme
        .split_once(start)
        .and_then(|(_, rest)| rest.split_once("<!-- /options -->"))
        .map(|(table, _)| table);
    assert_eq!(
        table,
        Some(markdown().as_str()),
        "README.md's flags table, between the option markers, must read:\n{}",
        markdown()
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
        if opt.var.is_some() {
            assert!(help().contains(&format!("  {} ", opt.flag)), "{}", opt.flag);
        }
    }
    assert!(matches!(
        parse(&args("--port 1 --help"), |_| None).unwrap(),
        Command::Help
    ));
    let e = parse(&args("backup x --read-only"), |_| None).unwrap_err();
    assert_eq!(e, "unknown option --read-only here; see --help");
}

#[test]
fn an_address_is_an_ip_and_port_or_localhost() {
    let ok = |a: &str| parse_addr(a).map(|a| a.to_string());
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
        let e = parse_addr(bad).unwrap_err();
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
    for bad in [
        "",
        "d",
        "1",
        "1w",
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
    let left = expires_at.unwrap() - crate::ops::clock::unix_now();
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
