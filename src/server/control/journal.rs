//! The journal typed (docs/testing.md, "The journal"): a `Query` is the query string of
//! `GET /_control/requests`, which the server checks; an `Entry` is one request as the
//! journal shows it.

use crate::server::control::json::{Read, object};
use crate::server::control::time::Time;
use base64::Engine;
use serde_json::Value;
use std::time::Duration;

/// Which entries a journal listing gives (`Query::all()`, then filters), and how long it
/// waits for them (`wait`, `min`). Each filter is a query parameter of the listing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[must_use]
pub struct Query {
    params: Vec<(&'static str, String)>,
}

impl Query {
    /// Every entry the journal keeps, oldest first.
    pub fn all() -> Query {
        Query::default()
    }

    fn with(mut self, name: &'static str, value: String) -> Query {
        self.params.retain(|(n, _)| *n != name);
        self.params.push((name, value));
        self
    }

    /// Requests with this method (`POST`).
    pub fn method(self, method: impl Into<String>) -> Query {
        self.with("method", method.into())
    }

    /// Requests to this path: exact, or a prefix when it ends in `*`.
    pub fn path(self, path: impl Into<String>) -> Query {
        self.with("path", path.into())
    }

    /// Requests whose path starts with `prefix`.
    pub fn path_prefix(self, prefix: impl Into<String>) -> Query {
        self.with("path", prefix.into() + "*")
    }

    /// Requests of this principal.
    pub fn principal(self, principal: impl Into<String>) -> Query {
        self.with("principal", principal.into())
    }

    /// Requests answered with this status.
    pub fn status(self, status: u16) -> Query {
        self.with("status", status.to_string())
    }

    /// Requests answered with a status of this class: `status_class(5)` is `5xx`.
    pub fn status_class(self, hundreds: u8) -> Query {
        self.with("status", format!("{hundreds}xx"))
    }

    /// Entries with `n` past `n`.
    pub fn after(self, n: u64) -> Query {
        self.with("after", n.to_string())
    }

    /// The first `n` that match.
    pub fn limit(self, n: usize) -> Query {
        self.with("limit", n.to_string())
    }

    /// Waits until `min` answered entries match (1 unless `min` says), or until `wait`
    /// (whole seconds, 1 s to 30 s) has passed; then lists what matches.
    pub fn wait(self, wait: Duration) -> Query {
        self.with("wait", crate::ops::clock::duration_text(wait))
    }

    /// With `wait`: how many answered entries to wait for.
    pub fn min(self, n: usize) -> Query {
        self.with("min", n.to_string())
    }

    /// The listing's target: `/_control/requests` and the query string.
    pub(super) fn target(&self) -> String {
        let mut target = "/_control/requests".to_owned();
        for (i, (name, value)) in self.params.iter().enumerate() {
            target.push(if i == 0 { '?' } else { '&' });
            target.push_str(name);
            target.push('=');
            target.push_str(&percent_encoded(value));
        }
        target
    }
}

/// `value` with every byte but the unreserved ones (RFC 3986) percent-encoded; also an
/// id put in a path.
pub(super) fn percent_encoded(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for b in value.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                out.push(b as char)
            }
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

/// One request as the journal shows it: what the client sent, and what became of it.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Entry {
    /// Its place in the order of arrival, from 1.
    pub n: u64,
    /// The request's method.
    pub method: String,
    /// Its path, without the query.
    pub path: String,
    /// The query string as sent, without `?` (empty for none).
    pub query: String,
    /// The header fields as received, in order, names as written; `Authorization`'s
    /// credentials are `[redacted]`.
    pub headers: Vec<(String, String)>,
    /// Which bearer token it sent (`Minted::fingerprint`), `None` for none.
    pub token: Option<String>,
    /// The body, when it is UTF-8 (at most 64 KiB).
    pub body: Option<String>,
    /// The body in base64, when it is not UTF-8.
    pub body_base64: Option<String>,
    /// More than 64 KiB was sent.
    pub body_truncated: bool,
    /// The principal of the token it sent, when that is a stored one.
    pub principal: Option<String>,
    /// Its answer's status: `None` until answered, or when no answer was sent.
    pub status: Option<u16>,
    /// Whether its answer's first byte was sent (or it ended with none).
    pub answered: bool,
    /// The fault that took it (`flt_…`).
    pub fault: Option<String>,
    /// When it arrived, on the server's clock.
    pub at: Time,
    /// From its arrival to its answer; `None` until answered.
    pub duration_ms: Option<f64>,
}

impl Entry {
    /// The first header field named `name` (in any case).
    pub fn header(&self, name: &str) -> Option<&str> {
        let field = self
            .headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name));
        field.map(|(_, v)| v.as_str())
    }

    /// The body's bytes, whether it was UTF-8 or not.
    pub fn body_bytes(&self) -> Option<Vec<u8>> {
        match (&self.body, &self.body_base64) {
            (Some(text), _) => Some(text.as_bytes().to_vec()),
            (None, Some(b64)) => base64::engine::general_purpose::STANDARD.decode(b64).ok(),
            (None, None) => None,
        }
    }

    /// The body read as JSON (`None` when there is none, or it is not JSON).
    pub fn body_json(&self) -> Option<Value> {
        serde_json::from_str(self.body.as_deref()?).ok()
    }

    pub(super) fn from_json(v: &Value) -> Option<Entry> {
        let e = Read(object(v)?);
        let headers = e.0.get("headers")?.as_array()?.iter().map(|pair| {
            let [name, value] = pair.as_array()?.as_slice() else {
                return None;
            };
            Some((name.as_str()?.to_owned(), value.as_str()?.to_owned()))
        });
        Some(Entry {
            n: e.number("n")??,
            method: e.text("method")??,
            path: e.text("path")??,
            query: e.text("query")??,
            headers: headers.collect::<Option<_>>()?,
            token: e.text("token")?,
            body: e.text("body")?,
            body_base64: e.text("body_base64")?,
            body_truncated: e.flag("body_truncated")?,
            principal: e.text("principal")?,
            status: e.number("status")?.map(u16::try_from).transpose().ok()?,
            answered: e.flag("answered")?,
            fault: e.text("fault")?,
            at: Time::from(e.text("at")??),
            duration_ms: e.float("duration_ms")?,
        })
    }
}
