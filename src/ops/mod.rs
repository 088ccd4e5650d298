//! What every layer may use: the clock, the log, the metrics, the process's set-up, a
//! server's threads.

pub mod clock;
pub mod log_queue;
pub mod logging;
#[cfg(target_env = "gnu")]
pub mod malloc;
pub mod metrics;
pub mod process;
pub mod random;
pub mod secret;
pub mod stdio;
pub mod threads;
