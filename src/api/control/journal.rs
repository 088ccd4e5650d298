//! The journal of answered requests (`GET /_control/requests`): the last
//! `--journal-size` requests, `/_control/` ones excepted, oldest first. An entry is
//! written before its answer's first byte is sent. No token and no body, ever: method,
//! path and query as sent, the caller's principal, status and times.

use crate::api::error::ApiError;
use crate::ops::clock::Clock;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// Characters of a path or a query an entry keeps at most (the rest is cut, `…`).
pub const MAX_JOURNAL_TARGET: usize = 2048;

struct Entry {
    n: u64,
    method: String,
    path: String,
    query: String,
    principal: Option<String>,
    status: Option<u16>,
    fault: Option<String>,
    /// When the request arrived, milliseconds since the Unix epoch.
    at_ms: i64,
    duration_ms: f64,
}

struct Kept {
    entries: VecDeque<Entry>,
    /// The next entry's `n` (from 1; a clear starts again at 1).
    next: u64,
}

pub struct Journal {
    size: usize,
    kept: Mutex<Kept>,
    /// The server's clock: an entry's `at` is on the test clock.
    clock: Arc<Clock>,
}

/// Whether a request target is test control's own (never journaled nor faulted).
pub fn is_control(url: &str) -> bool {
    url.starts_with("/_control/") || url == "/_control"
}

impl Journal {
    pub fn new(size: usize, clock: Arc<Clock>) -> Journal {
        Journal {
            size,
            clock,
            kept: Mutex::new(Kept {
                entries: VecDeque::new(),
                next: 1,
            }),
        }
    }

    /// A request answered with `status` (`None`: no answer sent), arrived at `started`.
    pub fn record(
        &self,
        method: &str,
        url: &str,
        principal: Option<&str>,
        status: Option<u16>,
        fault: Option<&str>,
        started: Instant,
    ) {
        if self.size == 0 || is_control(url) {
            return;
        }
        let elapsed = started.elapsed();
        let at_ms = self.clock.millis_at(started);
        let (path, query) = url.split_once('?').unwrap_or((url, ""));
        let cut = |s: &str| match s.char_indices().nth(MAX_JOURNAL_TARGET) {
            None => s.to_owned(),
            Some((i, _)) => format!("{}…", &s[..i]),
        };
        let mut kept = self.kept.lock().unwrap_or_else(|e| e.into_inner());
        let n = kept.next;
        kept.next += 1;
        if kept.entries.len() == self.size {
            kept.entries.pop_front();
        }
        kept.entries.push_back(Entry {
            n,
            method: cut(method),
            path: cut(path),
            query: cut(query),
            principal: principal.map(str::to_owned),
            status,
            fault: fault.map(str::to_owned),
            at_ms,
            duration_ms: (elapsed.as_micros() as f64 / 10.0).round() / 100.0,
        });
    }

    /// `DELETE /_control/requests`, and a reset: empty, and `n` from 1 again.
    pub fn clear(&self) {
        let mut kept = self.kept.lock().unwrap_or_else(|e| e.into_inner());
        kept.entries.clear();
        kept.next = 1;
    }

    /// `GET /_control/requests?method=&path=&principal=`: the entries that match, as JSON.
    pub fn list(&self, query: &str) -> Result<Vec<u8>, ApiError> {
        let (mut method, mut path, mut principal) = (None, None, None);
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
            let value = decode(value).ok_or_else(|| {
                ApiError::BadRequest(format!(
                    "query parameter `{}` is not percent-encoded UTF-8",
                    crate::api::error::printable(name, 32)
                ))
            })?;
            let slot = match name {
                "method" => &mut method,
                "path" => &mut path,
                "principal" => &mut principal,
                _ => {
                    return Err(ApiError::BadRequest(format!(
                        "unknown query parameter `{}` (known: method, path, principal)",
                        crate::api::error::printable(name, 32)
                    )));
                }
            };
            if slot.replace(value).is_some() {
                return Err(ApiError::BadRequest(format!(
                    "query parameter `{name}` is given twice"
                )));
            }
        }
        let kept = self.kept.lock().unwrap_or_else(|e| e.into_inner());
        let matching = kept.entries.iter().filter(|e| {
            method.as_deref().is_none_or(|m| e.method == m)
                && path.as_deref().is_none_or(|p| match p.strip_suffix('*') {
                    Some(prefix) => e.path.starts_with(prefix),
                    None => e.path == p,
                })
                && principal
                    .as_deref()
                    .is_none_or(|p| e.principal.as_deref() == Some(p))
        });
        let list: Vec<serde_json::Value> = matching
            .map(|e| {
                serde_json::json!({
                    "n": e.n,
                    "method": e.method,
                    "path": e.path,
                    "query": e.query,
                    "principal": e.principal,
                    "status": e.status,
                    "fault": e.fault,
                    "at": crate::ops::clock::utc_millis(e.at_ms),
                    "duration_ms": e.duration_ms,
                })
            })
            .collect();
        Ok(serde_json::to_vec(&list).expect("JSON values serialize"))
    }
}

/// A query value, percent-decoded (`+` is a space).
pub(super) fn decode(v: &str) -> Option<String> {
    let mut out = Vec::with_capacity(v.len());
    let mut bytes = v.bytes();
    while let Some(b) = bytes.next() {
        match b {
            b'%' => {
                let hex = [bytes.next()?, bytes.next()?];
                let hex = std::str::from_utf8(&hex).ok()?;
                out.push(u8::from_str_radix(hex, 16).ok()?);
            }
            b'+' => out.push(b' '),
            b => out.push(b),
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::Journal;
    use std::time::Instant;

    #[test]
    fn the_journal_keeps_the_last_and_filters() {
        let j = Journal::new(2, Default::default());
        j.record(
            "GET",
            "/plants?limit=1",
            Some("alice"),
            Some(200),
            None,
            Instant::now(),
        );
        j.record(
            "POST",
            "/plants",
            Some("bob"),
            Some(201),
            None,
            Instant::now(),
        );
        j.record(
            "DELETE",
            "/plants/1",
            None,
            Some(401),
            Some("flt_1"),
            Instant::now(),
        );
        j.record(
            "POST",
            "/_control/reset",
            None,
            Some(204),
            None,
            Instant::now(),
        );
        let all: serde_json::Value = serde_json::from_slice(&j.list("").unwrap()).unwrap();
        assert_eq!(all.as_array().unwrap().len(), 2);
        assert_eq!(all[0]["n"], 2);
        assert_eq!(all[1]["path"], "/plants/1");
        assert_eq!(all[1]["fault"], "flt_1");
        let some: serde_json::Value =
            serde_json::from_slice(&j.list("path=%2Fplants%2F*").unwrap()).unwrap();
        assert_eq!(some.as_array().unwrap().len(), 1);
        assert!(j.list("who=x").is_err());
        j.clear();
        j.record("GET", "/events", Some("a"), Some(200), None, Instant::now());
        let all: serde_json::Value = serde_json::from_slice(&j.list("").unwrap()).unwrap();
        assert_eq!(all[0]["n"], 1);
    }
}
