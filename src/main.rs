//! plant-store, the binary: a thin `main` over the library. It runs the command line
//! (`cli`), and for `serve` makes the process-wide set-up a library must not (the logger,
//! the panic hook, the allocator's arenas, the descriptor limit, SIGTERM, SIGINT and
//! SIGHUP), starts the library's server, prints the `listening on` line, and stops it on
//! a signal (or, with `--exit-on-stdin-close`, once standard input is closed). It
//! turns how a command ended into a message and an exit status.

use plant_store::binary::{self, Failure, Ran, Serve};
use std::process::ExitCode;

/// glibc's malloc, its thread caches serving over-aligned blocks too (`ops/malloc.rs`).
#[cfg(target_env = "gnu")]
#[global_allocator]
static MALLOC: binary::Malloc = binary::Malloc;

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

/// Runs the server until SIGTERM, SIGINT or SIGHUP, then stops it (drained, closed,
/// joined). SIGHUP stops it as SIGTERM does: this server has nothing to reload, and a
/// hang-up (a closed terminal) must not end it without the drain and the checkpoint.
fn serve(config: Serve) -> Result<(), Failure> {
    config.set_up_process();
    let exit_on_stdin_close = config.exits_on_stdin_close();
    let failed = |e: plant_store::Error| Failure::Failed(e.to_string());
    let running = config.start()?;
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    for signal in [SIGTERM, SIGINT, SIGHUP] {
        signal_hook::flag::register(signal, running.stop_flag())
            .map_err(|e| Failure::Failed(format!("cannot handle signals: {e}")))?;
    }
    if exit_on_stdin_close {
        stop_when_stdin_closes(running.stop_flag());
    }
    binary::announce(&format!("listening on {}\n", running.url()))
        .map_err(|e| Failure::Failed(e.to_string()))?;
    running.wait().map_err(failed)
}

/// `--exit-on-stdin-close`: a thread reads standard input (discarding what comes) and
/// sets the stop flag, as SIGTERM does, once it is closed or cannot be read. A parent that
/// holds the pipe's other end (a test harness) takes its server with it however it
/// ends, SIGKILL included.
fn stop_when_stdin_closes(stop: std::sync::Arc<std::sync::atomic::AtomicBool>) {
    use std::io::Read;
    std::thread::Builder::new()
        .name("stdin".into())
        .spawn(move || {
            let mut buf = [0u8; 512];
            loop {
                match std::io::stdin().read(&mut buf) {
                    Ok(0) => break,
                    Ok(_) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(_) => break,
                }
            }
            log::info!("standard input closed (--exit-on-stdin-close): stopping");
            stop.store(true, std::sync::atomic::Ordering::SeqCst);
        })
        .expect("a thread to watch standard input");
}

fn fail(failure: Failure) -> ExitCode {
    binary::say(&format!("plant-store: {failure}\n"));
    if let Failure::Failed(e) = &failure {
        log::error!("{e}");
    }
    ExitCode::from(failure.status())
}
