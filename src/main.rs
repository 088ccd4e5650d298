//! plant-store: parse the command line, run the command, turn its error into a message
//! and an exit status (2 for a usage error, 1 for a failure).

mod api;
mod cli;
mod http;
mod ops;
mod store;

use cli::options::{self as config, Command};
use cli::{backup, serve as server, token as admin};
use api::auth;
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
            without_malloc_thread_cache();
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

/// glibc keeps a cache of freed small blocks in every thread (tcache). With tiny_http's
/// thread per connection those caches held 2 to 3.5 MB, a third of the resident memory,
/// in the benchmark (benches/run.sh), for about 4% less CPU per small GET. Only the
/// GLIBC_TUNABLES variable, read when a process starts, turns them off; so the server
/// starts itself again, once, with it set. A value the user set is kept (one that is not
/// UTF-8 is left alone); if the re-execution fails the server runs as it is.
fn without_malloc_thread_cache() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        use std::os::unix::process::CommandExt;
        const TUNABLE: &str = "glibc.malloc.tcache_count";
        let current = std::env::var_os("GLIBC_TUNABLES").unwrap_or_default();
        let Some(current) = current.to_str() else {
            return;
        };
        if current.contains(TUNABLE) {
            return;
        }
        let value = match current {
            "" => format!("{TUNABLE}=0"),
            other => format!("{TUNABLE}=0:{other}"),
        };
        let mut args = std::env::args_os();
        let name = args.next().unwrap_or_default();
        let Ok(exe) = std::env::current_exe() else {
            return;
        };
        let error = std::process::Command::new(exe)
            .arg0(name)
            .args(args)
            .env("GLIBC_TUNABLES", value)
            .exec();
        eprintln!(
            "plant-store: could not restart without malloc thread caches ({error}); going on"
        );
    }
}
