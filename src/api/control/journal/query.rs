//! The query of `GET /_control/requests`: which entries (`method`, `path`, `principal`,
//! `status`, `after`), how many (`limit`), and how long to wait for them (`wait`, `min`);
//! each parameter at most once, percent-encoded, each error naming it.

use crate::api::control::journal::entry::Entry;
use crate::api::error::{ApiError, printable};
use crate::api::query::decode;
use std::time::Duration;

/// The longest `wait` of a journal listing.
pub const MAX_JOURNAL_WAIT: Duration = Duration::from_secs(30);

const KNOWN: &str = "method, path, principal, status, after, limit, wait, min";

/// A listing's query.
#[derive(Default)]
pub struct Query {
    method: Option<String>,
    /// Exact, or a prefix when it ends in `*`.
    path: Option<String>,
    principal: Option<String>,
    status: Option<Status>,
    /// Only entries with `n` past it.
    pub(super) after: u64,
    /// The first this many that match.
    pub(super) limit: Option<usize>,
    /// Wait until `min` answered entries match, at most this long.
    pub wait: Option<Duration>,
    pub(super) min: usize,
}

#[derive(Clone, Copy)]
enum Status {
    Exactly(u16),
    /// `2xx`: the hundreds digit.
    Class(u16),
}

impl Query {
    /// Parses a listing's query string.
    pub fn parse(query: &str, most: usize) -> Result<Query, ApiError> {
        let mut q = Query::default();
        let mut seen: Vec<&str> = Vec::new();
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
            let value = decode(value).ok_or_else(|| {
                ApiError::BadRequest(format!(
                    "query parameter `{}` is not percent-encoded UTF-8",
                    printable(name, 32)
                ))
            })?;
            if seen.contains(&name) {
                return Err(ApiError::BadRequest(format!(
                    "query parameter `{}` is given twice",
                    printable(name, 32)
                )));
            }
            seen.push(name);
            let whole = |max: u64| {
                let n = value.parse::<u64>().ok().filter(|n| *n <= max);
                n.filter(|_| value.bytes().all(|b| b.is_ascii_digit()))
                    .ok_or_else(|| bad(name, &format!("a whole number from 0 to {max}"), &value))
            };
            match name {
                "method" => q.method = Some(value),
                "path" => q.path = Some(value),
                "principal" => q.principal = Some(value),
                "status" => q.status = Some(status(&value)?),
                "after" => q.after = whole(u64::MAX)?,
                "limit" => q.limit = Some(whole(most as u64)? as usize),
                "min" => match whole(most as u64)? {
                    0 => {
                        return Err(bad(
                            "min",
                            &format!("a whole number from 1 to {most}"),
                            &value,
                        ));
                    }
                    n => q.min = n as usize,
                },
                "wait" => {
                    let max = MAX_JOURNAL_WAIT.as_secs();
                    q.wait = crate::ops::clock::parse_duration(&value)
                        .and_then(|s| u64::try_from(s).ok())
                        .filter(|s| (1..=max).contains(s))
                        .map(Duration::from_secs);
                    if q.wait.is_none() {
                        let what = format!("a DURATION from 1s to {max}s (such as `5s`)");
                        return Err(bad("wait", &what, &value));
                    }
                }
                _ => {
                    return Err(ApiError::BadRequest(format!(
                        "unknown query parameter `{}` (known: {KNOWN})",
                        printable(name, 32)
                    )));
                }
            }
        }
        if q.wait.is_none() && q.min > 0 {
            return Err(ApiError::BadRequest(
                "query parameter `min` needs `wait`".into(),
            ));
        }
        q.min = q.min.max(1);
        Ok(q)
    }

    /// Whether `e` is listed (`after` aside).
    pub(super) fn matches(&self, e: &Entry) -> bool {
        if self.method.as_deref().is_some_and(|m| e.method() != m)
            || self
                .path
                .as_deref()
                .is_some_and(|p| match p.strip_suffix('*') {
                    Some(prefix) => !e.path().starts_with(prefix),
                    None => e.path() != p,
                })
        {
            return false;
        }
        if self.principal.is_none() && self.status.is_none() {
            return true;
        }
        let late = e.late();
        let status = late.answer.as_ref().and_then(|a| a.status);
        self.principal
            .as_deref()
            .is_none_or(|p| late.principal.as_deref() == Some(p))
            && self.status.is_none_or(|want| match (want, status) {
                (_, None) => false,
                (Status::Exactly(want), Some(s)) => s == want,
                (Status::Class(hundreds), Some(s)) => s / 100 == hundreds,
            })
    }
}

fn bad(name: &str, what: &str, value: &str) -> ApiError {
    ApiError::BadRequest(format!(
        "query parameter `{name}` must be {what}, not `{}`",
        printable(value, 32)
    ))
}

/// `503`, or a class: `2xx`.
fn status(value: &str) -> Result<Status, ApiError> {
    let b = value.as_bytes();
    let found = match b {
        [d @ b'1'..=b'5', b'x' | b'X', b'x' | b'X'] => Some(Status::Class(u16::from(d - b'0'))),
        [b'1'..=b'5', b'0'..=b'9', b'0'..=b'9'] => value.parse().ok().map(Status::Exactly),
        _ => None,
    };
    found.ok_or_else(|| {
        bad(
            "status",
            "a status such as `503`, or a class: `2xx`, `4xx`, `5xx`",
            value,
        )
    })
}
