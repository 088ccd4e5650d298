//! The command line and the environment, read and checked once into a `Command` whose
//! values are ready to use. Flags win over `PLANT_STORE_*` variables, which win over the
//! defaults. The options themselves are the option table's (`config`).

use crate::config::{self, Cmd, OPTIONS, Opt, ServeConfig, Words};
#[cfg(test)]
use crate::config::{
    DEFAULT_DB, DEFAULT_QUEUE_TIMEOUT,
    values::{duration, parse_addr, parse_duration},
};
use crate::ops::secret::Secret;
use crate::store::Location;

/// The usage lines of `--help`, before the options of `serve`.
const USAGE: &str = "\
plant-store: a small HTTP store of plants

Usage:
  plant-store [serve] [OPTIONS]        run the HTTP service (the default)
  plant-store token add PRINCIPAL [--read-only] [--expires-in DURATION | --expires-at TIME] [--create] [--db PATH|URL]
                                       make a token; it is printed once, on the last line.
                                       DURATION: whole seconds, or a whole number and s, m, h
                                       or d (90, 90s, 15m, 2h, 90d), as every duration;
                                       TIME: RFC 3339 (2027-01-31T12:00:00Z). Default: never expires.
                                       A missing database is refused; --create makes it
  plant-store token list [--db PATH|URL]
                                       list tokens: id, principal, scope, created and
                                       expires (UTC); reads only
  plant-store token revoke ID [--db PATH|URL]
                                       remove a token; it fails on its next request
  plant-store webhook add PRINCIPAL URL [--create] [--db PATH|URL]
                                       add a webhook endpoint for the principal's events
                                       committed from now on; its id is printed on the first
                                       line, its signing secret once, on the last line.
                                       A missing database is refused; --create makes it
  plant-store webhook list [--db PATH|URL]
                                       list endpoints: id, state, principal, delivered/last
                                       seq, failures, created, URL, last error; never the
                                       secret; reads only
  plant-store webhook remove ID [--db PATH|URL]
                                       remove an endpoint; its deliveries stop
  plant-store webhook enable ID [--db PATH|URL]
                                       resume a disabled endpoint, with a fresh schedule,
                                       from its first undelivered event
  plant-store backup FILE [--force] [--db PATH|URL]
                                       a consistent copy of the database, taken while a
                                       server runs; --force replaces an existing FILE
  plant-store healthcheck [--addr IP:PORT]
                                       exit 0 when the server at --addr (PLANT_STORE_ADDR;
                                       0.0.0.0 and [::] mean this host) answers GET /healthz
                                       with 200 within 2 s, else 1: a container's HEALTHCHECK
  plant-store compact [--db PATH]
                                       rewrite a database file made with larger pages (an
                                       older version's 4 KiB) with 1 KiB pages, atomically;
                                       refused while a server has it open (serve does it by
                                       itself at start for a file under 64 MiB)
  plant-store --help | --version

Options of serve (each also read from the environment variable shown):
";

/// The one setting read from the environment only.
pub const TOKEN_VAR: &str = "PLANT_STORE_TOKEN";
/// The control token of `--test-control` (docs/testing.md); read from the environment only.
pub const CONTROL_TOKEN_VAR: &str = "PLANT_STORE_CONTROL_TOKEN";
const CONTROL_TOKEN_HELP: &str =
    "with --test-control: the bearer token of /_control/, at least 16 bytes; never stored";

/// How the command line names the settings that errors name together.
const WORDS: Words = Words {
    token: TOKEN_VAR,
    control_token: CONTROL_TOKEN_VAR,
    test_control: "--test-control",
    seed: "--seed",
    rate_limit: "--rate-limit (or PLANT_STORE_RATE_LIMIT)",
};
const TOKEN_HELP: &str = "a bearer token accepted as principal `default`, read-write; never stored";

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
    out.push_str(&format!(
        "\nEnvironment only:\n  {TOKEN_VAR:<25} {TOKEN_HELP}\n  {CONTROL_TOKEN_VAR:<25} {CONTROL_TOKEN_HELP}\n"
    ));
    out
}

/// The README's flags table: `serve`'s options from `OPTIONS`, as Markdown.
#[cfg(test)]
fn markdown() -> String {
    let mut out = String::from("| flag | environment | default | meaning |\n|---|---|---|---|\n");
    for opt in served() {
        let value = opt
            .value
            .map_or(String::new(), |v| format!(" {}", v.replace('|', "\\|")));
        out.push_str(&format!(
            "| `{}{value}` | `{}` | {} | {} |\n",
            opt.flag,
            opt.var.unwrap_or(""),
            opt.default,
            opt.help.replace('|', "\\|")
        ));
    }
    out.push_str(&format!("| | `{TOKEN_VAR}` | unset | {TOKEN_HELP} |\n"));
    out.push_str(&format!(
        "| | `{CONTROL_TOKEN_VAR}` | unset | {CONTROL_TOKEN_HELP} |\n"
    ));
    out
}

/// `serve`'s options, in the order of `--help`.
fn served() -> impl Iterator<Item = &'static Opt> {
    OPTIONS.iter().filter(|o| o.commands.contains(&Cmd::Serve))
}

