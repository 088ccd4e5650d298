//! plant-store, the binary: a thin `main` over the library. It runs the command line
//! (`cli`), and for `serve` makes the process-wide set-up a library must not (the logger,
//! the panic hook, the allocator's arenas, the descriptor limit, SIGTERM and SIGINT), starts
//! the library's server, prints the `listening on` line, and stops it on a signal. It
//! turns how a command ended into a message and an exit status.

use plant_store::binary::{self, Failure, Ran, ServeConfig};
use std::process::ExitCode;

/// glibc's malloc, its thread caches serving over-aligned blocks too (`ops/malloc.rs`).
#[cfg(target_env = "gnu")]
#[global_allocator]
static MALLOC: binary::Malloc = binary::Malloc;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let status = match binary::run(&args) {
        Ok(Ran::Done) => ExitCode::SUCCESS,
        Ok(Ran::Serve(config)) => serve(*config).map_or_else(fail, |()| ExitCode::SUCCESS),
        Err(failure) => fail(failure),
    };
    log::logger().flush();
    status
}

/// Runs the server until SIGTERM or SIGINT, then stops it (drained, closed, joined).
fn serve(config: ServeConfig) -> Result<(), Failure> {
    binary::init_logging(config.log_level, config.log_format);
    binary::log_panics();
    binary::limit_malloc_arenas();
    binary::raise_fd_limit();
    let failed = |e: binary::Error| Failure::Failed(e.to_string());
    // A bad seed file is the command line's fault: exit status 2.
    let running = binary::start(config).map_err(|e| match e {
        binary::Error::Option(e) => Failure::Usage(e),
        e => failed(e),
    })?;
    for signal in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT] {
        signal_hook::flag::register(signal, running.stop_flag())
            .map_err(|e| Failure::Failed(format!("cannot handle signals: {e}")))?;
    }
    binary::announce(&format!("listening on {}\n", running.url()))
        .map_err(|e| Failure::Failed(e.to_string()))?;
    running.wait().map_err(failed)
}

fn fail(failure: Failure) -> ExitCode {
    binary::say(&format!("plant-store: {failure}\n"));
    if let Failure::Failed(e) = &failure {
        log::error!("{e}");
    }
    ExitCode::from(failure.status())
}
