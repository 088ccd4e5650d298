//! The command line and the environment, read and checked once into a `Command` whose
//! values are ready to use. Flags win over `PLANT_STORE_*` variables, which win over the
//! defaults. The options themselves are the option table's (`config`).

mod commands;
mod help;

use crate::config::{self, Cmd, OPTIONS, Opt, ServeConfig, Words};
#[cfg(test)]
use crate::config::{
    DEFAULT_DB, DEFAULT_QUEUE_TIMEOUT,
    values::{duration, parse_addr, parse_duration},
};
use crate::ops::secret::Secret;
use crate::store::Location;
pub use commands::{CONTROL_TOKEN_VAR, TOKEN_VAR};
use commands::{Named, Verb};
pub use help::version;

/// How the command line names the settings that errors name together.
const WORDS: Words = Words {
    token: TOKEN_VAR,
    control_token: CONTROL_TOKEN_VAR,
    test_control: "--test-control",
    seed: "--seed",
    rate_limit: "--rate-limit (or PLANT_STORE_RATE_LIMIT)",
};

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
    /// `--help`: the help to print (`COMMAND --help`: the command's).
    Help(String),
    Version,
}

/// Reads the arguments (without the program name) and a lookup of the environment.
pub fn parse(args: &[String], env: impl Fn(&str) -> Option<String>) -> Result<Command, String> {
    let mut positional = Vec::new();
    let mut given: Vec<(&'static Opt, String)> = Vec::new();
    // The first error, given once every argument is read: `--help` anywhere wins.
    let mut wrong: Option<String> = None;
    let mut asked_help = false;
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "-h" | "--help" => asked_help = true,
            // The first of `--help` and `--version` wins.
            "-V" | "--version" if !asked_help => return Ok(Command::Version),
            "-V" | "--version" => {}
            a if a.starts_with("--") => {
                let (name, inline) = match a.split_once('=') {
                    Some((n, v)) => (n, Some(v)),
                    None => (a, None),
                };
                let Some(opt) = OPTIONS.iter().find(|o| o.flag == name) else {
                    wrong.get_or_insert(format!("unknown option {name} here; see --help"));
                    continue;
                };
                let value = match (opt.value, inline) {
                    // A switch: on, or `--switch=1` / `--switch=0` as its variable takes.
                    (None, inline) => inline.unwrap_or_default().to_owned(),
                    (Some(_), Some(v)) => v.to_owned(),
                    (Some(_), None) => match it.next() {
                        Some(v) => v.clone(),
                        None => {
                            wrong.get_or_insert(format!("{a} needs a value"));
                            continue;
                        }
                    },
                };
                given.push((opt, value));
            }
            _ => positional.push(arg.as_str()),
        }
    }
    if asked_help {
        return help::help(&positional).map(Command::Help);
    }
    if let Some(wrong) = wrong {
        return Err(wrong);
    }
    let (verb, operands) = command(&positional)?;
    let cmd = verb.cmd;
    if let Some((opt, _)) = given.iter().find(|(o, _)| !o.commands.contains(&cmd)) {
        return Err(format!(
            "{} takes no option {}: {}",
            verb.words.join(" "),
            opt.flag,
            help::usage(verb)
        ));
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
    // The command's arguments, as many as the command table names.
    let arg = |i: usize| operands[i].to_string();
    Ok(match cmd {
        Cmd::Serve => {
            let mut settings = settings;
            let token = |var| env(var).filter(|t| !t.is_empty()).map(Secret::new);
            settings.serve.token = token(TOKEN_VAR);
            settings.serve.control_token = token(CONTROL_TOKEN_VAR);
            Command::Serve(Box::new(settings.serve(&WORDS)?))
        }
        Cmd::TokenAdd => {
            if expires_at.is_some_and(|t| t <= crate::ops::clock::system_now()) {
                return Err("the expiry is not in the future".into());
            }
            Command::TokenAdd {
                db,
                principal: arg(0),
                read_only,
                expires_at,
                create,
            }
        }
        Cmd::TokenList => Command::TokenList { db },
        Cmd::TokenRevoke => Command::TokenRevoke { db, id: arg(0) },
        Cmd::WebhookAdd => Command::WebhookAdd {
            db,
            principal: arg(0),
            url: arg(1),
            create,
        },
        Cmd::WebhookList => Command::WebhookList { db },
        Cmd::WebhookRemove => Command::WebhookRemove { db, id: arg(0) },
        Cmd::WebhookEnable => Command::WebhookEnable { db, id: arg(0) },
        Cmd::Backup => Command::Backup {
            db,
            to: arg(0),
            force,
        },
        Cmd::Compact => Command::Compact { db },
        Cmd::Healthcheck => Command::Healthcheck {
            addr: settings.serve.addr,
        },
    })
}

/// The command that the words of the command line name, and its arguments, exactly as
/// many as it takes; else what is wrong, with the usage line. A command this build lacks
/// is refused.
fn command<'a>(words: &'a [&'a str]) -> Result<(&'static Verb, &'a [&'a str]), String> {
    let (verb, operands) = match commands::named(words) {
        Named::Verb(verb, operands) => (verb, operands),
        Named::Group(first, verbs) => {
            (verbs[0].available)()?;
            let choice = help::one_of(&verbs);
            return Err(match words.get(1) {
                None => {
                    format!("{first} needs a command: {choice}; see plant-store {first} --help")
                }
                Some(other) => format!(
                    "unknown command `{first} {other}`: {first} takes {choice}; see plant-store {first} --help"
                ),
            });
        }
        Named::Unknown => return Err(format!("unknown command `{}`; see --help", words[0])),
    };
    (verb.available)()?;
    let name = verb.words.join(" ");
    if let Some((missing, what)) = verb.args.get(operands.len()) {
        return Err(format!(
            "{name} needs {missing}, {what}: {}",
            help::usage(verb)
        ));
    }
    if let Some(extra) = operands.get(verb.args.len()) {
        return Err(format!(
            "unexpected argument `{extra}` after {name}: {}",
            help::usage(verb)
        ));
    }
    Ok((verb, operands))
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod value_tests;
