//! plant-store, the binary: a thin `main` over the library. It runs the command line
//! (`cli`), and for `serve` makes the process-wide set-up a library must not (the logger,
//! the panic hook, the allocator's arenas, the descriptor limit, SIGTERM and SIGINT), starts
//! the library's server, prints the `listening on` line, and stops it on a signal. It
//! turns how a command ended into a message and an exit status.

use plant_store::binary::{self, Failure, Ran, Serve};
use std::io::Write;
use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let status = match binary::run(&args) {
        Ok(Ran::Done) => ExitCode::SUCCESS,
        Ok(Ran::Serve(config)) => serve(config).map_or_else(fail, |()| ExitCode::SUCCESS),
        Err(failure) => fail(failure),
    };
    log::logger().flush();
    status
}

/// Runs the server until SIGTERM or SIGINT, then stops it (drained, closed, joined).
fn serve(config: Serve) -> Result<(), Failure> {
    config.set_up_process();
    let failed = |e: plant_store::Error| Failure::Failed(e.to_string());
    let running = config.start()?;
    for signal in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT] {
        signal_hook::flag::register(signal, running.stop_flag())
            .map_err(|e| Failure::Failed(format!("cannot handle signals: {e}")))?;
    }
    println!("listening on {}", running.url());
    std::io::stdout()
        .flush()
        .map_err(|e| Failure::Failed(e.to_string()))?;
    running.wait().map_err(failed)
}

fn fail(failure: Failure) -> ExitCode {
    eprintln!("plant-store: {failure}");
    if let Failure::Failed(e) = &failure {
        log::error!("{e}");
    }
    ExitCode::from(failure.status())
}
