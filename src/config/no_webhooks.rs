//! A build without the `webhooks` feature (the device build, `scripts/build-static ARCH
//! --small`): stands in for `webhook.rs`, with its names. `serve`'s `--webhook-*` options
//! (flag or variable; `--webhook-hold` is the retention's and stays) and the `webhook`
//! commands are refused with exit status 2, naming the feature, and no webhook thread
//! starts. The database's endpoints stay as they are: a build with the feature delivers
//! them.

use crate::ops::threads::Threads;
use crate::store::Store;
use std::time::Instant;

/// What is refused, and why.
fn refused(what: &str) -> String {
    format!(
        "{what}: this build has no webhooks (it was built without the `webhooks` cargo feature)"
    )
}

/// The `webhook` commands are refused (`options::parse`, before anything is opened).
pub fn available() -> Result<(), String> {
    Err(refused("the webhook command"))
}

/// `--help`'s default of `--webhook-schedule`.
pub const DEFAULT_SCHEDULE: &str = "none: no webhooks in this build";

/// `serve`'s webhook settings: none.
#[derive(Debug, Clone)]
pub struct Config;

pub fn defaults() -> Config {
    Config
}

/// The options of the option table this build refuses (their setters below): `--help`
/// lists none of them.
pub const REFUSED: &[&str] = &[
    "--webhook-threads",
    "--webhook-timeout",
    "--webhook-schedule",
    "--webhook-ca",
];

/// Every `--webhook-*` option of `serve` (but `--webhook-hold`) is refused.
pub fn set_threads(_: &mut Config, _: &str, name: &'static str) -> Result<(), String> {
    Err(refused(name))
}
pub use set_threads as set_timeout;
pub use set_threads as set_schedule;
pub use set_threads as set_ca;

/// No deliveries: nothing to stop or wait for.
pub struct Deliveries;

impl Deliveries {
    pub fn stop(&self) {}
    pub fn finish(self, _: Instant) {}
}

/// Starts no thread.
pub fn start(
    _: &Store,
    _: Config,
    _: &Threads,
    _: std::sync::Arc<crate::ops::clock::Clock>,
    _: Option<std::sync::Arc<crate::api::control::Control>>,
) -> Result<Deliveries, String> {
    Ok(Deliveries)
}
