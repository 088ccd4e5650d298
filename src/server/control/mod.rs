//! Test control, typed and in-process: [`Running::control`](crate::Running::control)
//! gives the control surface of docs/testing.md (tokens, reset, snapshots, faults, the
//! journal, the clock) as methods, for a server started with
//! [`Builder::test_control`](crate::Builder::test_control) or
//! [`Builder::control_token`](crate::Builder::control_token).
//!
//! ```
//! use plant_store::control::{Fault, Match, Query};
//!
//! let server = plant_store::Server::builder().test_control().start()?;
//! let control = server.control()?;
//! let alice = control.mint("alice")?; // a principal of the test's own
//! control.fault(Fault::on(Match::post("/plants").principal("alice")).status(503).times(2))?;
//! // … the client under test creates a plant with `alice.token`: 503, 503, then 200 …
//! let sent = control.journal(Query::all().principal("alice"))?; // what it sent, typed
//! # assert!(sent.is_empty());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Each call is the request an HTTP client would send (the same JSON), handed in this
//! process to the server's own router (no socket; `door.rs`): the server checks it as it
//! checks any, and its refusal is a [`ControlError`] with the status and message the
//! HTTP surface answers (`400 action.status: must be an integer from 200 to 599`).
//! Calls are neither journaled nor faulted, as control requests never are.

mod action;
mod door;
mod fault;
mod journal;
mod json;
mod start;
mod time;

pub use action::{Action, Status};
pub use fault::{Fault, FaultBuilder, Match, StoredFault, When};
pub use journal::{Entry, Query};
pub use time::Time;

pub(crate) use door::{Door, Slot};
use json::{Read, object};
use serde_json::{Value, json};
pub(crate) use start::{door, start};
use std::fmt;
use std::time::Duration;

/// The test control of a running server (`Running::control()`). Cheap to copy; calls
/// from several threads at once are taken one at a time (a journal listing that waits
/// holds no other call up).
#[derive(Debug, Clone, Copy)]
pub struct Control<'s> {
    door: &'s Door,
}

/// A control request the server refused: the status and message of its
/// `{"error","message"}` body, as the HTTP surface answers them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ControlError {
    status: u16,
    message: String,
}

impl ControlError {
    /// The HTTP status: 400 (the message names the member), 404, 409, 503 (the server
    /// is stopping)…
    pub fn status(&self) -> u16 {
        self.status
    }

    /// The server's message.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// `Running::control` of a server without test control.
    pub(crate) fn off() -> ControlError {
        ControlError {
            status: 404,
            message: "test control is off: start the server with Builder::test_control() or \
                      Builder::control_token(…)"
                .into(),
        }
    }

    /// A 2xx answer not as `what` should be: its status and size, and why it is no JSON,
    /// never its body (a mint's holds the token; a listing, what clients sent).
    fn unreadable(
        what: &str,
        answer: &door::Answer,
        json: Option<serde_json::Error>,
    ) -> ControlError {
        let why = match json {
            Some(e) => format!("not JSON ({e})"),
            None => "JSON without what was expected".into(),
        };
        ControlError {
            status: 500,
            message: format!(
                "an answer of test control this library cannot read ({what}): {} of {} bytes, {why}",
                answer.status,
                answer.body.len()
            ),
        }
    }
}

impl fmt::Display for ControlError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.status, self.message)
    }
}

impl std::error::Error for ControlError {}

/// A token's scope.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// `read`: GET only.
    Read,
    /// `read-write`: GET, POST and DELETE.
    ReadWrite,
}

impl Scope {
    fn name(self) -> &'static str {
        match self {
            Scope::Read => "read",
            Scope::ReadWrite => "read-write",
        }
    }
}

/// A token to mint: `Mint::new("p-42").scope(Scope::Read).expires_in(…)`; a principal
/// alone (`control.mint("p-42")`) is a read-write token that never expires. `Debug`
/// shows no chosen token.
#[derive(Clone, PartialEq)]
#[must_use]
pub struct Mint {
    body: serde_json::Map<String, Value>,
}

impl Mint {
    /// A read-write token of `principal`, without expiry.
    pub fn new(principal: impl Into<String>) -> Mint {
        let mut body = serde_json::Map::new();
        body.insert("principal".into(), json!(principal.into()));
        Mint { body }
    }

    fn with(mut self, name: &str, value: Value) -> Mint {
        self.body.insert(name.into(), value);
        self
    }

    /// Its scope (default read-write).
    pub fn scope(self, scope: Scope) -> Mint {
        self.with("scope", json!(scope.name()))
    }

    /// Expires this long after now on the server's clock (whole seconds, at least 1 s).
    pub fn expires_in(self, d: Duration) -> Mint {
        self.with("expires_in", json!(crate::ops::clock::duration_text(d)))
    }

    /// Expires at this time (one past: expired from the start). Not with `expires_in`.
    pub fn expires_at(self, at: impl Into<Time>) -> Mint {
        self.with("expires_at", json!(at.into().as_str()))
    }

