//! The command line: the arguments and the environment (`options/`: argv, `--help`), and
//! the commands they run (`token`, `webhook`, `backup`, `healthcheck`). How a command
//! ended decides the exit status (`failure.rs`), and nothing else does.

pub mod backup;
mod compact;
mod failure;
mod healthcheck;
pub mod options;
pub mod output;
pub mod token;
/// The `webhook` commands; without the `webhooks` feature, a stand-in of the same names
/// that refuses them.
#[cfg(feature = "webhooks")]
pub mod webhook;
#[cfg(not(feature = "webhooks"))]
#[path = "no_webhooks.rs"]
pub mod webhook;

use crate::api::auth;
use crate::config::ServeConfig;
pub use failure::Failure;
use options::Command;

/// What a command left to do: nothing, or serve (which the binary's `main` runs, with
/// the process-wide set-up a library must not make: logger, signals, allocator).
#[derive(Debug)]
pub enum Ran {
    Done,
    Serve(Serve),
}

/// A server that `serve`'s arguments describe, not yet started: what the binary's `main`
/// gets of them. Its settings stay inside.
#[derive(Debug)]
pub struct Serve(Box<ServeConfig>);

impl Serve {
    /// The process-wide set-up that only a program's `main` may make, before any thread
    /// starts: the logger (`--log-level`, `--log-format`), the panic hook that sends
    /// panics to the log, glibc's malloc arenas, and the descriptor limit.
    pub fn set_up_process(&self) {
        crate::ops::logging::init(self.0.log_level, self.0.log_format);
        crate::ops::process::log_panics();
        crate::ops::process::limit_malloc_arenas();
        crate::http::socket::raise_fd_limit();
    }

    /// `--exit-on-stdin-close`: whether `main` stops the server once standard input closes
    /// (the binary's alone: the library never reads standard input).
    pub fn exits_on_stdin_close(&self) -> bool {
        self.0.exit_on_stdin_close
    }

    /// Starts the server, as the library's `Builder::start` does; returns once it listens.
    /// A bad seed file is the command line's fault (exit status 2).
    pub fn start(self) -> Result<crate::server::Running, Failure> {
        crate::server::start(*self.0).map_err(|e| match e {
            crate::server::Error::Option(e) => Failure::Usage(e),
            e => Failure::Failed(e.to_string()),
        })
    }
}

/// Runs the command that the arguments (without the program name) and the environment
/// ask for; `serve` is handed back.
pub fn run(args: &[String]) -> Result<Ran, Failure> {
    let done = |r: Result<(), Failure>| r.map(|()| Ran::Done);
    let command = options::parse(args, |k| std::env::var(k).ok()).map_err(|e| {
        // A HEALTHCHECK reserves status 2: a bad `healthcheck` is unhealthy, 1.
        match healthcheck::asked(args) {
            true => Failure::Failed(e),
            false => Failure::Usage(e),
        }
    })?;
    // What the arguments say is checked before the database is looked at.
    match &command {
        Command::TokenAdd { principal, .. } => check_principal(principal)?,
        Command::WebhookAdd { principal, url, .. } => {
            check_principal(principal)?;
            webhook::check_url(url).map_err(|e| Failure::Usage(format!("invalid URL: {e}")))?;
        }
        _ => {}
    }
    if let Command::TokenList { db }
    | Command::TokenRevoke { db, .. }
    | Command::WebhookList { db }
    | Command::WebhookRemove { db, .. }
    | Command::WebhookEnable { db, .. }
    | Command::Backup { db, .. }
    | Command::Compact { db }
    | Command::TokenAdd {
        db, create: false, ..
    }
    | Command::WebhookAdd {
        db, create: false, ..
    } = &command
    {
        token::require_existing(db).map_err(Failure::Usage)?;
    }
    done(match command {
        Command::Help(help) => {
            print!("{help}");
            Ok(())
        }
        Command::Version => {
            print!("{}", options::version());
            Ok(())
        }
        Command::Serve(config) => return Ok(Ran::Serve(Serve(config))),
        Command::Healthcheck { addr } => healthcheck::check(addr),
        Command::TokenAdd {
            db,
            principal,
            read_only,
            expires_at,
            create: _,
        } => token::add(&db, &principal, read_only, expires_at).map_err(Failure::Failed),
        Command::TokenList { db } => token::list(&db).map_err(Failure::Failed),
        Command::TokenRevoke { db, id } => token::revoke(&db, &id),
        Command::WebhookAdd {
            db, principal, url, ..
        } => webhook::add(&db, &principal, &url).map_err(Failure::Failed),
        Command::WebhookList { db } => webhook::list(&db).map_err(Failure::Failed),
        Command::WebhookRemove { db, id } => webhook::remove(&db, &id),
        Command::WebhookEnable { db, id } => webhook::enable(&db, &id),
        Command::Compact { db } => compact::run(&db),
        Command::Backup { db, to, force } => {
            let target = backup::check(&db, &to, force).map_err(Failure::Usage)?;
            backup::run(&db, &target).map_err(Failure::Failed)
        }
    })
}

/// A principal given to `token add` or `webhook add`.
fn check_principal(principal: &str) -> Result<(), Failure> {
    auth::validate_principal(principal)
        .map_err(|e| Failure::Usage(format!("invalid principal: {e}")))
}
