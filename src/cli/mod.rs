//! The command line: the options (`options.rs`), and the commands they run; the
//! library's front door (`server.rs`). How a command ended decides the exit status
//! (`failure.rs`), and nothing else does.

pub mod backup;
mod failure;
pub mod options;
pub mod output;
pub mod serve;
pub mod server;
pub mod token;
/// The `webhook` commands, `serve`'s webhook options and the deliveries' start; without
/// the `webhooks` feature, a stand-in of the same names that refuses them.
#[cfg(feature = "webhooks")]
pub mod webhook;
#[cfg(not(feature = "webhooks"))]
#[path = "no_webhooks.rs"]
pub mod webhook;

use crate::api::auth;
pub use failure::Failure;
use options::{Command, ServeConfig};

/// What a command left to do: nothing, or serve (which the binary's `main` runs, with
/// the process-wide set-up a library must not make: logger, signals, allocator).
#[derive(Debug)]
pub enum Ran {
    Done,
    Serve(Box<ServeConfig>),
}

/// Runs the command that the arguments (without the program name) and the environment
/// ask for; `serve` is handed back.
pub fn run(args: &[String]) -> Result<Ran, Failure> {
    let done = |r: Result<(), Failure>| r.map(|()| Ran::Done);
    let command = options::parse(args, |k| std::env::var(k).ok()).map_err(Failure::Usage)?;
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
        Command::Help => {
            print!("{}", options::help());
            Ok(())
        }
        Command::Version => {
            // A build whose panics end the process (the device build) says so.
            println!(
                "plant-store {} (schema {}{})",
                env!("CARGO_PKG_VERSION"),
                crate::store::schema_version(),
                if cfg!(panic = "abort") {
                    ", panic=abort"
                } else {
                    ""
                }
            );
            Ok(())
        }
        Command::Serve(config) => return Ok(Ran::Serve(config)),
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
