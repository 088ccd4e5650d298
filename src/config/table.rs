//! The option table: every option of every command, declared once, and the parsers of
//! their values.

use crate::config::control;
use crate::config::serve::{
    DEFAULT_ADDR, DEFAULT_DB, MAX_DURATION_SECS, MAX_TIMEOUT_SECS, MAX_WORKERS,
};
use crate::config::settings::Settings;
use crate::config::values::{duration, number, parse_addr, switch};
use crate::config::webhook;
use crate::store::Location;

/// The commands, as the option table names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Cmd {
    Serve,
    TokenAdd,
    TokenList,
    TokenRevoke,
    WebhookAdd,
    WebhookList,
    WebhookRemove,
    WebhookEnable,
    Backup,
    Healthcheck,
    Compact,
}

/// The commands that open a database (`--db`).
const DB_COMMANDS: &[Cmd] = &[
    Cmd::Serve,
    Cmd::TokenAdd,
    Cmd::TokenList,
    Cmd::TokenRevoke,
    Cmd::WebhookAdd,
    Cmd::WebhookList,
    Cmd::WebhookRemove,
    Cmd::WebhookEnable,
    Cmd::Backup,
    Cmd::Compact,
];

/// One option: its flag, its value, its variable, its default as shown, its help, the
/// commands that take it, and how it sets its value. The parser, `--help` and the
/// flags table of docs/reference.md (a test compares them) are all made from `OPTIONS`.
pub(crate) struct Opt {
    pub(crate) flag: &'static str,
    /// The value's placeholder; `None`: a switch, which takes no value.
    pub(crate) value: Option<&'static str>,
    /// The environment variable read when the flag is absent.
    pub(crate) var: Option<&'static str>,
    pub(crate) default: &'static str,
    pub(crate) help: &'static str,
    pub(crate) commands: &'static [Cmd],
    /// Sets the value (the second argument); the third names what it was read from, the
    /// flag or the variable, for its errors.
    pub(crate) set: fn(&mut Settings, &str, &'static str) -> Result<(), String>,
}

/// Every option of every command. `serve`'s (those with a variable) are listed, in this
/// order, in `--help` and docs/reference.md.
pub(crate) const OPTIONS: &[Opt] = &[
    Opt {
        flag: "--addr",
        value: Some("IP:PORT"),
        var: Some("PLANT_STORE_ADDR"),
        default: DEFAULT_ADDR,
        help: "listen address ([::]:PORT for IPv6, localhost:PORT); port 0 picks a free port",
        commands: &[Cmd::Serve, Cmd::Healthcheck],
        set: |s, v, name| {
            s.serve.addr = parse_addr(v, name)?;
            Ok(())
        },
    },
    Opt {
        flag: "--db",
        value: Some("PATH|URL"),
        var: Some("PLANT_STORE_DB"),
        default: DEFAULT_DB,
        help: "SQLite database file, :memory:, or postgres://… with the postgres feature",
        commands: DB_COMMANDS,
        set: |s, v, name| {
            // SQLite would open a `file:` name as a URI (its parameters choose the mode,
            // the VFS, another file): a path is a path.
            if v.starts_with("file:") {
                return Err(format!(
                    "{name} takes a path, not a SQLite URI (`{v}`); a file whose name begins with `file:` is ./file:…"
                ));
            }
            s.serve.db = Location::parse(v);
            s.serve.db.check().map_err(|e| format!("{name}: {e}"))
        },
    },
    Opt {
        flag: "--db-pool",
        value: Some("N"),
        var: Some("PLANT_STORE_DB_POOL"),
        default: "8",
        help: "PostgreSQL only: connections this instance holds at most, the writer's included",
        commands: &[Cmd::Serve],
        set: |s, v, name| {
            s.serve.db_pool = number(v, name, 2, 1024)?;
            Ok(())
        },
    },
    Opt {
        flag: "--event-retention",
        value: Some("DURATION"),
        var: Some("PLANT_STORE_EVENT_RETENTION"),
        default: "7d",
        help: "events older than this (such as 7d, 12h, 30m, 45s) are removed from the change feed",
        commands: &[Cmd::Serve],
        set: |s, v, name| {
            s.serve.event_retention = duration(v, name, 1, MAX_DURATION_SECS)?;
            Ok(())
        },
    },
    Opt {
        flag: "--webhook-hold",
        value: Some("DURATION"),
        var: Some("PLANT_STORE_WEBHOOK_HOLD"),
        default: "7d",
        help: "an active webhook endpoint whose next event is this much past the retention is disabled, and its events are left to the retention",
        commands: &[Cmd::Serve],
        set: |s, v, name| {
            s.serve.webhook_hold = duration(v, name, 1, MAX_DURATION_SECS)?;
            Ok(())
        },
    },
    Opt {
        flag: "--webhook-threads",
        value: Some("N"),
        var: Some("PLANT_STORE_WEBHOOK_THREADS"),
        default: "4",
        help: "webhook endpoints posted to at once (each by its own thread); more wait their turn",
        commands: &[Cmd::Serve],
        set: |s, v, name| webhook::set_threads(&mut s.serve.webhooks, v, name),
    },
    Opt {
        flag: "--webhook-timeout",
        value: Some("DURATION"),
        var: Some("PLANT_STORE_WEBHOOK_TIMEOUT"),
        default: "10s",
        help: "a webhook attempt (connect, send, answer) that takes longer has failed",
        commands: &[Cmd::Serve],
        set: |s, v, name| webhook::set_timeout(&mut s.serve.webhooks, v, name),
    },
    Opt {
        flag: "--webhook-schedule",
        value: Some("DURATION,…"),
        var: Some("PLANT_STORE_WEBHOOK_SCHEDULE"),
        default: webhook::DEFAULT_SCHEDULE,
        help: "the waits between attempts at one event (N waits, N + 1 attempts); then the endpoint is disabled",
        commands: &[Cmd::Serve],
        set: |s, v, name| webhook::set_schedule(&mut s.serve.webhooks, v, name),
    },
    Opt {
        flag: "--webhook-ca",
        value: Some("FILE"),
        var: Some("PLANT_STORE_WEBHOOK_CA"),
        default: "unset: the built-in roots",
        help: "PEM certificates that https webhook endpoints are checked against, instead of the built-in roots",
        commands: &[Cmd::Serve],
        set: |s, v, name| webhook::set_ca(&mut s.serve.webhooks, v, name),
    },
    Opt {
        flag: "--workers",
        value: Some("N"),
        var: Some("PLANT_STORE_WORKERS"),
        default: "4 x CPUs, at least 4, at most 64",
        help: "worker threads",
        commands: &[Cmd::Serve],
        set: |s, v, name| {
            s.serve.workers = number(v, name, 1, MAX_WORKERS)?;
            Ok(())
        },
    },
    Opt {
        flag: "--max-connections",
        value: Some("N"),
        var: Some("PLANT_STORE_MAX_CONNECTIONS"),
        default: "2048",
        help: "open connections; one more gets 503 and is closed",
        commands: &[Cmd::Serve],
        set: |s, v, name| {
            s.serve.max_connections = number(v, name, 1, 1 << 20)?;
            Ok(())
        },
    },
    Opt {
        flag: "--max-streams",
        value: Some("N"),
        var: Some("PLANT_STORE_MAX_STREAMS"),
        default: "1024",
        help: "open event streams (each also a connection; at most half of --max-connections); one more gets 503; 0: none",
        commands: &[Cmd::Serve],
        set: |s, v, name| {
            s.serve.max_streams = number(v, name, 0, 1 << 20)?;
            Ok(())
        },
    },
    Opt {
        flag: "--max-streams-per-principal",
        value: Some("N"),
        var: Some("PLANT_STORE_MAX_STREAMS_PER_PRINCIPAL"),
        default: "64",
        help: "open event streams of one principal; one more gets 503",
        commands: &[Cmd::Serve],
        set: |s, v, name| {
            s.serve.max_streams_per_principal = number(v, name, 0, 1 << 20)?;
            Ok(())
        },
    },
    Opt {
        flag: "--queue-timeout",
        value: Some("DURATION"),
        var: Some("PLANT_STORE_QUEUE_TIMEOUT"),
        default: "5s",
        help: "a request that waited this long for a worker gets 503",
        commands: &[Cmd::Serve],
        set: |s, v, name| {
            s.serve.queue_timeout = duration(v, name, 1, MAX_TIMEOUT_SECS)?;
            Ok(())
        },
    },
    Opt {
        flag: "--read-timeout",
        value: Some("DURATION"),
        var: Some("PLANT_STORE_READ_TIMEOUT"),
        default: "10s",
        help: "close a connection whose next request head is not complete this long after the last answer",
        commands: &[Cmd::Serve],
        set: |s, v, name| {
            s.serve.read_timeout = duration(v, name, 1, MAX_TIMEOUT_SECS)?;
            Ok(())
        },
    },
    Opt {
        flag: "--body-timeout",
        value: Some("DURATION"),
        var: Some("PLANT_STORE_BODY_TIMEOUT"),
        default: "10s",
        help: "a request body must arrive whole within this long, or 408",
        commands: &[Cmd::Serve],
        set: |s, v, name| {
            s.serve.body_timeout = duration(v, name, 1, MAX_TIMEOUT_SECS)?;
            Ok(())
        },
    },
    Opt {
        flag: "--write-timeout",
        value: Some("DURATION"),
        var: Some("PLANT_STORE_WRITE_TIMEOUT"),
        default: "10s",
        help: "close a connection whose client takes in less than 16 KiB of an answer in this long while the answer waits on it",
        commands: &[Cmd::Serve],
        set: |s, v, name| {
            s.serve.write_timeout = duration(v, name, 1, MAX_TIMEOUT_SECS)?;
            Ok(())
        },
    },
    Opt {
        flag: "--rate-limit",
        value: Some("RATE"),
        var: Some("PLANT_STORE_RATE_LIMIT"),
        default: "off",
        help: "requests per token, such as 100/s, 6000/m; over it 429",
        commands: &[Cmd::Serve],
        set: |s, v, name| {
            let limit = crate::api::ratelimit::parse(v, None).ok_or(format!(
                "{name} must be a whole number of requests per s, m or h (such as 100/s), not `{v}`"
            ))?;
            s.serve.rate_limit = Some(limit);
            Ok(())
        },
    },
    Opt {
        flag: "--rate-burst",
        value: Some("N"),
        var: Some("PLANT_STORE_RATE_BURST"),
        default: "one second's worth",
        help: "requests a token may send at once",
        commands: &[Cmd::Serve],
        set: |s, v, name| {
            s.rate_burst = Some((number(v, name, 1, 1 << 30)? as u32, name));
            Ok(())
        },
    },
    Opt {
        flag: "--drain-timeout",
        value: Some("DURATION"),
        var: Some("PLANT_STORE_DRAIN_TIMEOUT"),
        default: "10s",
        help: "wait for requests in flight on SIGTERM/SIGINT/SIGHUP; past it they are reset, and the exit skips the final checkpoint (the next start applies the WAL)",
        commands: &[Cmd::Serve],
        set: |s, v, name| {
            s.serve.drain_timeout = duration(v, name, 0, MAX_TIMEOUT_SECS)?;
            Ok(())
        },
    },
    Opt {
        flag: "--log-level",
        value: Some("LEVEL"),
        var: Some("PLANT_STORE_LOG_LEVEL"),
        default: "info",
        help: "off, error, warn, info, debug or trace",
        commands: &[Cmd::Serve],
        set: |s, v, name| {
            s.serve.log_level = v.parse().map_err(|_| {
                format!("{name} must be off, error, warn, info, debug or trace, not `{v}`")
            })?;
            Ok(())
        },
    },
    Opt {
        flag: "--log-format",
        value: Some("FORMAT"),
        var: Some("PLANT_STORE_LOG_FORMAT"),
        default: "text",
        help: "text, or json: one object per line",
        commands: &[Cmd::Serve],
        set: |s, v, name| {
            s.serve.log_format = match v {
                "text" => crate::ops::logging::Format::Text,
                "json" => crate::ops::logging::Format::Json,
                other => return Err(format!("{name} must be text or json, not `{other}`")),
            };
            Ok(())
        },
    },
    Opt {
        flag: "--exit-on-stdin-close",
        value: None,
        var: Some("PLANT_STORE_EXIT_ON_STDIN_CLOSE"),
        default: "off",
        help: "stop, as on SIGTERM, once standard input is closed (its parent, holding the pipe, ended); the variable takes 1 or 0",
        commands: &[Cmd::Serve],
        set: |s, v, name| {
            s.serve.exit_on_stdin_close = switch(v, name)?;
            Ok(())
        },
    },
    Opt {
        flag: "--read-only",
        value: None,
        var: None,
        default: "read-write",
        help: "the token may only read",
        commands: &[Cmd::TokenAdd],
        set: |s, v, name| {
            s.read_only = switch(v, name)?;
            Ok(())
        },
    },
    Opt {
        flag: "--expires-in",
        value: Some("DURATION"),
        var: None,
        default: "never",
        help: "the token expires this long from now",
        commands: &[Cmd::TokenAdd],
        set: |s, v, name| {
            let d = duration(v, name, 1, MAX_DURATION_SECS)?;
            s.expiry(crate::ops::clock::system_now().saturating_add(d.as_secs() as i64))
        },
    },
    Opt {
        flag: "--expires-at",
        value: Some("TIME"),
        var: None,
        default: "never",
        help: "the token expires at this time",
        commands: &[Cmd::TokenAdd],
        set: |s, v, name| {
            let at =
                crate::api::auth::parse_expiry(v).map_err(|e| format!("{name} {e}, not `{v}`"))?;
            s.expiry(at)
        },
    },
    Opt {
        flag: "--test-control",
        value: None,
        var: Some("PLANT_STORE_TEST_CONTROL"),
        default: "off",
        help: "test control under /_control/, behind PLANT_STORE_CONTROL_TOKEN (SQLite only; docs/testing.md); the variable takes 1 or 0",
        commands: &[Cmd::Serve],
        set: |s, v, name| {
            s.serve.test_control = control::on(v, name)?;
            Ok(())
        },
    },
    Opt {
        flag: "--allow-test-file",
        value: None,
        var: Some("PLANT_STORE_ALLOW_TEST_FILE"),
        default: "off",
        help: "serve a database file that test control has written, without test control: only when you mean it for production (tokens minted there under a known --test-seed can be computed); the variable takes 1 or 0",
        commands: &[Cmd::Serve],
        set: |s, v, name| {
            s.serve.allow_test_file = switch(v, name)?;
            Ok(())
        },
    },
    Opt {
        flag: "--seed",
        value: Some("FILE"),
        var: Some("PLANT_STORE_SEED"),
        default: "unset",
        help: "a JSON file of tokens and plants loaded in one transaction before the server listens (SQLite only; docs/control.md)",
        commands: &[Cmd::Serve],
        set: |s, v, name| {
            // Read at start; a path to no readable file is refused now (a FIFO would
            // hold the start forever).
            let file = std::fs::metadata(v).and_then(|m| match m.is_file() {
                true => std::fs::File::open(v).map(drop),
                false => Err(std::io::Error::other("not a regular file")),
            });
            file.map_err(|e| format!("{name}: cannot read the seed file {v}: {e}"))?;
            s.serve.seed = Some(v.into());
            Ok(())
        },
    },
    Opt {
        flag: "--journal-size",
        value: Some("N"),
        var: Some("PLANT_STORE_JOURNAL_SIZE"),
        default: "1000",
        help: "with --test-control: requests GET /_control/requests keeps; 0 keeps none",
        commands: &[Cmd::Serve],
        set: |s, v, name| {
            s.serve.journal_size = control::journal_size(v, name)?;
            s.test_control_only(name);
            Ok(())
        },
    },
    Opt {
        flag: "--journal-bytes",
        value: Some("BYTES"),
        var: Some("PLANT_STORE_JOURNAL_BYTES"),
        default: "67108864",
        help: "with --test-control: what the journal's entries may cost in all (headers and bodies count), in bytes; the oldest go first; 0 keeps none",
        commands: &[Cmd::Serve],
        set: |s, v, name| {
            s.serve.journal_bytes = control::journal_bytes(v, name)?;
            s.test_control_only(name);
            Ok(())
        },
    },
    Opt {
        flag: "--test-seed",
        value: Some("N"),
        var: Some("PLANT_STORE_TEST_SEED"),
        default: "unset",
        help: "with --test-control: event, snapshot and fault ids and minted tokens from a generator seeded with N (0 to 2^64-1), restarted by a reset; predictable, so tests only",
        commands: &[Cmd::Serve],
        set: |s, v, name| {
            s.serve.test_seed = Some(control::test_seed(v, name)?);
            s.test_control_only(name);
            Ok(())
        },
    },
    Opt {
        flag: "--force",
        value: None,
        var: None,
        default: "off",
        help: "replace an existing backup file",
        commands: &[Cmd::Backup],
        set: |s, v, name| {
            s.force = switch(v, name)?;
            Ok(())
        },
    },
    Opt {
        flag: "--create",
        value: None,
        var: None,
        default: "off",
        help: "make a new database if none is at --db (else a missing one is refused)",
        commands: &[Cmd::TokenAdd, Cmd::WebhookAdd],
        set: |s, v, name| {
            s.create = switch(v, name)?;
            Ok(())
        },
    },
];