#[derive(Debug)]
pub enum Command {
    Serve(Box<ServeConfig>),
    TokenAdd {
        db: Location,
        principal: String,
        read_only: bool,
        /// Seconds since the Unix epoch; `None`: never.
        expires_at: Option<i64>,
        /// Make the database if none is at `db`.
        create: bool,
    },
    TokenList {
        db: Location,
    },
    TokenRevoke {
        db: Location,
        id: String,
    },
    WebhookAdd {
        db: Location,
        principal: String,
        url: String,
        /// As `TokenAdd`'s.
        create: bool,
    },
    WebhookList {
        db: Location,
    },
    WebhookRemove {
        db: Location,
        id: String,
    },
    WebhookEnable {
        db: Location,
        id: String,
    },
    Compact {
        db: Location,
    },
    Backup {
        db: Location,
        /// Where the copy goes.
        to: String,
        /// Replace an existing file at `to`.
        force: bool,
    },
    /// Asks the server at `addr` for `/healthz`.
    Healthcheck {
        addr: std::net::SocketAddr,
    },
    Help,
    Version,
}

/// Reads the arguments (without the program name) and a lookup of the environment.
pub fn parse(args: &[String], env: impl Fn(&str) -> Option<String>) -> Result<Command, String> {
    let mut positional = Vec::new();
    let mut given: Vec<(&'static Opt, String)> = Vec::new();
    // What is refused once every argument is read: `--help` anywhere wins.
    let mut refused: Option<String> = None;
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
                    refused.get_or_insert(format!("unknown option {name} here; see --help"));
                    continue;
                };
                let value = match (opt.value, inline) {
                    // A switch: on, or `--switch=1` / `--switch=0` as its variable takes.
                    (None, inline) => inline.unwrap_or_default().to_owned(),
                    (Some(_), Some(v)) => v.to_owned(),
                    (Some(_), None) => it.next().ok_or(format!("{a} needs a value"))?.clone(),
                };
                given.push((opt, value));
            }
            _ => positional.push(arg.as_str()),
        }
    }
    if let Some(refused) = refused {
        return Err(refused);
    }
    let cmd = match positional.as_slice() {
        [] | ["serve"] => Cmd::Serve,
        ["token", "add", _] => Cmd::TokenAdd,
        ["token", "list"] => Cmd::TokenList,
        ["token", "revoke", _] => Cmd::TokenRevoke,
        ["webhook", "add", _, _] => Cmd::WebhookAdd,
        ["webhook", "list"] => Cmd::WebhookList,
        ["webhook", "remove", _] => Cmd::WebhookRemove,
        ["webhook", "enable", _] => Cmd::WebhookEnable,
        ["backup", _] => Cmd::Backup,
        ["healthcheck"] => Cmd::Healthcheck,
        ["compact"] => Cmd::Compact,
        ["backup"] => {
            return Err(
                "backup needs the FILE to write the copy to: plant-store backup FILE [--force] [--db PATH]"
                    .into(),
            );
        }
        _ => {
            return Err(format!(
                "unexpected arguments `{}`; see --help",
                positional.join(" ")
            ));
        }
    };
    if let Cmd::WebhookAdd | Cmd::WebhookList | Cmd::WebhookRemove | Cmd::WebhookEnable = cmd {
        // A build without the `webhooks` feature refuses them.
        config::webhook::available()?;
    }
    if let Some((opt, _)) = given.iter().find(|(o, _)| !o.commands.contains(&cmd)) {
        return Err(format!("unknown option {} here; see --help", opt.flag));
    }
    // The last of a repeated flag wins; then the variable. Errors name the one read.
    let settings = config::settings(cmd, |opt| {
        match given.iter().rev().find(|(o, _)| o.flag == opt.flag) {
            Some((_, v)) => Some((v.clone(), opt.flag)),
            None => opt.var.and_then(|var| Some((env(var)?, var))),
        }
    })?;
    let (read_only, expires_at, force, create) = (
        settings.read_only,
        settings.expires_at,
        settings.force,
        settings.create,
    );
    let db = settings.serve.db.clone();
    match (cmd, positional.as_slice()) {
        (Cmd::Serve, _) => {
            let mut settings = settings;
            let token = |var| env(var).filter(|t| !t.is_empty()).map(Secret::new);
            settings.serve.token = token(TOKEN_VAR);
            settings.serve.control_token = token(CONTROL_TOKEN_VAR);
            Ok(Command::Serve(Box::new(settings.serve(&WORDS)?)))
        }
        (Cmd::TokenAdd, [.., principal]) => {
            if expires_at.is_some_and(|t| t <= crate::ops::clock::system_now()) {
                return Err("the expiry is not in the future".into());
            }
            Ok(Command::TokenAdd {
                db,
                principal: principal.to_string(),
                read_only,
                expires_at,
                create,
            })
        }
        (Cmd::TokenList, _) => Ok(Command::TokenList { db }),
        (Cmd::TokenRevoke, [.., id]) => Ok(Command::TokenRevoke {
            db,
            id: id.to_string(),
        }),
        (Cmd::WebhookAdd, [_, _, principal, url]) => Ok(Command::WebhookAdd {
            db,
            principal: principal.to_string(),
            url: url.to_string(),
            create,
        }),
        (Cmd::WebhookList, _) => Ok(Command::WebhookList { db }),
        (Cmd::WebhookRemove, [.., id]) => Ok(Command::WebhookRemove {
            db,
            id: id.to_string(),
        }),
        (Cmd::WebhookEnable, [.., id]) => Ok(Command::WebhookEnable {
            db,
            id: id.to_string(),
        }),
        (Cmd::Compact, _) => Ok(Command::Compact { db }),
        (Cmd::Backup, [_, path]) => Ok(Command::Backup {
            db,
            to: path.to_string(),
            force,
        }),
        (Cmd::Healthcheck, _) => Ok(Command::Healthcheck {
            addr: settings.serve.addr,
        }),
        _ => unreachable!("the command was matched from these arguments"),
    }
}

#[cfg(test)]
mod tests;
