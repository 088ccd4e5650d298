//! What the command line says of itself: each command's own help (`COMMAND --help`, `-h`)
//! with its usage line, its arguments and only its options; a missing argument named,
//! with the command's usage line; `--version` naming the features built in; and a build
//! without a feature showing nothing it refuses.

use crate::support::*;

const BACKUP_HELP: &str = "\
plant-store backup: a consistent copy of the database, taken while a server
runs; an existing FILE is refused unless --force

Usage: plant-store backup FILE [--db PATH|URL] [--force]

Arguments:
  FILE  where the copy goes

Options:
  --db PATH|URL  SQLite database file, :memory:, or postgres://… with the
                 postgres feature [PLANT_STORE_DB; default: plants.db]
  --force        replace an existing backup file [default: off]
";

const TOKEN_REVOKE_HELP: &str = "\
plant-store token revoke: remove a token; it fails on its next request

Usage: plant-store token revoke ID [--db PATH|URL]

Arguments:
  ID  the token's id, as `token list` shows it

Options:
  --db PATH|URL  SQLite database file, :memory:, or postgres://… with the
                 postgres feature [PLANT_STORE_DB; default: plants.db]
";

/// Each command's help is its own, with `--help` or `-h`, wherever they stand; it exits
/// 0 and opens nothing.
#[test]
fn each_command_has_its_own_help() {
    for flag in ["--help", "-h"] {
        let ok = |help: &str| (0, help.to_owned(), String::new());
        assert_eq!(run_cli(&["backup", flag]), ok(BACKUP_HELP));
        assert_eq!(run_cli(&["backup", "copy.db", flag]), ok(BACKUP_HELP));
        assert_eq!(run_cli(&["token", "revoke", flag]), ok(TOKEN_REVOKE_HELP));
        assert_eq!(run_cli(&[flag, "token", "revoke"]), ok(TOKEN_REVOKE_HELP));
    }
    // Each names its usage line, its arguments and its options, and no other command's.
    let rows: &[(&[&str], &[&str], &[&str])] = &[
        (
            &["serve"],
            &[
                "Usage: plant-store [serve] [OPTIONS]\n",
                "\n  --addr IP:PORT ",
                "\n  --max-streams-per-principal N  open event streams of one principal;",
                "\n  PLANT_STORE_TOKEN ",
            ],
            &[
                "--force",
                "--read-only",
                "--create",
                "token add",
                "\nArguments:",
            ],
        ),
        (
            &["token", "add"],
            &[
                "Usage: plant-store token add PRINCIPAL [OPTIONS]\n",
                "\n  PRINCIPAL  whom the token speaks for\n",
                "\n  --read-only ",
                "\n  --expires-in DURATION ",
                "\n  --expires-at TIME ",
                "\n  --create ",
                "\n  --db PATH|URL ",
            ],
            &["--addr", "--force", "PLANT_STORE_TOKEN", "token list"],
        ),
        (
            &["token", "list"],
            &["Usage: plant-store token list [--db PATH|URL]\n", "expires"],
            &["--read-only", "--addr", "\nArguments:"],
        ),
        (
            &["webhook", "add"],
            &[
                "Usage: plant-store webhook add PRINCIPAL URL [--db PATH|URL] [--create]\n",
                "\n  PRINCIPAL  whose events are posted\n",
                "\n  URL        where the events are posted",
            ],
            &["--read-only", "--webhook-", "--force"],
        ),
        (
            &["webhook", "enable"],
            &["Usage: plant-store webhook enable ID [--db PATH|URL]\n"],
            &["--create", "--webhook-"],
        ),
    ];
    for (words, has, lacks) in rows.iter().filter(|r| has_command(&r.0)) {
        let args: Vec<&str> = words.iter().copied().chain(["--help"]).collect();
        let (code, out, err) = run_cli(&args);
        assert_eq!((code, err.as_str()), (0, ""), "{words:?}");
        assert!(out.starts_with(&format!("plant-store {}: ", words.join(" "))));
        for part in *has {
            assert!(out.contains(part), "{words:?} lacks {part:?}:\n{out}");
        }
        for part in *lacks {
            assert!(!out.contains(part), "{words:?} has {part:?}:\n{out}");
        }
    }
    // A group's help names its commands; so does an error without one.
    let (code, out, _) = run_cli(&["token", "--help"]);
    assert_eq!(code, 0);
    for usage in [
        "\n  plant-store token add PRINCIPAL [OPTIONS]\n",
        "\n  plant-store token list [--db PATH|URL]\n",
        "\n  plant-store token revoke ID [--db PATH|URL]\n",
    ] {
        assert!(out.contains(usage), "{out}");
    }
    assert!(!out.contains("webhook"), "{out}");
}

