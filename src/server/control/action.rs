//! What a fault does (`Action`), and the status answer one gives (`Status`): the
//! `action` of a fault's JSON.

use crate::server::control::json::{Read, object};
use serde_json::{Value, json};

/// A status answer in a fault's place: `Status::new(503).retry_after(2)`. Its body is
/// the error body with `message` (a default when none), or `body` as it is, with
/// `content_type` (JSON when none).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Status {
    /// 200 to 599.
    pub status: u16,
    /// `Retry-After`, in seconds.
    pub retry_after: Option<u64>,
    /// The error body's message.
    pub message: Option<String>,
    /// A body of its own, sent as it is.
    pub body: Option<String>,
    /// The media type of `body`.
    pub content_type: Option<String>,
}

impl Status {
    /// This status (200 to 599), with the contract's error body.
    pub fn new(status: u16) -> Status {
        Status {
            status,
            retry_after: None,
            message: None,
            body: None,
            content_type: None,
        }
    }

    /// With `Retry-After: seconds`.
    pub fn retry_after(mut self, seconds: u64) -> Status {
        self.retry_after = Some(seconds);
        self
    }

    /// The error body's message.
    pub fn message(mut self, message: impl Into<String>) -> Status {
        self.message = Some(message.into());
        self
    }

    /// This text as the body, sent as it is (a malformed JSON, a proxy's page).
    pub fn body(mut self, body: impl Into<String>) -> Status {
        self.body = Some(body.into());
        self
    }

    /// The body's media type (default `application/json`).
    pub fn content_type(mut self, content_type: impl Into<String>) -> Status {
        self.content_type = Some(content_type.into());
        self
    }
}

/// What a fault does. The delivery faults (`Duplicate`, `BadSignature`, and `Status`
/// and the delays) go with a `Match::webhook` or `Match::webhooks_of`.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Action {
    /// This status instead of the answer (a delivery: the attempt is not sent and counts
    /// as answered so).
    Status(Status),
    /// Waits this many milliseconds, holding no worker.
    Delay {
        /// 0 to 60,000.
        ms: u64,
    },
    /// Waits a time drawn uniformly from `min..=max` ms by the fault's seeded generator.
    DelayRange {
        /// The shortest wait, in ms.
        min: u64,
        /// The longest wait, in ms.
        max: u64,
    },
    /// A TCP reset, no answer.
    Reset,
    /// The connection closed, no answer.
    Close,
    /// The answer's first `bytes` (its head included), then closed; without `bytes`, the
    /// head and half the body.
    Truncate {
        /// The bytes sent, the head included.
        bytes: Option<u64>,
    },
    /// The answer sent `bytes` at a time, one piece every `every_ms`, whole in the end.
    Trickle {
        /// A piece's bytes.
        bytes: u64,
        /// The wait between two pieces, in ms.
        every_ms: u64,
    },
    /// An event stream ends after this many events.
    CutStream {
        /// The events sent before the end.
        after_events: u64,
    },
    /// A webhook delivery sent twice.
    Duplicate,
    /// A webhook delivery signed with another key.
    BadSignature,
}

impl From<Status> for Action {
    fn from(status: Status) -> Action {
        Action::Status(status)
    }
}

impl Action {
    /// The JSON of `action`.
    pub fn to_json(&self) -> Value {
        let (kind, mut members) = match self {
            Action::Status(s) => {
                let mut m = json!({ "status": s.status });
                let texts = [
                    ("message", &s.message),
                    ("body", &s.body),
                    ("content_type", &s.content_type),
                ];
                for (name, value) in texts {
                    if let Some(v) = value {
                        m[name] = json!(v);
                    }
                }
                if let Some(r) = s.retry_after {
                    m["retry_after"] = json!(r);
                }
                ("status", m)
            }
            Action::Delay { ms } => ("delay", json!({ "ms": ms })),
            Action::DelayRange { min, max } => {
                ("delay", json!({ "ms": { "min": min, "max": max } }))
            }
            Action::Reset => ("reset", json!({})),
            Action::Close => ("close", json!({})),
            Action::Truncate { bytes: None } => ("truncate", json!({})),
            Action::Truncate { bytes: Some(n) } => ("truncate", json!({ "bytes": n })),
            Action::Trickle { bytes, every_ms } => {
                ("trickle", json!({ "bytes": bytes, "every_ms": every_ms }))
            }
            Action::CutStream { after_events } => {
                ("cut_stream", json!({ "after_events": after_events }))
            }
            Action::Duplicate => ("duplicate", json!({})),
            Action::BadSignature => ("bad_signature", json!({})),
        };
        members["kind"] = json!(kind);
        members
    }

    pub(super) fn from_json(v: &Value) -> Option<Action> {
        let a = Read(object(v)?);
        let number = |name: &str| a.number(name)?;
        Some(match a.text("kind")??.as_str() {
            "status" => Action::Status(Status {
                status: u16::try_from(number("status")?).ok()?,
                retry_after: a.number("retry_after")?,
                message: a.text("message")?,
                body: a.text("body")?,
                content_type: a.text("content_type")?,
            }),
            "delay" => match a.0.get("ms")? {
                Value::Object(_) => {
                    let range = Read(object(&a.0["ms"])?);
                    Action::DelayRange {
                        min: range.number("min")??,
                        max: range.number("max")??,
                    }
                }
                _ => Action::Delay { ms: number("ms")? },
            },
            "reset" => Action::Reset,
            "close" => Action::Close,
            "truncate" => Action::Truncate {
                bytes: a.number("bytes")?,
            },
            "trickle" => Action::Trickle {
                bytes: number("bytes")?,
                every_ms: number("every_ms")?,
            },
            "cut_stream" => Action::CutStream {
                after_events: number("after_events")?,
            },
            "duplicate" => Action::Duplicate,
            "bad_signature" => Action::BadSignature,
            _ => return None,
        })
    }
}
