//! The library's front door: `Server::builder()` sets what the flags set, through the one
//! option table (so an option is named, checked and defaulted exactly as on the command
//! line), and `start` runs the binary's own server (`serve::start`) in this process.

use crate::cli::options::{self, Command, ServeConfig};
use crate::cli::serve::{self, Error, Running};
use crate::ops::secret::Secret;
use std::path::PathBuf;

/// The address a built server listens on unless `addr` says otherwise: a free port on
/// the loopback interface.
pub const DEFAULT_EMBEDDED_ADDR: &str = "127.0.0.1:0";
/// The database a built server uses unless `db` says otherwise: one of its own, in memory.
pub const DEFAULT_EMBEDDED_DB: &str = ":memory:";

/// Options that are the binary's, not a server's: the library logs through the `log`
/// facade, and its host picks the logger, the level and the format.
const BINARY_ONLY: [&str; 2] = ["log-level", "log-format"];

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

/// What a server is to be: each setter is the flag of the same name.
#[derive(Debug, Clone, Default)]
pub struct Builder {
    addr: Option<String>,
    db: Option<String>,
    token: Option<Secret>,
    control_token: Option<Secret>,
    seed_file: Option<PathBuf>,
    options: Vec<(String, String)>,
}

impl Builder {
    /// The listen address, as `--addr` takes it (default `127.0.0.1:0`).
    pub fn addr(mut self, addr: impl Into<String>) -> Builder {
        self.addr = Some(addr.into());
        self
    }

    /// The database, as `--db` takes it: a file, `:memory:` (the default), or a
    /// PostgreSQL URL with the `postgres` feature.
    pub fn db(mut self, db: impl Into<String>) -> Builder {
        self.db = Some(db.into());
        self
    }

    /// A bearer token accepted as principal `default`, read-write (as `PLANT_STORE_TOKEN`).
    pub fn token(mut self, token: impl Into<String>) -> Builder {
        self.token = Some(Secret::new(token));
        self
    }

    /// The control token that turns test control on (as `--test-control` with
    /// `PLANT_STORE_CONTROL_TOKEN`: at least 16 bytes; docs/testing.md).
    pub fn control_token(mut self, token: impl Into<String>) -> Builder {
        self.control_token = Some(Secret::new(token));
        self
    }

    /// A seed file loaded before the server listens (as `--seed`; docs/testing.md). A bad
    /// one is `Error::Option`, naming the place.
    pub fn seed_file(mut self, path: impl Into<PathBuf>) -> Builder {
        self.seed_file = Some(path.into());
        self
    }

    /// Any other flag by its long name, with or without the leading `--`
    /// (`.option("workers", "2")`); checked by `start`, as the command line checks it.
    pub fn option(mut self, name: impl Into<String>, value: impl Into<String>) -> Builder {
        self.options.push((name.into(), value.into()));
        self
    }

    /// The server's settings, as the command line would make them of the same flags.
    fn config(&self) -> Result<ServeConfig, Error> {
        let mut args = vec![
            "serve".to_owned(),
            "--addr".to_owned(),
            self.addr
                .as_deref()
                .unwrap_or(DEFAULT_EMBEDDED_ADDR)
                .to_owned(),
            "--db".to_owned(),
            self.db.as_deref().unwrap_or(DEFAULT_EMBEDDED_DB).to_owned(),
        ];
        if self.control_token.is_some() {
            args.push("--test-control".to_owned());
        }
        if let Some(path) = &self.seed_file {
            args.push("--seed".to_owned());
            args.push(path.to_string_lossy().into_owned());
        }
        for (name, value) in &self.options {
            let name = name.trim_start_matches("--");
            if BINARY_ONLY.contains(&name) {
                return Err(Error::Option(format!(
                    "--{name} is the binary's: a library logs through the log facade, and its host sets the logger"
                )));
            }
            if !name.chars().all(|c| c.is_ascii_lowercase() || c == '-') || name.is_empty() {
                return Err(Error::Option(format!("unknown option --{name}")));
            }
            // One argument: a switch (`allow-test-file`) takes its value (1 or 0) so too.
            args.push(format!("--{name}={value}"));
        }
        // The environment is the host's: only the tokens set here are read, as their
        // variables.
        let expose = |t: &Option<Secret>| t.as_ref().map(|t| t.expose().to_owned());
        let (token, control) = (expose(&self.token), expose(&self.control_token));
        let env = move |k: &str| match k {
            options::TOKEN_VAR => token.clone(),
            options::CONTROL_TOKEN_VAR => control.clone(),
            _ => None,
        };
        match options::parse(&args, env).map_err(Error::Option)? {
            Command::Serve(config) => Ok(*config),
            _ => Err(Error::Option(
                "these options do not make a server (--help and --version are the binary's)".into(),
            )),
        }
    }

    /// Checks the options, opens the database, and returns once the server listens.
    pub fn start(self) -> Result<Running, Error> {
        let config = self.config()?;
        serve::start(config)
    }
}
