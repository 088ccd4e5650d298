//! The command line and the environment, read and checked once into a `Command` whose
//! values are ready to use. Flags win over `PLANT_STORE_*` variables, which win over the
//! defaults.

use log::LevelFilter;
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
  plant-store token add PRINCIPAL [--read-only] [--db PATH]
                                       make a token; it is printed once, on the last line
  plant-store token list [--db PATH]   list tokens: id, principal, scope, created (UTC)
  plant-store token revoke ID [--db PATH]
                                       remove a token; it fails on its next request
  plant-store --help | --version

Options of serve (each also read from the environment variable shown):
  --addr HOST:PORT      listen address; port 0 picks a free port [PLANT_STORE_ADDR, 127.0.0.1:8080]
  --db PATH             SQLite database file, or :memory: [PLANT_STORE_DB, plants.db]
  --workers N           worker threads [PLANT_STORE_WORKERS, 4 x CPUs, at least 4, at most 64]
  --max-connections N   open connections; one more gets 503 and is closed [PLANT_STORE_MAX_CONNECTIONS, 2048]
  --queue-timeout SECS  a request that waited this long for a worker gets 503 [PLANT_STORE_QUEUE_TIMEOUT, 5]
  --read-timeout SECS   close a connection whose next request head is not complete this long after the last answer [PLANT_STORE_READ_TIMEOUT, 10]
  --body-timeout SECS   a request body must arrive whole within this long, or 408 [PLANT_STORE_BODY_TIMEOUT, 10]
  --drain-timeout SECS  wait for requests in flight on SIGTERM/SIGINT [PLANT_STORE_DRAIN_TIMEOUT, 10]
  --log-level LEVEL     off, error, warn, info, debug or trace [PLANT_STORE_LOG_LEVEL, info]

Environment only:
  PLANT_STORE_TOKEN     a bearer token accepted as principal `default`, read-write; never stored
";

#[derive(Debug, Clone)]
pub struct ServeConfig {
    pub addr: String,
    pub db: String,
    pub workers: usize,
    pub max_connections: usize,
    pub queue_timeout: Duration,
    pub drain_timeout: Duration,
    pub read_timeout: Duration,
    pub body_timeout: Duration,
    pub log_level: LevelFilter,
    pub token: Option<String>,
}

#[derive(Debug)]
pub enum Command {
    Serve(ServeConfig),
    TokenAdd {
        db: String,
        principal: String,
        read_only: bool,
    },
    TokenList {
        db: String,
    },
    TokenRevoke {
        db: String,
        id: String,
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
            "--read-only" => flags.push((arg.clone(), None)),
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
                "--workers",
                "--max-connections",
                "--queue-timeout",
                "--drain-timeout",
                "--read-timeout",
                "--body-timeout",
                "--log-level",
            ])?;
            let workers = match setting("--workers", "PLANT_STORE_WORKERS") {
                Some(v) => number(&v, "--workers", 1, MAX_WORKERS)?,
                None => default_workers(),
            };
            let max_connections = match setting("--max-connections", "PLANT_STORE_MAX_CONNECTIONS")
            {
                Some(v) => number(&v, "--max-connections", 1, 1 << 20)?,
                None => crate::connection::DEFAULT_MAX_CONNECTIONS,
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
            let log_level = match setting("--log-level", "PLANT_STORE_LOG_LEVEL") {
                Some(v) => v
                    .parse()
                    .map_err(|_| format!("--log-level: unknown level `{v}`"))?,
                None => LevelFilter::Info,
            };
            Ok(Command::Serve(ServeConfig {
                addr: setting("--addr", "PLANT_STORE_ADDR")
                    .unwrap_or_else(|| DEFAULT_ADDR.to_owned()),
                db,
                workers,
                max_connections,
                queue_timeout,
                drain_timeout,
                read_timeout,
                body_timeout,
                log_level,
                token: env("PLANT_STORE_TOKEN").filter(|t| !t.is_empty()),
            }))
        }
        ["token", "add", principal] => {
            allowed(&["--db", "--read-only"])?;
            let read_only = flag("--read-only").is_some();
            Ok(Command::TokenAdd {
                db,
                principal: principal.to_string(),
                read_only,
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
        _ => Err(format!(
            "unexpected arguments `{}`; see --help",
            positional.join(" ")
        )),
    }
}

/// 4 workers per CPU (a worker waits on fsync and on slow clients), from 4 to 64.
fn default_workers() -> usize {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    (4 * cpus).clamp(4, 64)
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
            (c.addr.as_str(), c.workers, c.db.as_str()),
            ("127.0.0.1:0", 3, DEFAULT_DB)
        );
        assert_eq!(
            (c.queue_timeout, c.log_level, c.token),
            (DEFAULT_QUEUE_TIMEOUT, LevelFilter::Info, None)
        );
    }

    #[test]
    fn bad_values_and_unknown_flags_are_refused() {
        let none = |_: &str| None;
        assert!(parse(&args("--workers 0"), none).is_err());
        assert!(parse(&args("--workers x"), none).is_err());
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
