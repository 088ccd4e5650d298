//! The command line and the environment, read and checked once into a `Command` whose
//! values are ready to use. Flags win over `PLANT_STORE_*` variables, which win over the
//! defaults.

use log::LevelFilter;
use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;

pub const DEFAULT_ADDR: &str = "127.0.0.1:8080";
pub const DEFAULT_DB: &str = "plants.db";
/// A request that waited this long for a worker is answered 503 instead of served.
pub const DEFAULT_QUEUE_TIMEOUT: Duration = Duration::from_secs(5);
/// How long SIGTERM/SIGINT waits for requests in flight before exiting anyway.
pub const DEFAULT_DRAIN_TIMEOUT: Duration = Duration::from_secs(10);
/// A connection whose next request head is not complete this long after the previous
/// answer (or after it opened) is closed: a total deadline, not one per read.
pub const DEFAULT_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// A request body must arrive whole within this long, or the answer is 408.
pub const DEFAULT_BODY_TIMEOUT: Duration = Duration::from_secs(10);
/// Most workers `--workers` accepts.
pub const MAX_WORKERS: usize = 1024;

/// The usage lines of `--help`, before the options of `serve`.
const USAGE: &str = "\
plant-store: a small HTTP store of plants

Usage:
  plant-store [serve] [OPTIONS]        run the HTTP service (the default)
  plant-store token add PRINCIPAL [--read-only] [--expires-in DURATION | --expires-at TIME] [--db PATH|URL]
                                       make a token; it is printed once, on the last line.
                                       DURATION: a whole number and s, m, h or d (90d, 12h);
                                       TIME: RFC 3339 (2027-01-31T12:00:00Z). Default: never expires
  plant-store token list [--db PATH|URL]
                                       list tokens: id, principal, scope, created (UTC)
  plant-store token revoke ID [--db PATH|URL]
                                       remove a token; it fails on its next request
  plant-store backup FILE [--force] [--db PATH|URL]
                                       a consistent copy of the database, taken while a
                                       server runs; --force replaces an existing FILE
  plant-store --help | --version

Options of serve (each also read from the environment variable shown):
";

/// The end of `--help`.
const ENVIRONMENT_ONLY: &str = "
Environment only:
  PLANT_STORE_TOKEN     a bearer token accepted as principal `default`, read-write; never stored
";

/// The commands, as the option table names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cmd {
    Serve,
    TokenAdd,
    TokenList,
    TokenRevoke,
    Backup,
}

const EVERY_COMMAND: &[Cmd] = &[
    Cmd::Serve,
    Cmd::TokenAdd,
    Cmd::TokenList,
    Cmd::TokenRevoke,
    Cmd::Backup,
];

/// One option: its flag, its value, its variable, its default as shown, its help, the
/// commands that take it, and how it sets its value. The parser, `--help` and the
/// README's flags table (a test compares them) are all made from `OPTIONS`.
struct Opt {
    flag: &'static str,
    /// The value's placeholder; `None`: a switch, which takes no value.
    value: Option<&'static str>,
    /// The environment variable read when the flag is absent.
    var: Option<&'static str>,
    default: &'static str,
    help: &'static str,
    commands: &'static [Cmd],
    set: fn(&mut Settings, &str) -> Result<(), String>,
}