/// A command without an argument it needs says which, and how the command is used; a
/// group without its command names them. Exit status 2, nothing on standard output.
#[test]
fn a_missing_argument_is_named_with_the_commands_usage() {
    let rows: &[(&[&str], &str)] = &[
        (
            &["token", "add"],
            "token add needs PRINCIPAL, whom the token speaks for: \
             plant-store token add PRINCIPAL [OPTIONS]",
        ),
        (
            &["token", "revoke", "--db", "x.db"],
            "token revoke needs ID, the token's id, as `token list` shows it: \
             plant-store token revoke ID [--db PATH|URL]",
        ),
        (
            &["backup", "--force"],
            "backup needs FILE, where the copy goes: \
             plant-store backup FILE [--db PATH|URL] [--force]",
        ),
        (
            &["token"],
            "token needs a command: add, list or revoke; see plant-store token --help",
        ),
        (
            &["token", "remove", "1"],
            "unknown command `token remove`: token takes add, list or revoke; \
             see plant-store token --help",
        ),
        (
            &["token", "list", "everything"],
            "unexpected argument `everything` after token list: \
             plant-store token list [--db PATH|URL]",
        ),
        (
            &["token", "list", "--force"],
            "token list takes no option --force: plant-store token list [--db PATH|URL]",
        ),
        (&["plant"], "unknown command `plant`; see --help"),
        (
            &["webhook", "add", "alice"],
            "webhook add needs URL, where the events are posted (http://, or https:// in a \
             build with the tls feature): \
             plant-store webhook add PRINCIPAL URL [--db PATH|URL] [--create]",
        ),
        (
            &["webhook"],
            "webhook needs a command: add, list, remove or enable; \
             see plant-store webhook --help",
        ),
    ];
    for (args, message) in rows.iter().filter(|r| has_command(&r.0)) {
        let (code, out, err) = run_cli(args);
        assert_eq!(
            (code, out.as_str(), err.as_str()),
            (2, "", format!("plant-store: {message}\n").as_str()),
            "{args:?}"
        );
    }
}

/// `--version` names the version, the schema and the features built in, and what it
/// names is what the binary does: the webhook commands, https endpoints, PostgreSQL.
/// The binary cargo built for this run has this crate's features.
#[test]
fn version_names_the_features_the_binary_has() {
    let (code, out, err) = run_cli(&["--version"]);
    assert_eq!((code, err.as_str()), (0, ""));
    let features = built_in();
    let named = if features.is_empty() {
        "none".to_owned()
    } else {
        features.join(", ")
    };
    let version = env!("CARGO_PKG_VERSION");
    let schema = schema_version();
    let panics = if panics_abort() { "; panic=abort" } else { "" };
    assert_eq!(
        out,
        format!("plant-store {version} (schema {schema}; features: {named}{panics})\n")
    );
    let has = |f: &str| features.iter().any(|g| g == f);
    if std::env::var_os("PLANT_STORE_BIN").is_none() {
        let ours = [
            ("webhooks", cfg!(feature = "webhooks")),
            ("tls", cfg!(feature = "tls")),
            ("postgres", cfg!(feature = "postgres")),
            ("fault-injection", cfg!(feature = "fault-injection")),
        ];
        for (feature, built) in ours {
            assert_eq!(has(feature), built, "{feature}: {out}");
        }
    }
    // What each feature changes, asked of a database that is not there: refused before
    // it would be opened.
    let dir = TempDir::new();
    let missing = dir.0.join("none/plants.db");
    let db = missing.to_str().unwrap();
    let (_, _, err) = run_cli(&["webhook", "list", "--db", db]);
    assert_eq!(
        !err.contains("without the `webhooks` cargo feature"),
        has("webhooks"),
        "{err}"
    );
    if has("webhooks") {
        let https = ["webhook", "add", "a", "https://127.0.0.1:9/h", "--db", db];
        let (_, _, err) = run_cli(&https);
        assert_eq!(
            !err.contains("https endpoints need a build with the tls feature"),
            has("tls"),
            "{err}"
        );
    }
    let (_, _, err) = run_cli(&["token", "list", "--db", "postgres://u@127.0.0.1:1/x"]);
    assert_eq!(
        !err.contains("this build has no PostgreSQL support"),
        has("postgres"),
        "{err}"
    );
}

/// A build without the `webhooks` feature (the device build) lists no webhook command
/// and no option it refuses; one with it lists them all.
#[test]
fn help_lists_only_what_the_build_has() {
    let (code, out, _) = run_cli(&["--help"]);
    assert_eq!(code, 0);
    let (_, serve, _) = run_cli(&["serve", "--help"]);
    let webhooks = !without(Feature::Webhooks);
    for help in [&out, &serve] {
        for flag in [
            "--webhook-threads N",
            "--webhook-timeout DURATION",
            "--webhook-schedule DURATION,…",
            "--webhook-ca FILE",
        ] {
            assert_eq!(help.contains(flag), webhooks, "{flag}:\n{help}");
        }
        // The retention's, which every build takes.
        assert!(help.contains("\n  --webhook-hold DURATION "), "{help}");
    }
    for command in [
        "webhook add",
        "webhook list",
        "webhook remove",
        "webhook enable",
    ] {
        let usage = format!("\n  plant-store {command} ");
        assert_eq!(out.contains(&usage), webhooks, "{command}:\n{out}");
    }
    if !webhooks {
        let (code, out, err) = run_cli(&["webhook", "--help"]);
        assert_eq!((code, out.as_str()), (2, ""));
        assert!(
            err.contains("without the `webhooks` cargo feature"),
            "{err}"
        );
    }
}
