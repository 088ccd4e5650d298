//! The builder itself: whichever method sets a setting, the last call wins; its errors
//! name its methods and options (never a flag, a variable or `--help`); `test_control`
//! makes a random control token that only the `Running` knows; `Debug` shows no token
//! and no password.

use crate::client::get;
use crate::shared;
use plant_store::{Builder, Error, Server};
use std::time::Duration;

/// One way to set a setting: what the test calls it, and the call.
type Way = (&'static str, fn(Builder) -> Builder);

/// A setting set to a good value one way and to a bad one another: the last call decides
/// whether `start` succeeds, in both orders, for every pair of ways (the same way twice
/// included). A bad value last is refused naming what the call was (`by`), when given.
struct Case {
    setting: &'static str,
    good: &'static [Way],
    bad: &'static [Way],
}

fn base() -> Builder {
    Server::builder().workers(1)
}

fn seed_file() -> std::path::PathBuf {
    let path =
        std::env::temp_dir().join(format!("plant-store-builder-{}.json", std::process::id()));
    std::fs::write(&path, r#"{"tokens":[],"plants":{}}"#).unwrap();
    path
}

const CASES: &[Case] = &[
    Case {
        setting: "addr",
        good: &[
            ("addr", |b| b.addr("127.0.0.1:0")),
            ("addr", |b| b.option("addr", "127.0.0.1:0")),
            ("addr", |b| b.option("--addr", "localhost:0")),
        ],
        bad: &[
            ("addr", |b| b.addr("nowhere")),
            ("addr", |b| b.option("addr", "nowhere")),
            ("addr", |b| b.option("--addr", "nowhere")),
        ],
    },
    Case {
        setting: "db",
        good: &[
            ("", |b| b.db(":memory:")),
            ("", |b| b.option("db", ":memory:")),
        ],
        bad: &[
            ("", |b| b.db("/nonexistent-plant-store-dir/a.db")),
            ("", |b| b.option("db", "/nonexistent-plant-store-dir/a.db")),
        ],
    },
    Case {
        setting: "seed",
        good: &[
            ("", |b| b.seed_file(seed_file())),
            ("", |b| b.option("seed", seed_file().to_str().unwrap())),
        ],
        bad: &[
            ("", |b| b.seed_file("/nonexistent-plant-store-seed.json")),
            ("", |b| {
                b.option("seed", "/nonexistent-plant-store-seed.json")
            }),
        ],
    },
    Case {
        setting: "workers",
        good: &[("", |b| b.workers(2)), ("", |b| b.option("workers", "2"))],
        bad: &[
            ("workers must be", |b| b.workers(0)),
            ("workers must be", |b| b.option("workers", "0")),
        ],
    },
    Case {
        setting: "drain timeout",
        good: &[
            ("", |b| b.drain_timeout(Duration::from_secs(1))),
            ("", |b| b.option("drain-timeout", "1s")),
        ],
        bad: &[
            ("drain_timeout must be", |b| {
                b.drain_timeout(Duration::from_secs(7200))
            }),
            ("drain-timeout must be", |b| b.option("drain-timeout", "2h")),
        ],
    },
    Case {
        setting: "max connections",
        good: &[
            ("", |b| b.max_connections(64)),
            ("", |b| b.option("max-connections", "64")),
        ],
        bad: &[
            ("max_connections must be", |b| b.max_connections(0)),
            ("max-connections must be", |b| {
                b.option("max-connections", "0")
            }),
        ],
    },
    Case {
        setting: "rate limit",
        good: &[
            ("", |b| b.rate_limit(10, Duration::from_secs(60))),
            ("", |b| b.option("rate-limit", "10/m")),
        ],
        bad: &[
            ("rate_limit must be", |b| {
                b.rate_limit(0, Duration::from_secs(1))
            }),
            ("rate-limit must be", |b| b.option("rate-limit", "0/s")),
        ],
    },
    Case {
        setting: "journal size",
        good: &[
            ("", |b| b.test_control().journal_size(5)),
            ("", |b| b.test_control().option("journal-size", "5")),
        ],
        bad: &[
            ("journal_size must be", |b| {
                b.test_control().journal_size(5_000_000)
            }),
            ("journal-size must be", |b| {
                b.test_control().option("journal-size", "5000000")
            }),
        ],
    },
    Case {
        setting: "test seed",
        good: &[
            ("", |b| b.test_control().test_seed(42)),
            ("", |b| b.test_control().option("test-seed", "42")),
        ],
        bad: &[("test-seed must be", |b| {
            b.test_control().option("test-seed", "-1")
        })],
    },
];

#[test]
fn the_last_call_for_a_setting_wins_whatever_the_path() {
    let _g = shared();
    for case in CASES {
        for (g, (_, good)) in case.good.iter().enumerate() {
            for (b, (named, bad)) in case.bad.iter().enumerate() {
                let what = format!("{}: good way {g}, bad way {b}", case.setting);
                match good(bad(base())).start() {
                    Ok(server) => server.stop().unwrap(),
                    Err(e) => panic!("{what}, good last: refused: {e}"),
                }
                match bad(good(base())).start() {
                    Ok(_) => panic!("{what}, bad last: started"),
                    Err(e) => assert!(e.to_string().starts_with(named), "{what}: {e}"),
                }
            }
        }
    }
    // The value that wins is the one the server has.
    let connections_max = |b: Builder| {
        let server = b.start().unwrap();
        let metrics = get(server.addr(), "/metrics", None).body;
        let line = metrics
            .lines()
            .find(|l| l.starts_with("plant_store_connections_max "))
            .unwrap()
            .to_owned();
        server.stop().unwrap();
        line
    };
    let typed_last = base().option("max-connections", "64").max_connections(65);
    assert_eq!(
        connections_max(typed_last),
        "plant_store_connections_max 65"
    );
    let option_last = base().max_connections(65).option("--max-connections", "64");
    assert_eq!(
        connections_max(option_last),
        "plant_store_connections_max 64"
    );
}

/// Test control's three ways: `test_control()`, `control_token(…)` and
/// `.option("test-control", …)`; the last says whether it is on, and the control token
/// is the one given, else a random one.
#[test]
fn the_last_call_turns_test_control_on_or_off() {
    let _g = shared();
    const GIVEN: &str = "a-control-token-of-ours";
    let token = |b: Builder| {
        let server = b.start().unwrap();
        let token = server.control_token().map(str::to_owned);
        let status = get(server.addr(), "/_control/requests", token.as_deref()).status;
        assert_eq!(status, if token.is_some() { 200 } else { 404 });
        server.stop().unwrap();
        token
    };
    let off = |b: Builder| b.option("test-control", "0");
    assert_eq!(
        token(off(base()).control_token(GIVEN)).as_deref(),
        Some(GIVEN)
    );
    assert_eq!(token(off(base().control_token(GIVEN))), None);
    assert!(token(off(base()).test_control()).is_some());
    assert_eq!(token(off(base().test_control())), None);
    assert!(token(off(base()).option("--test-control", "1")).is_some());
    // The control token is its own setting: test_control() keeps the one given.
    let both = base().control_token(GIVEN).test_control();
    assert_eq!(token(both).as_deref(), Some(GIVEN));
    let both = base().test_control().control_token(GIVEN);
    assert_eq!(token(both).as_deref(), Some(GIVEN));
    assert_eq!(token(base()), None);
}

#[test]
fn errors_speak_the_builder_s_words() {
    let _g = shared();
    let token68 = "it must be 1 to 1017 letters, digits and -._~+/, then optional = padding, as RFC 6750's token68";
    let forms =
        "a whole number of seconds, or a whole number and s, m, h or d (90, 90s, 15m, 2h, 7d)";
    let cases: Vec<(Builder, String)> = vec![
        (
            base().token("a b"),
            format!("token is not a usable bearer token (3 characters): {token68}"),
        ),
        (
            base().control_token("too-short"),
            "control_token must be at least 16 bytes long".into(),
        ),
        (
            base().control_token(""),
            "control_token must be at least 16 bytes long".into(),
        ),
        (
            base().control_token("a token of ours!"),
            format!("control_token is not a usable bearer token (16 characters): {token68}"),
        ),
        (
            base()
                .token("one-token-for-both")
                .control_token("one-token-for-both"),
            "control_token must differ from token: the control token is no principal's".into(),
        ),
        (
            base().workers(0),
            "workers must be a whole number from 1 to 1024, not `0`".into(),
        ),
        (
            base().option("--workers", "none"),
            "workers must be a whole number from 1 to 1024, not `none`".into(),
        ),
        (
            base().drain_timeout(Duration::from_millis(1500)),
            format!("drain_timeout must be a duration from 0s to 1h: {forms}; not `1.5s`"),
        ),
        (
            base().rate_limit(5, Duration::from_secs(2)),
            "rate_limit must be a whole number of requests per s, m or h (such as 100/s), not `5/2s`"
                .into(),
        ),
        (
            base().option("rate-burst", "5"),
            "rate-burst needs rate_limit".into(),
        ),
        (base().test_seed(1), "test_seed needs test_control".into()),
        (
            base().option("test-seed", "1"),
            "test-seed needs test_control".into(),
        ),
        (
            base().option("test-seed", "1").option("test-control", "0"),
            "test-seed needs test-control".into(),
        ),
        (
            base().db("postgres://ann@db.example/plants").test_control(),
            on_postgres("test_control needs SQLite (a file or :memory:), not PostgreSQL"),
        ),
        (
            base()
                .db("postgres://ann@db.example/plants")
                .control_token("a-control-token-of-ours"),
            on_postgres("control_token needs SQLite (a file or :memory:), not PostgreSQL"),
        ),
        (
            base()
                .db("postgres://ann@db.example/plants")
                .seed_file(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/guide/seed.json")),
            on_postgres("seed_file needs SQLite (a file or :memory:), not PostgreSQL"),
        ),
        (
            base().option("test-control", "yes"),
            "test-control must be 1 or 0, not `yes`".into(),
        ),
        (
            base().option("log-level", "debug"),
            "log-level is the binary's: a library logs through the log facade, and its host sets the logger".into(),
        ),
    ];
    for (builder, expected) in cases {
        let shown = format!("{builder:?}");
        let e = builder.start().unwrap_err();
        assert_eq!(e, Error::Option(expected), "{shown}");
    }
    // A misspelt option is named, with the names there are; first, whatever else is wrong.
    let e = base()
        .workers(0)
        .option("wrokers", "2")
        .start()
        .unwrap_err();
    let Error::Option(m) = &e else {
        panic!("{e:?}")
    };
    assert!(
        m.starts_with("unknown option `wrokers`; a server's options are addr, db, "),
        "{m}"
    );
    for name in [
        "workers",
        "drain-timeout",
        "test-control",
        "seed",
        "webhook-hold",
    ] {
        assert!(m.contains(&format!(", {name}")), "{name}: {m}");
    }
    for binary in ["log-level", "log-format"] {
        assert!(!m.contains(binary), "{m}");
    }
    let e = base().addr("nowhere").start().unwrap_err();
    assert!(
        e.to_string()
            .starts_with("addr must be an IP address and a port"),
        "{e}"
    );
    let e = base()
        .seed_file("/nonexistent-plant-store-seed.json")
        .start()
        .unwrap_err();
    assert!(
        matches!(&e, Error::Option(m) if m.contains("/nonexistent-plant-store-seed.json")),
        "{e}"
    );
}

/// Nothing an embedder did not type: no variable, no flag, no subcommand, no `--help`.
#[test]
fn no_builder_error_names_the_command_line() {
    let _g = shared();
    let builders = [
        base().token("a b"),
        base().control_token("short"),
        base().control_token(""),
        base().option("wrokers", "2"),
        base().option("test-control", ""),
        base().option("--workers", "none"),
        base().test_seed(3),
        base().option("rate-burst", "2"),
        base().db("postgres://ann@db.example/plants").test_control(),
        base()
            .token("the-same-token-twice")
            .control_token("the-same-token-twice"),
    ];
    for builder in builders {
        let shown = format!("{builder:?}");
        match builder.start() {
            Ok(server) => server.stop().unwrap(),
            Err(e) => {
                let e = e.to_string();
                for word in ["PLANT_STORE_", "--", "`serve", "help"] {
                    assert!(!e.contains(word), "{shown}: {e}");
                }
            }
        }
    }
}

#[test]
fn test_control_makes_a_random_control_token_that_the_running_keeps() {
    let _g = shared();
    crate::logs::capture();
    let start = || base().test_control().start().unwrap();
    let (a, b) = (start(), start());
    let token = a.control_token().expect("test control is on").to_owned();
    // 256 bits from the operating system, as hex: a token a request can carry.
    assert_eq!(token.len(), 64, "{token}");
    assert!(token.bytes().all(|c| c.is_ascii_hexdigit()), "{token}");
    assert_ne!(Some(token.as_str()), b.control_token());
    assert_eq!(
        get(a.addr(), "/_control/requests", Some(&token)).status,
        200
    );
    assert_eq!(
        get(b.addr(), "/_control/requests", Some(&token)).status,
        401,
        "one server's control token is no other's"
    );
    let plain = base().start().unwrap();
    assert_eq!(plain.control_token(), None);
    // A test seed makes ids and minted tokens predictable, never the control token.
    let seeded = || base().test_control().test_seed(7).start().unwrap();
    let (c, d) = (seeded(), seeded());
    assert_ne!(c.control_token(), d.control_token());
    c.stop().unwrap();
    d.stop().unwrap();
    // Nothing logged it, nor shows it.
    assert!(!format!("{a:?}").contains(&token));
    b.stop().unwrap();
    a.stop().unwrap();
    plain.stop().unwrap();
    let logged = crate::logs::lines();
    assert!(
        logged.iter().any(|l| l.contains("test control is on")),
        "the capture saw the servers' lines: {logged:?}"
    );
    assert!(!logged.iter().any(|l| l.contains(&token)), "{logged:?}");
}

#[test]
fn a_builder_s_debug_shows_no_password_nor_token() {
    let _g = shared();
    let builder = Server::builder()
        .db("postgres://ann:pa55w0rd@db.example/plants")
        .option(
            "--db",
            "postgresql://bob:hunter2@db.example/plants?sslmode=require",
        )
        .option("DB", "postgres://carl:swordfish@db.example/plants")
        .token("sekrit-token-1")
        .control_token("sekrit-control-0123")
        .workers(2);
    let shown = format!("{builder:?}");
    for secret in ["pa55w0rd", "hunter2", "swordfish", "sekrit"] {
        assert!(!shown.contains(secret), "{shown}");
    }
    assert!(shown.contains("workers: 2"), "{shown}");
    assert!(shown.contains("<redacted>"), "{shown}");
}

/// The error of a builder with a PostgreSQL URL: `then` in a build with PostgreSQL; in one
/// without, the URL's refusal comes first.
fn on_postgres(then: &str) -> String {
    match cfg!(feature = "postgres") {
        true => then.into(),
        false => "db: cannot use a PostgreSQL URL: this build has no PostgreSQL support (it was built without the `postgres` cargo feature)".into(),
    }
}

/// A start without `.token()` warns in the builder's words too (the command line's names
/// its variable).
#[test]
fn the_warning_of_a_start_without_a_token_names_the_builder_s_method() {
    let _g = shared();
    crate::logs::capture();
    let server = base().start().unwrap();
    server.stop().unwrap();
    let lines = crate::logs::lines();
    let warned: Vec<_> = lines.iter().filter(|l| l.contains("is not set")).collect();
    assert!(
        warned
            .iter()
            .any(|l| l.contains("token is not set: only tokens stored")),
        "{lines:?}"
    );
    assert!(
        warned.iter().all(|l| !l.contains("PLANT_STORE_")),
        "{warned:?}"
    );
}
