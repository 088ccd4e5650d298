//! plant-store: parse the command line, run the command, turn its error into a message
//! and an exit status (2 for a usage error, 1 for a failure).

mod api;
mod cli;
mod http;
mod ops;
mod store;

use api::auth;
use cli::options::{self as config, Command};
use cli::{backup, serve as server, token as admin};
use ops::logging;
use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let command = match config::parse(&args, |k| std::env::var(k).ok()) {
        Ok(command) => command,
        Err(e) => {
            eprintln!("plant-store: {e}");
            return ExitCode::from(2);
        }
    };
    if let Command::TokenList { db }
    | Command::TokenRevoke { db, .. }
    | Command::Backup { db, .. } = &command
    {
        if let Err(e) = admin::require_existing(db) {
            eprintln!("plant-store: {e}");
            return ExitCode::from(2);
        }
    }
    let result = match command {
        Command::Help => {
            print!("{}", config::HELP);
            Ok(())
        }
        Command::Version => {
            println!(
                "plant-store {} (schema {})",
                env!("CARGO_PKG_VERSION"),
                store::schema_version()
            );
            Ok(())
        }
        Command::Serve(config) => {
            ops::process::without_malloc_thread_cache();
            logging::init(config.log_level, config.log_format);
            server::serve(config)
        }
        Command::TokenAdd {
            db,
            principal,
            read_only,
            expires_at,
        } => {
            if let Err(e) = auth::validate_principal(&principal) {
                eprintln!("plant-store: invalid principal: {e}");
                return ExitCode::from(2);
            }
            admin::add(&db, &principal, read_only, expires_at)
        }
        Command::TokenList { db } => admin::list(&db),
        Command::TokenRevoke { db, id } => admin::revoke(&db, &id),
        Command::Backup { db, to, force } => match backup::check(&db, &to, force) {
            Err(e) => {
                eprintln!("plant-store: {e}");
                return ExitCode::from(2);
            }
            Ok(target) => backup::run(&db, &target),
        },
    };
    let status = match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("plant-store: {e}");
            log::error!("{e}");
            ExitCode::FAILURE
        }
    };
    log::logger().flush();
    status
}