    /// This token (16 to 256 token68 characters) instead of a drawn one.
    pub fn token(self, token: impl Into<String>) -> Mint {
        self.with("token", json!(token.into()))
    }
}

impl fmt::Debug for Mint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut shown = self.body.clone();
        if let Some(token) = shown.get_mut("token") {
            *token = json!("<redacted>");
        }
        f.debug_struct("Mint").field("body", &shown).finish()
    }
}

impl From<&str> for Mint {
    /// A read-write token of this principal, without expiry.
    fn from(principal: &str) -> Mint {
        Mint::new(principal)
    }
}

impl From<String> for Mint {
    /// A read-write token of this principal, without expiry.
    fn from(principal: String) -> Mint {
        Mint::new(principal)
    }
}

/// A token minted: the 201 of `POST /_control/tokens`. `Debug` shows no token.
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Minted {
    /// The bearer token.
    pub token: String,
    /// Its public id, as `plant-store token list` shows it.
    pub id: String,
    /// Whose token it is.
    pub principal: String,
    /// What it may do.
    pub scope: Scope,
    /// When it expires (to the second); `None`: never.
    pub expires_at: Option<Time>,
}

impl Minted {
    /// What a journal entry's `token` shows of a request that sent this token.
    pub fn fingerprint(&self) -> String {
        door::fingerprint(&self.token)
    }

    fn from_json(v: &Value) -> Option<Minted> {
        let m = Read(object(v)?);
        Some(Minted {
            token: m.text("token")??,
            id: m.text("id")??,
            principal: m.text("principal")??,
            scope: match m.text("scope")??.as_str() {
                "read" => Scope::Read,
                "read-write" => Scope::ReadWrite,
                _ => return None,
            },
            expires_at: m.text("expires_at")?.map(Time::from),
        })
    }
}

impl fmt::Debug for Minted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Minted")
            .field("token", &"<redacted>")
            .field("id", &self.id)
            .field("principal", &self.principal)
            .field("scope", &self.scope)
            .field("expires_at", &self.expires_at)
            .finish()
    }
}

/// The server's clock: what it reads, and whether it stands still.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Clock {
    /// What it reads now, to the millisecond.
    pub now: Time,
    /// Whether it stands still at `now`.
    pub frozen: bool,
}

