//! The parsers of option values, each error naming what was read: the flag, or the
//! environment variable when the value came from there.

pub(crate) use crate::ops::clock::parse_duration;
use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;

/// The longest `--queue-timeout`, `--read-timeout`, `--body-timeout`, `--write-timeout`,
/// `--drain-timeout` and `--webhook-timeout`: an hour.
pub(crate) const MAX_TIMEOUT_SECS: u64 = 3600;

/// The grammar of every duration, in one sentence for the errors.
pub(crate) const DURATION_FORMS: &str =
    "a whole number of seconds, or a whole number and s, m, h or d (90, 90s, 15m, 2h, 7d)";

/// A duration from `min` to `max` seconds, for the option or variable `name`.
pub(crate) fn duration(v: &str, name: &str, min: u64, max: u64) -> Result<Duration, String> {
    match parse_duration(v).and_then(|s| u64::try_from(s).ok()) {
        Some(s) if (min..=max).contains(&s) => Ok(Duration::from_secs(s)),
        _ => Err(format!(
            "{name} must be a duration from {} to {}: {DURATION_FORMS}; not `{v}`",
            show(min),
            show(max)
        )),
    }
}

/// Seconds in the largest unit that divides them (`3600` is `1h`).
pub(crate) fn show(secs: u64) -> String {
    match secs {
        0 => "0s".into(),
        s if s % 86_400 == 0 => format!("{}d", s / 86_400),
        s if s % 3600 == 0 => format!("{}h", s / 3600),
        s if s % 60 == 0 => format!("{}m", s / 60),
        s => format!("{s}s"),
    }
}

/// A whole number from `min` to `max`, for the option or variable `name`.
pub(crate) fn number(v: &str, name: &str, min: usize, max: usize) -> Result<usize, String> {
    match v.parse::<usize>() {
        Ok(n) if (min..=max).contains(&n) => Ok(n),
        _ => Err(format!(
            "{name} must be a whole number from {min} to {max}, not `{v}`"
        )),
    }
}

/// A switch that also has a variable: given as a flag (no value) or as the variable's
/// `1`: on; the variable's `0`: off.
pub(super) fn switch(v: &str, name: &str) -> Result<bool, String> {
    match v {
        "" | "1" => Ok(true),
        "0" => Ok(false),
        _ => Err(format!(
            "{name} must be 1 or 0, not `{}`",
            crate::api::error::printable(v, 32)
        )),
    }
}

/// A listen address: an IP address and a port (`127.0.0.1:8080`, `[::]:8080`), or
/// `localhost:PORT` for 127.0.0.1. No other name is looked up: where a server listens
/// should not depend on a resolver, and a name with several addresses is ambiguous.
pub(crate) fn parse_addr(addr: &str, name: &str) -> Result<SocketAddr, String> {
    let bad = || {
        format!(
            "{name} must be an IP address and a port, such as 127.0.0.1:8080, [::]:8080 or localhost:8080, not `{addr}`"
        )
    };
    match addr.strip_prefix("localhost:") {
        Some(port) => Ok(SocketAddr::from((
            Ipv4Addr::LOCALHOST,
            port.parse().map_err(|_| bad())?,
        ))),
        None => addr.parse().map_err(|_| bad()),
    }
}

/// 4 workers per CPU (a worker waits on fsync and on slow clients), from 4 to 64.
pub(crate) fn default_workers() -> usize {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    (4 * cpus).clamp(4, 64)
}

/// What a token must be for a request to carry it (`Authorization: Bearer` and RFC 6750's
/// token68), said in errors that never show the token.
pub(crate) fn token68() -> String {
    format!(
        "it must be 1 to {} letters, digits and -._~+/, then optional = padding, as RFC 6750's token68",
        crate::api::auth::MAX_AUTHORIZATION_BYTES - "Bearer ".len()
    )
}

/// Whether a request could carry `token` as its bearer token.
pub(crate) fn usable(token: &str) -> Result<(), ()> {
    crate::api::auth::bearer_token(Some(&format!("Bearer {token}")))
        .map(|_| ())
        .map_err(|_| ())
}
