//! The command line and the environment, read and checked once into a `Command` whose
//! values are ready to use. Flags win over `PLANT_STORE_*` variables, which win over the
//! defaults.

mod config;
mod table;
pub(crate) mod values;

use crate::ops::secret::Secret;
use crate::store::Location;
pub use config::ServeConfig;
#[cfg(test)]
use config::{DEFAULT_DB, DEFAULT_QUEUE_TIMEOUT};
use table::{Cmd, OPTIONS, Opt, Settings};
#[cfg(test)]
use values::{duration, parse_addr, parse_duration};

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
  plant-store --help | --version

Options of serve (each also read from the environment variable shown):
";

/// The one setting read from the environment only.
pub const TOKEN_VAR: &str = "PLANT_STORE_TOKEN";
/// The control token of `--test-control` (docs/testing.md); read from the environment only.
pub const CONTROL_TOKEN_VAR: &str = "PLANT_STORE_CONTROL_TOKEN";
const CONTROL_TOKEN_HELP: &str =
    "with --test-control: the bearer token of /_control/, at least 16 bytes; never stored";

/// What a token must be for a request to carry it (`Authorization: Bearer` and RFC 6750's
/// token68), said in errors that never show the token.
fn token68() -> String {
    format!(
        "it must be 1 to {} letters, digits and -._~+/, then optional = padding, as RFC 6750's token68",
        crate::api::auth::MAX_AUTHORIZATION_BYTES - "Bearer ".len()
    )
}

/// Whether a request could carry `token` as its bearer token.
fn usable(token: &str) -> Result<(), ()> {
    crate::api::auth::bearer_token(Some(&format!("Bearer {token}")))
        .map(|_| ())
        .map_err(|_| ())
}

/// Test control's and the seed's conditions: the control token with `--test-control`,
/// and SQLite.
fn test_control(config: &ServeConfig) -> Result<(), String> {
    use crate::api::control::MIN_CONTROL_TOKEN_BYTES;
    let postgres = matches!(config.db, Location::Postgres(_));
    if config.test_control {
        match &config.control_token {
            None => {
                return Err(format!(
                    "--test-control needs {CONTROL_TOKEN_VAR}, a token of at least {MIN_CONTROL_TOKEN_BYTES} bytes"
                ));
            }
            Some(t) if t.expose().len() < MIN_CONTROL_TOKEN_BYTES => {
                return Err(format!(
                    "{CONTROL_TOKEN_VAR} must be at least {MIN_CONTROL_TOKEN_BYTES} bytes long"
                ));
            }
            // A token no request could carry, or one that is also a principal's.
            Some(t) if usable(t.expose()).is_err() => {
                return Err(format!(
                    "{CONTROL_TOKEN_VAR} is not a usable bearer token ({} characters): {}",
                    t.expose().chars().count(),
                    token68()
                ));
            }
            Some(t) if config.token.as_ref() == Some(t) => {
                return Err(format!(
                    "{CONTROL_TOKEN_VAR} must differ from {TOKEN_VAR}: the control token is no principal's"
                ));
            }
            Some(_) => {}
        }
        if postgres {
            return Err("--test-control needs SQLite (a file or :memory:), not PostgreSQL".into());
        }
    }
    if config.test_seed.is_some() && !config.test_control {
        return Err("--test-seed needs --test-control".into());
    }
    if config.seed.is_some() && postgres {
        return Err("--seed needs SQLite (a file or :memory:), not PostgreSQL".into());
    }
    Ok(())
}
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
    Backup {
        db: Location,
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
        ["webhook", "add", _, _] => Cmd::WebhookAdd,
        ["webhook", "list"] => Cmd::WebhookList,
        ["webhook", "remove", _] => Cmd::WebhookRemove,
        ["webhook", "enable", _] => Cmd::WebhookEnable,
        ["backup", _] => Cmd::Backup,
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
        crate::cli::webhook::available()?;
    }
    if let Some((opt, _)) = given.iter().find(|(o, _)| !o.commands.contains(&cmd)) {
        return Err(format!("unknown option {} here; see --help", opt.flag));
    }
    let mut settings = Settings {
        serve: ServeConfig::default(),
        rate_burst: None,
        journal: None,
        read_only: false,
        expires_at: None,
        force: false,
        create: false,
    };
    for opt in OPTIONS.iter().filter(|o| o.commands.contains(&cmd)) {
        // The last of a repeated flag wins; then the variable. Errors name the one read.
        let value = match given.iter().rev().find(|(o, _)| o.flag == opt.flag) {
            Some((_, v)) => Some((v.clone(), opt.flag)),
            None => opt.var.and_then(|var| Some((env(var)?, var))),
        };
        if let Some((value, name)) = value {
            (opt.set)(&mut settings, &value, name)?;
        }
    }
    let Settings {
        serve: mut config,
        rate_burst,
        journal,
        read_only,
        expires_at,
        force,
        create,
    } = settings;
    let db = config.db.clone();
    match (cmd, positional.as_slice()) {
        (Cmd::Serve, _) => {
            match (&mut config.rate_limit, rate_burst) {
                (Some(limit), Some((burst, _))) => limit.burst = burst,
                (None, Some((_, name))) => {
                    return Err(format!(
                        "{name} needs --rate-limit (or PLANT_STORE_RATE_LIMIT)"
                    ));
                }
                _ => {}
            }
            if let (Some(name), false) = (journal, config.test_control) {
                return Err(format!("{name} needs --test-control"));
            }
            config.token = env(TOKEN_VAR).filter(|t| !t.is_empty()).map(Secret::new);
            if let Some(token) = &config.token {
                // A token no request could carry; the message never shows it.
                usable(token.expose()).map_err(|_| {
                    format!(
                        "{TOKEN_VAR} is not a usable bearer token ({} characters): {}",
                        token.expose().chars().count(),
                        token68()
                    )
                })?;
            }
            config.control_token = env(CONTROL_TOKEN_VAR)
                .filter(|t| !t.is_empty())
                .map(Secret::new);
            test_control(&config)?;
            Ok(Command::Serve(Box::new(config)))
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
        (Cmd::Backup, [_, path]) => Ok(Command::Backup {
            db,
            to: path.to_string(),
            force,
        }),
        _ => unreachable!("the command was matched from these arguments"),
    }
}

#[cfg(test)]
mod tests;