impl<'s> Control<'s> {
    /// The test control behind `door`; `ControlError` 404 without it.
    pub(crate) fn of(door: Option<&'s Door>) -> Result<Control<'s>, ControlError> {
        door.map(|door| Control { door })
            .ok_or_else(ControlError::off)
    }

    /// One control request: its answer on success (2xx), else the server's refusal.
    fn call(
        &self,
        method: &str,
        target: &str,
        body: Option<Value>,
    ) -> Result<door::Answer, ControlError> {
        let body = body.map(|b| b.to_string().into_bytes());
        let answer = self.door.call(method, target, body.as_deref());
        if (200..300).contains(&answer.status) {
            return Ok(answer);
        }
        let refusal: Option<Value> = serde_json::from_slice(&answer.body).ok();
        let message = refusal.as_ref().and_then(|r| r["message"].as_str());
        Err(ControlError {
            status: answer.status,
            message: match message {
                Some(m) => m.to_owned(),
                None => String::from_utf8_lossy(&answer.body).into_owned(),
            },
        })
    }

    /// A call whose answer is JSON, read by `read`.
    fn read<T>(
        &self,
        (method, target, body): (&str, &str, Option<Value>),
        what: &str,
        read: impl FnOnce(&Value) -> Option<T>,
    ) -> Result<T, ControlError> {
        let answer = self.call(method, target, body)?;
        match serde_json::from_slice(&answer.body) {
            Ok(json) => read(&json).ok_or_else(|| ControlError::unreadable(what, &answer, None)),
            Err(e) => Err(ControlError::unreadable(what, &answer, Some(e))),
        }
    }

    /// `POST /_control/reset`: the store as it was when the server began listening; the
    /// faults, snapshots, journal, rate-limit budgets and clock cleared.
    pub fn reset(&self) -> Result<(), ControlError> {
        self.call("POST", "/_control/reset", None).map(drop)
    }

    /// `POST /_control/tokens`: a token of a principal (`"p-42"`), or as `Mint` says.
    pub fn mint(&self, mint: impl Into<Mint>) -> Result<Minted, ControlError> {
        let body = Value::Object(mint.into().body);
        let call = ("POST", "/_control/tokens", Some(body));
        self.read(call, "a minted token", Minted::from_json)
    }

    /// `POST /_control/snapshots`: the whole store copied; its id (`snap_…`).
    pub fn snapshot(&self) -> Result<String, ControlError> {
        let call = ("POST", "/_control/snapshots", None);
        self.read(call, "a snapshot", |v| Some(v["id"].as_str()?.to_owned()))
    }

    /// `POST /_control/snapshots/{id}/restore`: the store is that copy again.
    pub fn restore(&self, id: &str) -> Result<(), ControlError> {
        let target = format!(
            "/_control/snapshots/{}/restore",
            journal::percent_encoded(id)
        );
        self.call("POST", &target, None).map(drop)
    }

    /// `DELETE /_control/snapshots/{id}`.
    pub fn delete_snapshot(&self, id: &str) -> Result<(), ControlError> {
        let target = format!("/_control/snapshots/{}", journal::percent_encoded(id));
        self.call("DELETE", &target, None).map(drop)
    }

    /// `POST /_control/faults`: the fault as stored, with its id.
    pub fn fault(&self, fault: Fault) -> Result<StoredFault, ControlError> {
        let call = ("POST", "/_control/faults", Some(fault.to_json()));
        self.read(call, "a fault", |v| StoredFault::from_json(v.clone()))
    }

    /// `GET /_control/faults`: every fault in order, with its hits and what remains.
    pub fn faults(&self) -> Result<Vec<StoredFault>, ControlError> {
        self.read(("GET", "/_control/faults", None), "the faults", |v| {
            let list = v.as_array()?.iter().cloned();
            list.map(StoredFault::from_json).collect()
        })
    }

    /// `DELETE /_control/faults/{id}`.
    pub fn remove_fault(&self, id: &str) -> Result<(), ControlError> {
        let target = format!("/_control/faults/{}", journal::percent_encoded(id));
        self.call("DELETE", &target, None).map(drop)
    }

    /// `DELETE /_control/faults`: all of them.
    pub fn clear_faults(&self) -> Result<(), ControlError> {
        self.call("DELETE", "/_control/faults", None).map(drop)
    }

    /// `GET /_control/requests`: the entries `query` asks for, oldest first; with
    /// `Query::wait`, this thread waits for them.
    pub fn journal(&self, query: Query) -> Result<Vec<Entry>, ControlError> {
        let target = query.target();
        self.read(("GET", &target, None), "the journal", |v| {
            v.as_array()?.iter().map(Entry::from_json).collect()
        })
    }

    /// `DELETE /_control/requests`: the journal emptied, `n` from 1 again.
    pub fn clear_journal(&self) -> Result<(), ControlError> {
        self.call("DELETE", "/_control/requests", None).map(drop)
    }

    /// `GET /_control/clock`.
    pub fn clock(&self) -> Result<Clock, ControlError> {
        self.read(("GET", "/_control/clock", None), "the clock", clock)
    }

    /// `PUT /_control/clock`: from now on the server's clock reads `now` (a `SystemTime`,
    /// or RFC 3339 text), and stays there when `frozen`.
    pub fn set_clock(&self, now: impl Into<Time>, frozen: bool) -> Result<Clock, ControlError> {
        let body = json!({ "now": now.into().as_str(), "frozen": frozen });
        self.read(("PUT", "/_control/clock", Some(body)), "the clock", clock)
    }

    /// `POST /_control/clock/advance`: the clock moved ahead by `by` (whole seconds).
    pub fn advance_clock(&self, by: Duration) -> Result<Clock, ControlError> {
        let body = json!({ "by": crate::ops::clock::duration_text(by) });
        let call = ("POST", "/_control/clock/advance", Some(body));
        self.read(call, "the clock", clock)
    }

    /// `DELETE /_control/clock`: the real clock again.
    pub fn real_clock(&self) -> Result<(), ControlError> {
        self.call("DELETE", "/_control/clock", None).map(drop)
    }
}

fn clock(v: &Value) -> Option<Clock> {
    let c = Read(object(v)?);
    Some(Clock {
        now: Time::from(c.text("now")??),
        frozen: c.flag("frozen")?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chosen_token_is_never_shown() {
        let mint = Mint::new("bob").token("S3CRET-chosen-token-0123456789");
        let shown = format!("{mint:?}");
        assert!(!shown.contains("S3CRET"), "{shown}");
        assert!(
            shown.contains("bob") && shown.contains("<redacted>"),
            "{shown}"
        );
        // Without a chosen token, nothing is redacted.
        let shown = format!("{:?}", Mint::new("bob").scope(Scope::Read));
        assert!(
            !shown.contains("redacted") && shown.contains("read"),
            "{shown}"
        );
    }

    #[test]
    fn an_answer_that_cannot_be_read_is_described_without_its_body() {
        let body = br#"{"token":"S3CRET-minted-token-0123456789","principal":"bob"}"#;
        let answer = door::Answer {
            status: 201,
            body: body.to_vec(),
        };
        let e = ControlError::unreadable("a minted token", &answer, None);
        assert_eq!(e.status(), 500);
        assert_eq!(
            e.message(),
            format!(
                "an answer of test control this library cannot read (a minted token): 201 of {} \
                 bytes, JSON without what was expected",
                body.len()
            )
        );
        let cut = door::Answer {
            status: 201,
            body: body[..30].to_vec(),
        };
        let json = serde_json::from_slice::<Value>(&cut.body).unwrap_err();
        let e = ControlError::unreadable("a minted token", &cut, Some(json));
        assert!(!e.to_string().contains("S3CRET"), "{e}");
        assert!(
            e.message().ends_with(
                "201 of 30 bytes, not JSON (EOF while parsing a string at line 1 column 30)"
            ),
            "{e}"
        );
    }
}