/// Every option of every command. `serve`'s (those with a variable) are listed, in this
/// order, in `--help` and the README.
const OPTIONS: &[Opt] = &[
    Opt {
        flag: "--addr",
        value: Some("IP:PORT"),
        var: Some("PLANT_STORE_ADDR"),
        default: DEFAULT_ADDR,
        help: "listen address ([::]:PORT for IPv6, localhost:PORT); port 0 picks a free port",
        commands: &[Cmd::Serve],
        set: |s, v| Ok(s.serve.addr = parse_addr(v)?),
    },
    Opt {
        flag: "--db",
        value: Some("PATH|URL"),
        var: Some("PLANT_STORE_DB"),
        default: DEFAULT_DB,
        help: "SQLite database file, :memory:, or postgres://… with the postgres feature",
        commands: EVERY_COMMAND,
        set: |s, v| Ok(s.serve.db = v.to_owned()),
    },
    Opt {
        flag: "--db-pool",
        value: Some("N"),
        var: Some("PLANT_STORE_DB_POOL"),
        default: "8",
        help: "PostgreSQL only: connections this instance holds at most, the writer's included",
        commands: &[Cmd::Serve],
        set: |s, v| Ok(s.serve.db_pool = number(v, "--db-pool", 2, 1024)?),
    },
    Opt {
        flag: "--workers",
        value: Some("N"),
        var: Some("PLANT_STORE_WORKERS"),
        default: "4 x CPUs, at least 4, at most 64",
        help: "worker threads",
        commands: &[Cmd::Serve],
        set: |s, v| Ok(s.serve.workers = number(v, "--workers", 1, MAX_WORKERS)?),
    },
    Opt {
        flag: "--max-connections",
        value: Some("N"),
        var: Some("PLANT_STORE_MAX_CONNECTIONS"),
        default: "2048",
        help: "open connections; one more gets 503 and is closed",
        commands: &[Cmd::Serve],
        set: |s, v| Ok(s.serve.max_connections = number(v, "--max-connections", 1, 1 << 20)?),
    },
    Opt {
        flag: "--queue-timeout",
        value: Some("SECS"),
        var: Some("PLANT_STORE_QUEUE_TIMEOUT"),
        default: "5",
        help: "a request that waited this long for a worker gets 503",
        commands: &[Cmd::Serve],
        set: |s, v| Ok(s.serve.queue_timeout = seconds(v, "--queue-timeout", 1)?),
    },
    Opt {
        flag: "--read-timeout",
        value: Some("SECS"),
        var: Some("PLANT_STORE_READ_TIMEOUT"),
        default: "10",
        help: "close a connection whose next request head is not complete this long after the last answer",
        commands: &[Cmd::Serve],
        set: |s, v| Ok(s.serve.read_timeout = seconds(v, "--read-timeout", 1)?),
    },
    Opt {
        flag: "--body-timeout",
        value: Some("SECS"),
        var: Some("PLANT_STORE_BODY_TIMEOUT"),
        default: "10",
        help: "a request body must arrive whole within this long, or 408",
        commands: &[Cmd::Serve],
        set: |s, v| Ok(s.serve.body_timeout = seconds(v, "--body-timeout", 1)?),
    },
    Opt {
        flag: "--rate-limit",
        value: Some("RATE"),
        var: Some("PLANT_STORE_RATE_LIMIT"),
        default: "off",
        help: "requests per token, such as 100/s, 6000/m; over it 429",
        commands: &[Cmd::Serve],
        set: |s, v| {
            let limit = crate::api::ratelimit::parse(v, None).ok_or(format!(
                "--rate-limit must be a whole number of requests per s, m or h (such as 100/s), not `{v}`"
            ))?;
            Ok(s.serve.rate_limit = Some(limit))
        },
    },
    Opt {
        flag: "--rate-burst",
        value: Some("N"),
        var: Some("PLANT_STORE_RATE_BURST"),
        default: "one second's worth",
        help: "requests a token may send at once",
        commands: &[Cmd::Serve],
        set: |s, v| Ok(s.rate_burst = Some(number(v, "--rate-burst", 1, 1 << 30)? as u32)),
    },
    Opt {
        flag: "--drain-timeout",
        value: Some("SECS"),
        var: Some("PLANT_STORE_DRAIN_TIMEOUT"),
        default: "10",
        help: "wait for requests in flight on SIGTERM/SIGINT",
        commands: &[Cmd::Serve],
        set: |s, v| Ok(s.serve.drain_timeout = seconds(v, "--drain-timeout", 0)?),
    },
    Opt {
        flag: "--log-level",
        value: Some("LEVEL"),
        var: Some("PLANT_STORE_LOG_LEVEL"),
        default: "info",
        help: "off, error, warn, info, debug or trace",
        commands: &[Cmd::Serve],
        set: |s, v| {
            s.serve.log_level = v
                .parse()
                .map_err(|_| format!("--log-level: unknown level `{v}`"))?;
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
        set: |s, v| {
            s.serve.log_format = match v {
                "text" => crate::ops::logging::Format::Text,
                "json" => crate::ops::logging::Format::Json,
                other => return Err(format!("--log-format must be text or json, not `{other}`")),
            };
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
        set: |s, _| Ok(s.read_only = true),
    },
    Opt {
        flag: "--expires-in",
        value: Some("DURATION"),
        var: None,
        default: "never",
        help: "the token expires this long from now",
        commands: &[Cmd::TokenAdd],
        set: |s, v| {
            let at = parse_duration(v)
                .and_then(|d| crate::ops::clock::unix_now().checked_add(d))
                .ok_or(format!(
                    "--expires-in must be a whole number and s, m, h or d (such as 90d), not `{v}`"
                ))?;
            s.expiry(at)
        },
    },
    Opt {
        flag: "--expires-at",
        value: Some("TIME"),
        var: None,
        default: "never",
        help: "the token expires at this time",
        commands: &[Cmd::TokenAdd],
        set: |s, v| {
            let at = crate::ops::clock::parse_rfc3339(v).ok_or(format!(
                "--expires-at must be an RFC 3339 time such as 2027-01-31T12:00:00Z, not `{v}`"
            ))?;
            s.expiry(at)
        },
    },
    Opt {
        flag: "--force",
        value: None,
        var: None,
        default: "off",
        help: "replace an existing backup file",
        commands: &[Cmd::Backup],
        set: |s, _| Ok(s.force = true),
    },
];

/// Every value an option sets, before it is made into a `Command`.
struct Settings {
    serve: ServeConfig,
    rate_burst: Option<u32>,
    read_only: bool,
    /// Seconds since the Unix epoch.
    expires_at: Option<i64>,
    force: bool,
}

impl Settings {
    fn expiry(&mut self, at: i64) -> Result<(), String> {
        if self.expires_at.replace(at).is_some() {
            return Err("give --expires-in or --expires-at, not both".into());
        }
        Ok(())
    }
}

impl Default for ServeConfig {
    fn default() -> ServeConfig {
        ServeConfig {
            addr: parse_addr(DEFAULT_ADDR).expect("the default address parses"),
            db: DEFAULT_DB.to_owned(),
            db_pool: crate::store::DEFAULT_DB_POOL,
            workers: default_workers(),
            max_connections: crate::http::accept::DEFAULT_MAX_CONNECTIONS,
            queue_timeout: DEFAULT_QUEUE_TIMEOUT,
            drain_timeout: DEFAULT_DRAIN_TIMEOUT,
            read_timeout: DEFAULT_READ_TIMEOUT,
            body_timeout: DEFAULT_BODY_TIMEOUT,
            rate_limit: None,
            log_level: LevelFilter::Info,
            log_format: crate::ops::logging::Format::Text,
            token: None,
        }
    }
}

/// `--help`: the usage, then `serve`'s options from `OPTIONS`.
pub fn help() -> String {
    let mut out = USAGE.to_owned();
    for opt in served() {
        let name = format!("{} {}", opt.flag, opt.value.unwrap_or(""));
        let var = opt.var.unwrap_or("");
        out.push_str(&format!(
            "  {name:<21} {} [{var}, {}]\n",
            opt.help, opt.default
        ));
    }
    out.push_str(ENVIRONMENT_ONLY);
    out
}

/// The README's flags table: `serve`'s options from `OPTIONS`, as Markdown.
#[cfg(test)]
fn markdown() -> String {
    let mut out = String::from("| flag | environment | default | meaning |\n|---|---|---|---|\n");
    for opt in served() {
        let value = opt.value.map_or(String::new(), |v| format!(" {v}"));
        out.push_str(&format!(
            "| `{}{value}` | `{}` | {} | {} |\n",
            opt.flag,
            opt.var.unwrap_or(""),
            opt.default,
            opt.help.replace('|', "\\|")
        ));
    }
    out.push_str("| | `PLANT_STORE_TOKEN` | unset | a bearer token accepted as principal `default`, read-write; never stored |\n");
    out
}

/// `serve`'s options, in the order of `--help`.
fn served() -> impl Iterator<Item = &'static Opt> {
    OPTIONS.iter().filter(|o| o.commands.contains(&Cmd::Serve))
}

#[derive(Debug, Clone)]
pub struct ServeConfig {
    pub addr: SocketAddr,
    pub db: String,
    pub db_pool: usize,
    pub workers: usize,
    pub max_connections: usize,
    pub queue_timeout: Duration,
    pub drain_timeout: Duration,
    pub read_timeout: Duration,
    pub body_timeout: Duration,
    pub rate_limit: Option<crate::api::ratelimit::RateLimit>,
    pub log_level: LevelFilter,
    pub log_format: crate::ops::logging::Format,
    pub token: Option<String>,
}

#[derive(Debug)]
pub enum Command {
    Serve(ServeConfig),
    TokenAdd {
        db: String,
        principal: String,
        read_only: bool,
        /// Seconds since the Unix epoch; `None`: never.
        expires_at: Option<i64>,
    },
    TokenList {
        db: String,
    },
    TokenRevoke {
        db: String,
        id: String,
    },
    Backup {
        db: String,
        /// Where the copy goes.
        to: String,
        /// Replace an existing file at `to`.
        force: bool,
    },
    Help,
    Version,
}

/// Reads the arguments (without the program name) and a lookup of the environment.
pub fn parse(args: &[String], env: impl Fn(&str) -> Option<String>) -> Result<Command, String> {
    let mut positional = Vec::new();
    let mut given: Vec<(&'static Opt, String)> = Vec::new();
    let mut unknown: Option<String> = None;
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "-h" | "--help" => return Ok(Command::Help),
            "-V" | "--version" => return Ok(Command::Version),
            a if a.starts_with("--") => {
                let (name, inline) = match a.split_once('=') {
                    Some((n, v)) => (n, Some(v)),
                    None => (a, None),
                };
                let Some(opt) = OPTIONS.iter().find(|o| o.flag == name) else {
                    // Refused once every argument is read: `--help` anywhere wins.
                    unknown.get_or_insert(format!("unknown option {name} here; see --help"));
                    continue;
                };
                let value = match (opt.value, inline) {
                    (None, _) => String::new(),
                    (Some(_), Some(v)) => v.to_owned(),
                    (Some(_), None) => it.next().ok_or(format!("{a} needs a value"))?.clone(),
                };
                given.push((opt, value));
            }
            _ => positional.push(arg.as_str()),
        }
    }
    if let Some(unknown) = unknown {
        return Err(unknown);
    }
    let cmd = match positional.as_slice() {
        [] | ["serve"] => Cmd::Serve,
        ["token", "add", _] => Cmd::TokenAdd,
        ["token", "list"] => Cmd::TokenList,
        ["token", "revoke", _] => Cmd::TokenRevoke,
        ["backup", _] => Cmd::Backup,
        _ => {
            return Err(format!(
                "unexpected arguments `{}`; see --help",
                positional.join(" ")
            ));
        }
    };
    if let Some((opt, _)) = given.iter().find(|(o, _)| !o.commands.contains(&cmd)) {
        return Err(format!("unknown option {} here; see --help", opt.flag));
    }
    let mut settings = Settings {
        serve: ServeConfig::default(),
        rate_burst: None,
        read_only: false,
        expires_at: None,
        force: false,
    };
    for opt in OPTIONS.iter().filter(|o| o.commands.contains(&cmd)) {
        // The last of a repeated flag wins; then the variable.
        let value = match given.iter().rev().find(|(o, _)| o.flag == opt.flag) {
            Some((_, v)) => Some(v.clone()),
            None => opt.var.and_then(&env),
        };
        if let Some(value) = value {
            (opt.set)(&mut settings, &value)?;
        }
    }
    let Settings {
        serve: mut config,
        rate_burst,
        read_only,
        expires_at,
        force,
    } = settings;
    let db = config.db.clone();
    match (cmd, positional.as_slice()) {
        (Cmd::Serve, _) => {
            match (&mut config.rate_limit, rate_burst) {
                (Some(limit), Some(burst)) => limit.burst = burst,
                (None, Some(_)) => return Err("--rate-burst needs --rate-limit".into()),
                _ => {}
            }
            config.token = env("PLANT_STORE_TOKEN").filter(|t| !t.is_empty());
            Ok(Command::Serve(config))
        }
        (Cmd::TokenAdd, [.., principal]) => {
            if expires_at.is_some_and(|t| t <= crate::ops::clock::unix_now()) {
                return Err("the expiry is not in the future".into());
            }
            Ok(Command::TokenAdd {
                db,
                principal: principal.to_string(),
                read_only,
                expires_at,
            })
        }
        (Cmd::TokenList, _) => Ok(Command::TokenList { db }),
        (Cmd::TokenRevoke, [.., id]) => Ok(Command::TokenRevoke {
            db,
            id: id.to_string(),
        }),
        (Cmd::Backup, [_, path]) => Ok(Command::Backup {
            db,
            to: path.to_string(),
            force,
        }),
        _ => unreachable!("the command was matched from these arguments"),
    }
}

