//! What `serve` has of webhooks: the values of its `--webhook-*` options (the option
//! table calls these setters) and the deliveries' start. Only with the `webhooks`
//! feature; `no_webhooks.rs` stands in for it without.

use crate::config::values::{
    DURATION_FORMS, MAX_TIMEOUT_SECS, duration, number, parse_duration, show,
};
use crate::store::{DUE_AT_MOST, LEASE_AT_MOST};
use crate::webhooks::LEASE_MARGIN;
use crate::webhooks::client;
pub use crate::webhooks::schedule::DEFAULT_SCHEDULE;
use crate::webhooks::schedule::{MAX_DELAY, MAX_RETRY_AFTER, MAX_SCHEDULE_STEPS, Schedule};
pub use crate::webhooks::{Config, Deliveries, start};

/// This build has webhooks: the `webhook` commands run.
pub fn available() -> Result<(), String> {
    Ok(())
}

/// `serve`'s webhook settings when no option sets them.
pub fn defaults() -> Config {
    Config {
        threads: crate::webhooks::DEFAULT_THREADS,
        timeout: crate::webhooks::DEFAULT_TIMEOUT,
        schedule: Schedule::parse(DEFAULT_SCHEDULE, parse_duration)
            .expect("the default schedule parses"),
        ca: None,
    }
}

/// `--webhook-threads`.
pub fn set_threads(c: &mut Config, v: &str, name: &'static str) -> Result<(), String> {
    c.threads = number(v, name, 1, 256)?;
    Ok(())
}

/// `--webhook-timeout`.
pub fn set_timeout(c: &mut Config, v: &str, name: &'static str) -> Result<(), String> {
    c.timeout = duration(v, name, 1, MAX_TIMEOUT_SECS)?;
    Ok(())
}

/// `--webhook-schedule`.
pub fn set_schedule(c: &mut Config, v: &str, name: &'static str) -> Result<(), String> {
    c.schedule = Schedule::parse(v, parse_duration).map_err(|_| {
        format!(
            "{name} must list 1 to {MAX_SCHEDULE_STEPS} durations from 0s to {} separated by commas, each {DURATION_FORMS}; not `{v}`",
            show(MAX_DELAY.as_secs())
        )
    })?;
    Ok(())
}

/// `--webhook-ca`: read and parsed now, so that a bad file is refused before anything
/// is opened.
pub fn set_ca(c: &mut Config, v: &str, name: &'static str) -> Result<(), String> {
    let ca = std::path::PathBuf::from(v);
    client::Client::new(crate::webhooks::DEFAULT_TIMEOUT, Some(&ca))
        .map_err(|e| format!("{name}: {e}"))?;
    c.ca = Some(ca);
    Ok(())
}

/// The options of the option table this build refuses: none.
pub const REFUSED: &[&str] = &[];

// No lease or retry time that a real clock stores is further ahead than the store lets
// one be at open (`store::LEASE_AT_MOST`, `DUE_AT_MOST`; further is a test clock's): a
// lease is the timeout and the margin, renewed for a fault's second post (a timeout) or
// delay (at most a minute); a retry waits at most the longest wait a schedule lists, or
// a `Retry-After`'s most.
const _: () = assert!(
    2 * MAX_TIMEOUT_SECS + LEASE_MARGIN.as_secs() < LEASE_AT_MOST.as_secs()
        && MAX_DELAY.as_secs() < DUE_AT_MOST.as_secs()
        && MAX_RETRY_AFTER.as_secs() < DUE_AT_MOST.as_secs()
);
