//! The library's front door: `Server::builder()` sets what the flags set, through the one
//! option table (so an option is checked and defaulted exactly as on the command line),
//! and `start` runs the binary's own server (`serve::start`) in this process. Every
//! setting is one entry of a list kept in call order, whichever method set it, so the
//! last call for a setting wins; errors name the method or the option that was called.

use crate::config::{self, Cmd, OPTIONS, Opt, ServeConfig, Words};
use crate::ops::clock;
use crate::ops::secret::Secret;
use crate::server::running::{Error, Running};
use crate::server::serve;
use crate::store::Location;
use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

/// The address a built server listens on unless `addr` says otherwise: a free port on
/// the loopback interface.
pub const DEFAULT_EMBEDDED_ADDR: &str = "127.0.0.1:0";
/// The database a built server uses unless `db` says otherwise: one of its own, in memory.
pub const DEFAULT_EMBEDDED_DB: &str = ":memory:";

/// The builder's defaults that are not the command line's, by option.
const DEFAULTS: [(&str, &str); 2] = [("addr", DEFAULT_EMBEDDED_ADDR), ("db", DEFAULT_EMBEDDED_DB)];

/// Options that are the binary's, not a server's, and why: the library logs through the
/// `log` facade (its host picks the logger, the level and the format), and never reads
/// standard input (its host decides when to stop).
const BINARY_ONLY: [(&str, &str); 3] = [
    (
        "log-level",
        "a library logs through the log facade, and its host sets the logger",
    ),
    (
        "log-format",
        "a library logs through the log facade, and its host sets the logger",
    ),
    (
        "exit-on-stdin-close",
        "a library never reads standard input; its host calls stop",
    ),
];

/// Starts plant-store servers in this process (see `builder`).
#[derive(Debug)]
pub struct Server;

impl Server {
    /// A server on `127.0.0.1:0` with a database of its own in memory, no token, and
    /// every other option at its command-line default.
    pub fn builder() -> Builder {
        Builder::default()
    }
}

/// What a server is to be. Each method sets the option of its name (`workers` is
/// `--workers`); `option` sets any other by its long name. Whichever method sets a
/// setting, the last call for it wins. Nothing is checked before `start`.
#[derive(Clone, Default)]
pub struct Builder {
    /// The options set, in call order.
    given: Vec<Given>,
    token: Option<Secret>,
    control_token: Option<Secret>,
}

/// One call that set an option.
#[derive(Clone)]
struct Given {
    /// The option's long name, without `--` (as `.option` was given it).
    name: String,
    /// Its value, as the command line would take it.
    value: String,
    /// The method that set it, which errors name; `None`: `.option`, whose errors name the
    /// option.
    method: Option<&'static str>,
}

impl Builder {
    /// The listen address, as `--addr` takes it: an IP address and a port, or
    /// `localhost:PORT` (default `127.0.0.1:0`, a free port on the loopback interface).
    pub fn addr(self, addr: impl Into<String>) -> Builder {
        self.set("addr", addr.into())
    }

    /// The database, as `--db` takes it: a file, `:memory:` (the default: one of this
    /// server's own), or a PostgreSQL URL with the `postgres` feature.
    pub fn db(self, db: impl Into<String>) -> Builder {
        self.set("db", db.into())
    }

    /// A bearer token accepted as principal `default`, read-write (what the binary reads
    /// from `PLANT_STORE_TOKEN`).
    pub fn token(mut self, token: impl Into<String>) -> Builder {
        self.token = Some(Secret::new(token));
        self
    }

    /// Turns test control on (docs/testing.md) with a control token made now of 256
    /// random bits from the operating system, unless `control_token` gives one:
    /// [`Running::control_token`] says it.
    pub fn test_control(self) -> Builder {
        self.set("test_control", "1".into())
    }

    /// Turns test control on with this control token (at least 16 bytes; a bearer token a
    /// request can carry, and no principal's).
    pub fn control_token(mut self, token: impl Into<String>) -> Builder {
        self.control_token = Some(Secret::new(token));
        self.set("control_token", "1".into())
    }

    /// A seed file loaded before the server listens (as `--seed`; docs/testing.md). A bad
    /// one is `Error::Option`, naming the place.
    pub fn seed_file(self, path: impl Into<PathBuf>) -> Builder {
        let path = path.into().to_string_lossy().into_owned();
        self.set("seed_file", path)
    }

    /// Worker threads (`--workers`, 1 to 1024; default 4 per CPU, from 4 to 64).
    pub fn workers(self, n: usize) -> Builder {
        self.set("workers", n.to_string())
    }

    /// How long a stop waits for requests in flight (`--drain-timeout`: whole seconds,
    /// at most an hour; default 10 s).
    pub fn drain_timeout(self, timeout: Duration) -> Builder {
        self.set("drain_timeout", clock::duration_text(timeout))
    }

    /// Open connections at most; one more is answered 503 and closed
    /// (`--max-connections`; default 2048).
    pub fn max_connections(self, n: usize) -> Builder {
        self.set("max_connections", n.to_string())
    }

    /// At most `requests` per token in each `per`, a second, a minute or an hour; over
    /// it, 429 (`--rate-limit`; default off). The burst is `.option("rate-burst", …)`.
    pub fn rate_limit(self, requests: u32, per: Duration) -> Builder {
        let unit = match (per.as_secs(), per.subsec_nanos()) {
            (1, 0) => "s".to_owned(),
            (60, 0) => "m".to_owned(),
            (3600, 0) => "h".to_owned(),
            // Refused by `start`, which shows it.
            _ => format!("{per:?}"),
        };
        self.set("rate_limit", format!("{requests}/{unit}"))
    }