/// A number of whole seconds from `min` to an hour.
fn seconds(v: &str, name: &str, min: usize) -> Result<Duration, String> {
    Ok(Duration::from_secs(number(v, name, min, 3600)? as u64))
}

/// A duration such as `90d`, `12h`, `30m` or `45s`, in seconds.
fn parse_duration(v: &str) -> Option<i64> {
    let unit = match v.bytes().last()? {
        b's' => 1,
        b'm' => 60,
        b'h' => 3600,
        b'd' => 86_400,
        _ => return None,
    };
    let n = &v[..v.len() - 1];
    if n.is_empty() || !n.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    n.parse::<i64>().ok()?.checked_mul(unit)
}

/// 4 workers per CPU (a worker waits on fsync and on slow clients), from 4 to 64.
fn default_workers() -> usize {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    (4 * cpus).clamp(4, 64)
}

/// A listen address: an IP address and a port (`127.0.0.1:8080`, `[::]:8080`), or
/// `localhost:PORT` for 127.0.0.1. No other name is looked up: where a server listens
/// should not depend on a resolver, and a name with several addresses is ambiguous.
fn parse_addr(addr: &str) -> Result<SocketAddr, String> {
    let bad = || {
        format!(
            "--addr must be an IP address and a port, such as 127.0.0.1:8080, [::]:8080 or localhost:8080, not `{addr}`"
        )
    };
    match addr.strip_prefix("localhost:") {
        Some(port) => Ok(SocketAddr::from((
            Ipv4Addr::LOCALHOST,
            port.parse().map_err(|_| bad())?,
        ))),
        None => addr.parse().map_err(|_| bad()),
    }
}

fn number(v: &str, name: &str, min: usize, max: usize) -> Result<usize, String> {
    match v.parse::<usize>() {
        Ok(n) if (min..=max).contains(&n) => Ok(n),
        _ => Err(format!(
            "{name} must be a whole number from {min} to {max}, not `{v}`"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_owned).collect()
    }

    #[test]
    fn the_readme_flags_table_is_the_option_table() {
        let readme = include_str!("../../README.md");
        let start = "<!-- options: generated from the option table (src/cli/options.rs); a test checks it -->\n";
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
            (c.addr.to_string().as_str(), c.workers, c.db.as_str()),
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
}
