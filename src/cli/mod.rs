//! The command line: the options (`options.rs`), and the commands they run. How a
//! command ended decides the exit status, here and nowhere else.

pub mod backup;
pub mod options;
pub mod output;
pub mod serve;
pub mod token;
pub mod webhook;

use crate::api::auth;
use crate::ops::logging;
use options::Command;
use std::fmt;

/// Why a command did not succeed.
#[derive(Debug)]
pub enum Failure {
    /// The command line asks for something that cannot be done: exit status 2.
    Usage(String),
    /// The command failed while it ran: exit status 1.
    Failed(String),
}

impl Failure {
    /// The process's exit status.
    pub fn status(&self) -> u8 {
        match self {
            Failure::Usage(_) => 2,
            Failure::Failed(_) => 1,
        }
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Failure::Usage(e) | Failure::Failed(e) => f.write_str(e),
        }
    }
}

/// Runs the command that the arguments (without the program name) and the environment
/// ask for.
pub fn run(args: &[String]) -> Result<(), Failure> {
    let command = options::parse(args, |k| std::env::var(k).ok()).map_err(Failure::Usage)?;
    if let Command::TokenList { db }
    | Command::TokenRevoke { db, .. }
    | Command::WebhookList { db }
    | Command::WebhookRemove { db, .. }
    | Command::WebhookEnable { db, .. }
    | Command::Backup { db, .. } = &command
    {
        token::require_existing(db).map_err(Failure::Usage)?;
    }
    match command {
        Command::Help => {
            print!("{}", options::help());
            Ok(())
        }
        Command::Version => {
            println!(
                "plant-store {} (schema {})",
                env!("CARGO_PKG_VERSION"),
                crate::store::schema_version()
            );
            Ok(())
        }
        Command::Serve(config) => {
            logging::init(config.log_level, config.log_format);
            serve::serve(*config).map_err(Failure::Failed)
        }
        Command::TokenAdd {
            db,
            principal,
            read_only,
            expires_at,
        } => {
            auth::validate_principal(&principal)
                .map_err(|e| Failure::Usage(format!("invalid principal: {e}")))?;
            token::add(&db, &principal, read_only, expires_at).map_err(Failure::Failed)
        }
        Command::TokenList { db } => token::list(&db).map_err(Failure::Failed),
        Command::TokenRevoke { db, id } => token::revoke(&db, &id).map_err(Failure::Failed),
        Command::WebhookAdd { db, principal, url } => {
            auth::validate_principal(&principal)
                .map_err(|e| Failure::Usage(format!("invalid principal: {e}")))?;
            webhook::check_url(&url).map_err(|e| Failure::Usage(format!("invalid URL: {e}")))?;
            webhook::add(&db, &principal, &url).map_err(Failure::Failed)
        }
        Command::WebhookList { db } => webhook::list(&db).map_err(Failure::Failed),
        Command::WebhookRemove { db, id } => webhook::remove(&db, &id).map_err(Failure::Failed),
        Command::WebhookEnable { db, id } => webhook::enable(&db, &id).map_err(Failure::Failed),
        Command::Backup { db, to, force } => {
            let target = backup::check(&db, &to, force).map_err(Failure::Usage)?;
            backup::run(&db, &target).map_err(Failure::Failed)
        }
    }
}