    /// With test control: the answered requests its journal keeps (`--journal-size`,
    /// 0 to 1,000,000; default 1,000).
    pub fn journal_size(self, n: usize) -> Builder {
        self.set("journal_size", n.to_string())
    }

    /// With test control: ids and minted tokens from generators seeded with `seed`
    /// (`--test-seed`; docs/testing.md, "Same run, same bytes").
    pub fn test_seed(self, seed: u64) -> Builder {
        self.set("test_seed", seed.to_string())
    }

    /// Any other option by its long name, with or without the leading `--`
    /// (`.option("event-retention", "2s")`), its value as the command line takes it;
    /// checked by `start`. README.md's "Flags" lists them.
    pub fn option(mut self, name: impl Into<String>, value: impl Into<String>) -> Builder {
        let name = name.into();
        self.given.push(Given {
            name: name.strip_prefix("--").unwrap_or(&name).to_owned(),
            value: value.into(),
            method: None,
        });
        self
    }

    /// Checks the settings, opens the database, and returns once the server listens.
    ///
    /// # Errors
    /// `Error::Option` for a setting that is unknown or not one the command line would
    /// take (naming the method or the option), or a bad seed file; `Error::Start` when
    /// the address cannot be had, the database cannot be opened or a thread cannot be
    /// started (everything started before is stopped again).
    pub fn start(self) -> Result<Running, Error> {
        let config = self.config()?;
        serve::start(config)
    }

    /// Records a typed method's call: `method` is the method's name, which is the
    /// option's with `_` for `-` (`seed_file` is `--seed`, `control_token`
    /// `--test-control`).
    fn set(mut self, method: &'static str, value: String) -> Builder {
        let name = match method {
            "seed_file" => "seed".to_owned(),
            "control_token" => "test-control".to_owned(),
            m => m.replace('_', "-"),
        };
        self.given.push(Given {
            name,
            value,
            method: Some(method),
        });
        self
    }

    /// The server's settings: each option's last call, else the builder's default, else
    /// the command line's.
    fn config(&self) -> Result<ServeConfig, Error> {
        // Every name first: a misspelt one is named whatever else is wrong.
        for given in &self.given {
            option(&given.name)?;
        }
        let last = |opt: &Opt| self.given.iter().rev().find(|g| g.name == opt.flag[2..]);
        // The name errors give a setting: the last call's, else its method's.
        let name = |flag: &'static str, method: &'static str| {
            let opt = option(&flag[2..]).expect("the builder's own options are serve's");
            last(opt).map_or(method, |g| g.method.unwrap_or(&opt.flag[2..]))
        };
        let mut settings = config::settings(Cmd::Serve, |opt| {
            let Some(given) = last(opt) else {
                let (name, value) = DEFAULTS.iter().find(|(n, _)| *n == &opt.flag[2..])?;
                return Some((value.to_string(), name));
            };
            Some((given.value.clone(), given.method.unwrap_or(&opt.flag[2..])))
        })
        .map_err(Error::Option)?;
        settings.serve.token = self.token.clone();
        settings.serve.control_token = match (&self.control_token, settings.serve.test_control) {
            (Some(token), _) => Some(token.clone()),
            (None, true) => Some(Secret::new(
                crate::api::auth::new_token(&Default::default()).map_err(|e| {
                    Error::Start(format!("no random source for the control token: {e}"))
                })?,
            )),
            (None, false) => None,
        };
        let words = Words {
            token: "token",
            control_token: "control_token",
            test_control: name("--test-control", "test_control"),
            seed: name("--seed", "seed_file"),
            rate_limit: name("--rate-limit", "rate_limit"),
        };
        settings.serve(&words).map_err(Error::Option)
    }
}

/// The option `name` (without `--`) of a server, or the error that says it is none.
fn option(name: &str) -> Result<&'static Opt, Error> {
    if let Some((_, why)) = BINARY_ONLY.iter().find(|(n, _)| *n == name) {
        return Err(Error::Option(format!("{name} is the binary's: {why}")));
    }
    served().find(|o| o.flag[2..] == *name).ok_or_else(|| {
        let known: Vec<&str> = served().map(|o| &o.flag[2..]).collect();
        Error::Option(format!(
            "unknown option `{name}`; a server's options are {}",
            known.join(", ")
        ))
    })
}

/// The options a built server takes: `serve`'s, but the binary's own.
fn served() -> impl Iterator<Item = &'static Opt> {
    OPTIONS.iter().filter(|o| {
        o.commands.contains(&Cmd::Serve) && !BINARY_ONLY.iter().any(|(n, _)| *n == &o.flag[2..])
    })
}

impl fmt::Debug for Builder {
    /// The calls in order; no token, and a PostgreSQL URL without its password.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let given: Vec<String> = self
            .given
            .iter()
            .map(|g| {
                let name = g.method.unwrap_or(&g.name);
                format!("{name}: {}", Location::show(&g.value))
            })
            .collect();
        f.debug_struct("Builder")
            .field("given", &given)
            .field("token", &self.token)
            .field("control_token", &self.control_token)
            .finish()
    }
}
