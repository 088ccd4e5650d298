//! plant-store: parse the command line, run the command, turn its error into a message
//! and an exit status (2 for a usage error, 1 for a failure).

mod admin;
mod auth;
mod config;
mod error;
mod listing;
mod plant;
mod queue;
mod routes;
mod server;
mod store;

use config::Command;
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
            // Before any thread starts: tiny_http's connection threads take this stack size.
            if std::env::var_os("RUST_MIN_STACK").is_none() {
                // SAFETY: no other thread exists yet.
                unsafe {
                    std::env::set_var("RUST_MIN_STACK", server::CONNECTION_STACK_BYTES.to_string())
                };
            }
            init_log(config.log_level);
            server::serve(config)
        }
        Command::TokenAdd {
            db,
            principal,
            read_only,
        } => {
            if let Err(e) = auth::validate_principal(&principal) {
                eprintln!("plant-store: invalid principal: {e}");
                return ExitCode::from(2);
            }
            admin::add(&db, &principal, read_only)
        }
        Command::TokenList { db } => admin::list(&db),
        Command::TokenRevoke { db, id } => admin::revoke(&db, &id),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("plant-store: {e}");
            log::error!("{e}");
            ExitCode::FAILURE
        }
    }
}

/// Log lines go to standard error, one `write` per line (simplelog writes a line in
/// several pieces; unbuffered, each would be a system call); tiny_http's own messages (a
/// line per closed connection) are left out.
fn init_log(level: log::LevelFilter) {
    let config = simplelog::ConfigBuilder::new()
        .set_time_format_rfc3339()
        .set_thread_level(log::LevelFilter::Off)
        .set_target_level(log::LevelFilter::Off)
        .add_filter_ignore_str("tiny_http")
        .build();
    let _ =
        simplelog::WriteLogger::init(level, config, std::io::LineWriter::new(std::io::stderr()));
}
