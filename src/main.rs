//! plant-store: run the command line (`cli`), and turn how it ended into a message and
//! an exit status.

mod api;
mod cli;
mod http;
mod ops;
mod store;
mod webhooks;

use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let status = match cli::run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => {
            eprintln!("plant-store: {failure}");
            if let cli::Failure::Failed(e) = &failure {
                log::error!("{e}");
            }
            ExitCode::from(failure.status())
        }
    };
    log::logger().flush();
    status
}

/// The layers' rule, checked on the source (a test).
#[cfg(test)]
mod layers;
