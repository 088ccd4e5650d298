//! What every layer may use: the clock, the log, the metrics, the process's set-up.

pub mod clock;
pub mod logging;
pub mod metrics;
pub mod process;
