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

pub const HELP: &str = "\
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
  --addr IP:PORT        listen address ([::]:PORT for IPv6, localhost:PORT); port 0 picks a free port [PLANT_STORE_ADDR, 127.0.0.1:8080]
  --db PATH|URL         SQLite database file, :memory:, or postgres://… with the postgres feature [PLANT_STORE_DB, plants.db]
  --db-pool N           PostgreSQL only: connections this instance holds at most, the writer's included [PLANT_STORE_DB_POOL, 8]
  --workers N           worker threads [PLANT_STORE_WORKERS, 4 x CPUs, at least 4, at most 64]
  --max-connections N   open connections; one more gets 503 and is closed [PLANT_STORE_MAX_CONNECTIONS, 2048]
  --queue-timeout SECS  a request that waited this long for a worker gets 503 [PLANT_STORE_QUEUE_TIMEOUT, 5]
  --read-timeout SECS   close a connection whose next request head is not complete this long after the last answer [PLANT_STORE_READ_TIMEOUT, 10]
  --body-timeout SECS   a request body must arrive whole within this long, or 408 [PLANT_STORE_BODY_TIMEOUT, 10]
  --rate-limit RATE     requests per token, such as 100/s, 6000/m; over it 429 [PLANT_STORE_RATE_LIMIT, off]
  --rate-burst N        requests a token may send at once [PLANT_STORE_RATE_BURST, one second's worth]
  --drain-timeout SECS  wait for requests in flight on SIGTERM/SIGINT [PLANT_STORE_DRAIN_TIMEOUT, 10]
  --log-level LEVEL     off, error, warn, info, debug or trace [PLANT_STORE_LOG_LEVEL, info]
  --log-format FORMAT   text, or json: one object per line [PLANT_STORE_LOG_FORMAT, text]

Environment only:
  PLANT_STORE_TOKEN     a bearer token accepted as principal `default`, read-write; never stored
";

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
    let mut flags: Vec<(String, Option<String>)> = Vec::new();
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "-h" | "--help" => return Ok(Command::Help),
            "-V" | "--version" => return Ok(Command::Version),
            "--read-only" | "--force" => flags.push((arg.clone(), None)),
            a if a.starts_with("--") => {
                let (name, value) = match a.split_once('=') {
                    Some((n, v)) => (n.to_owned(), v.to_owned()),
                    None => {
                        let v = it.next().ok_or(format!("{a} needs a value"))?;
                        (a.to_owned(), v.clone())
                    }
                };
                flags.push((name, Some(value)));
            }
            _ => positional.push(arg.as_str()),
        }
    }
    let flag = |name: &str| {
        flags
            .iter()
            .rev()
            .find(|f| f.0 == name)
            .map(|f| f.1.clone())
    };
    let setting = |name: &str, var: &str| flag(name).flatten().or_else(|| env(var));
    let allowed = |names: &[&str]| match flags.iter().find(|f| !names.contains(&f.0.as_str())) {
        Some(f) => Err(format!("unknown option {} here; see --help", f.0)),
        None => Ok(()),
    };
    let db = setting("--db", "PLANT_STORE_DB").unwrap_or_else(|| DEFAULT_DB.to_owned());

    match positional.as_slice() {
        [] | ["serve"] => {
            allowed(&[
                "--addr",
                "--db",
                "--db-pool",
                "--workers",
                "--max-connections",
                "--queue-timeout",
                "--drain-timeout",
                "--read-timeout",
                "--body-timeout",
                "--rate-limit",
                "--rate-burst",
                "--log-level",
                "--log-format",
            ])?;
            let workers = match setting("--workers", "PLANT_STORE_WORKERS") {
                Some(v) => number(&v, "--workers", 1, MAX_WORKERS)?,
                None => default_workers(),
            };
            let db_pool = match setting("--db-pool", "PLANT_STORE_DB_POOL") {
                Some(v) => number(&v, "--db-pool", 2, 1024)?,
                None => crate::store::DEFAULT_DB_POOL,
            };
            let max_connections = match setting("--max-connections", "PLANT_STORE_MAX_CONNECTIONS")
            {
                Some(v) => number(&v, "--max-connections", 1, 1 << 20)?,
                None => crate::http::accept::DEFAULT_MAX_CONNECTIONS,
            };
            let queue_timeout = match setting("--queue-timeout", "PLANT_STORE_QUEUE_TIMEOUT") {
                Some(v) => Duration::from_secs(number(&v, "--queue-timeout", 1, 3600)? as u64),
                None => DEFAULT_QUEUE_TIMEOUT,
            };
            let drain_timeout = match setting("--drain-timeout", "PLANT_STORE_DRAIN_TIMEOUT") {
                Some(v) => Duration::from_secs(number(&v, "--drain-timeout", 0, 3600)? as u64),
                None => DEFAULT_DRAIN_TIMEOUT,
            };
            let read_timeout = match setting("--read-timeout", "PLANT_STORE_READ_TIMEOUT") {
                Some(v) => Duration::from_secs(number(&v, "--read-timeout", 1, 3600)? as u64),
                None => DEFAULT_READ_TIMEOUT,
            };
            let body_timeout = match setting("--body-timeout", "PLANT_STORE_BODY_TIMEOUT") {
                Some(v) => Duration::from_secs(number(&v, "--body-timeout", 1, 3600)? as u64),
                None => DEFAULT_BODY_TIMEOUT,
            };
            let burst = match setting("--rate-burst", "PLANT_STORE_RATE_BURST") {
                Some(v) => Some(number(&v, "--rate-burst", 1, 1 << 30)? as u32),
                None => None,
            };
            let rate_limit = match setting("--rate-limit", "PLANT_STORE_RATE_LIMIT") {
                Some(v) => Some(crate::api::ratelimit::parse(&v, burst).ok_or(format!(
                    "--rate-limit must be a whole number of requests per s, m or h (such as 100/s), not `{v}`"
                ))?),
                None if burst.is_some() => {
                    return Err("--rate-burst needs --rate-limit".into());
                }
                None => None,
            };
            let log_level = match setting("--log-level", "PLANT_STORE_LOG_LEVEL") {
                Some(v) => v
                    .parse()
                    .map_err(|_| format!("--log-level: unknown level `{v}`"))?,
                None => LevelFilter::Info,
            };
            let log_format = match setting("--log-format", "PLANT_STORE_LOG_FORMAT").as_deref() {
                None | Some("text") => crate::ops::logging::Format::Text,
                Some("json") => crate::ops::logging::Format::Json,
                Some(other) => {
                    return Err(format!("--log-format must be text or json, not `{other}`"));
                }
            };
            Ok(Command::Serve(ServeConfig {
                addr: parse_addr(
                    &setting("--addr", "PLANT_STORE_ADDR")
                        .unwrap_or_else(|| DEFAULT_ADDR.to_owned()),
                )?,
                db,
                db_pool,
                workers,
                max_connections,
                queue_timeout,
                drain_timeout,
                read_timeout,
                body_timeout,
                rate_limit,
                log_level,
                log_format,
                token: env("PLANT_STORE_TOKEN").filter(|t| !t.is_empty()),
            }))
        }
        ["token", "add", principal] => {
            allowed(&["--db", "--read-only", "--expires-in", "--expires-at"])?;
            let read_only = flag("--read-only").is_some();
            let now = crate::ops::clock::unix_now();
            let expires_at = match (flag("--expires-in").flatten(), flag("--expires-at").flatten()) {
                (Some(_), Some(_)) => {
                    return Err("give --expires-in or --expires-at, not both".into());
                }
                (Some(v), None) => Some(
                    parse_duration(&v)
                        .and_then(|d| now.checked_add(d))
                        .ok_or(format!(
                            "--expires-in must be a whole number and s, m, h or d (such as 90d), not `{v}`"
                        ))?,
                ),
                (None, Some(v)) => Some(crate::ops::clock::parse_rfc3339(&v).ok_or(format!(
                    "--expires-at must be an RFC 3339 time such as 2027-01-31T12:00:00Z, not `{v}`"
                ))?),
                (None, None) => None,
            };
            if expires_at.is_some_and(|t| t <= now) {
                return Err("the expiry is not in the future".into());
            }
            Ok(Command::TokenAdd {
                db,
                principal: principal.to_string(),
                read_only,
                expires_at,
            })
        }
        ["token", "list"] => {
            allowed(&["--db"])?;
            Ok(Command::TokenList { db })
        }
        ["token", "revoke", id] => {
            allowed(&["--db"])?;
            Ok(Command::TokenRevoke {
                db,
                id: id.to_string(),
            })
        }
        ["backup", path] => {
            allowed(&["--db", "--force"])?;
            Ok(Command::Backup {
                db,
                to: path.to_string(),
                force: flag("--force").is_some(),
            })
        }
        _ => Err(format!(
            "unexpected arguments `{}`; see --help",
            positional.join(" ")
        )),
    }
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
