//! The body of `POST /_control/faults`, checked member by member: each error names the
//! member that is wrong (`match.path`, `action.status`, `times`). Its `match` is read in
//! `fault_match.rs`.

use crate::api::control::fault_match::{self, Exact, Matching};
use crate::api::seed::only;
use crate::api::seed::text as string;
use serde_json::{Map, Value, json};

/// The longest `delay` a fault may ask for, in milliseconds (also each end of a range).
pub const MAX_FAULT_DELAY_MS: u64 = 60_000;
/// The most `times` a fault may ask for.
pub const MAX_FAULT_TIMES: u64 = 1_000_000;
/// The largest `seed`: 2^53 (every seed is exact in a JSON number).
pub const MAX_FAULT_SEED: u64 = 1 << 53;
/// A seed the server picks is kept under 2^53.
pub const MAX_SEED_MASK: u64 = (1 << 53) - 1;
/// The longest `message` of a status fault, in characters.
pub const MAX_FAULT_MESSAGE: usize = 1024;
/// The largest `retry_after` of a status fault, in seconds (one day).
pub const MAX_FAULT_RETRY_AFTER: u64 = 86_400;
/// The most events `cut_stream` may wait for.
pub const MAX_FAULT_EVENTS: u64 = 1_000_000;
/// The lowest status a status fault answers (a request's or a delivery's).
pub const MIN_FAULT_STATUS: u64 = 200;
/// The longest `content_type` of a status fault, in characters.
pub const MAX_FAULT_CONTENT_TYPE: usize = 256;
/// The most `bytes` a `truncate` may send (16 MiB); an answer shorter is sent whole.
pub const MAX_TRUNCATE_BYTES: u64 = 16 * 1024 * 1024;
/// The largest piece of a `trickle`, in bytes.
pub const MAX_TRICKLE_BYTES: u64 = 65_536;
/// The longest wait between two pieces of a `trickle`, in milliseconds.
pub const MAX_TRICKLE_EVERY_MS: u64 = 10_000;

/// When a fault acts on a request: before it is carried out, or on its answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum When {
    Before,
    After,
}

/// What a fault does.
#[derive(Clone, Debug, PartialEq)]
pub enum Action {
    /// This status, with the contract's error body, or `body` as given (with
    /// `content_type`, by default JSON); `Retry-After` when given.
    Status {
        status: u16,
        retry_after: Option<u64>,
        message: Option<String>,
        body: Option<String>,
        content_type: Option<String>,
    },
    /// Waits this long (holding no worker).
    Delay { ms: u64 },
    /// Waits a time drawn uniformly from `min..=max` by the fault's seeded generator: the
    /// fault that takes a request gives it as a `Delay` (`Faults::take`).
    DelayRange { min: u64, max: u64 },
    /// A TCP reset, no answer.
    Reset,
    /// The connection closed, no answer.
    Close,
    /// The answer's first `bytes` (its head included), then closed; without `bytes`, the
    /// head and less than the whole body.
    Truncate { bytes: Option<u64> },
    /// The answer sent `bytes` at a time, one piece every `every_ms`, whole in the end.
    Trickle { bytes: u64, every_ms: u64 },
    /// An event stream ends after this many events.
    CutStream { after_events: u64 },
    /// A webhook delivery sent twice.
    Duplicate,
    /// A webhook delivery signed with another key.
    BadSignature,
}

/// A fault as asked for, checked.
pub struct Asked {
    pub matching: Matching,
    /// `match` as given (shown in the listing).
    pub shown_match: Value,
    /// `None` for webhook deliveries (`when` does not apply).
    pub when: Option<When>,
    pub action: Action,
    pub times: Option<u64>,
    pub probability: Option<f64>,
    pub seed: Option<u64>,
}

fn integer(
    object: &Map<String, Value>,
    name: &str,
    place: &str,
    range: (u64, u64),
) -> Result<Option<u64>, String> {
    let bad = || {
        format!(
            "{}{name}: must be an integer from {} to {}",
            if place.is_empty() {
                String::new()
            } else {
                format!("{place}.")
            },
            range.0,
            range.1
        )
    };
    match object.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => {
            let v = n.as_u64().ok_or_else(bad)?;
            if v < range.0 || v > range.1 {
                return Err(bad());
            }
            Ok(Some(v))
        }
        Some(_) => Err(bad()),
    }
}

/// Reads a fault's body.
pub fn parse(body: &[u8]) -> Result<Asked, String> {
    let value = crate::api::json::parse(body).map_err(|e| format!("invalid body: {e}"))?;
    let top = value
        .as_object()
        .ok_or("the body must be a JSON object with `action`")?;
    only(
        top,
        &["match", "when", "action", "times", "probability", "seed"],
        "",
    )?;
    let empty = Map::new();
    let m = match top.get("match") {
        None | Some(Value::Null) => &empty,
        Some(Value::Object(m)) => m,
        Some(_) => return Err("match: must be an object".into()),
    };
    // `match.body` read again exactly: its numbers as written, never rounded.
    let exact = m.contains_key("body").then(|| {
        let top = Exact::read(body).ok().and_then(Exact::members);
        let m = top.and_then(|mut top| top.remove("match")?.members());
        m.and_then(|mut m| m.remove("body"))
    });
    let matching = fault_match::parse(m, exact.flatten())?;
    let action = match top.get("action") {
        Some(Value::Object(a)) => action(a, matching.deliveries)?,
        None | Some(Value::Null) => return Err("action: is required".into()),
        Some(_) => return Err("action: must be an object with `kind`".into()),
    };
    let when = match string(top, "when", "")? {
        None => None,
        Some("before") => Some(When::Before),
        Some("after") => Some(When::After),
        Some(_) => return Err("when: must be \"before\" or \"after\"".into()),
    };
    let acts_on_answer = matches!(
        action,
        Action::Truncate { .. } | Action::Trickle { .. } | Action::CutStream { .. }
    );
    if acts_on_answer && when == Some(When::Before) {
        return Err(format!(
            "when: `{}` acts on an answer, so it is always \"after\"",
            kind(&action)
        ));
    }
    let when = match () {
        _ if matching.deliveries => None,
        _ if acts_on_answer => Some(When::After),
        _ => Some(when.unwrap_or(When::Before)),
    };
    let times = integer(top, "times", "", (1, MAX_FAULT_TIMES))?;
    let probability = match top.get("probability") {
        None | Some(Value::Null) => None,
        Some(Value::Number(n)) => match n.as_f64() {
            Some(p) if p > 0.0 && p <= 1.0 => Some(p),
            _ => return Err("probability: must be a number over 0 and at most 1".into()),
        },
        Some(_) => return Err("probability: must be a number over 0 and at most 1".into()),
    };
    let seed = integer(top, "seed", "", (0, MAX_FAULT_SEED))?;
    if seed.is_some() && probability.is_none() && !draws_delays(&action) {
        return Err("seed: only with `probability` or a delay range (`ms` as {min, max})".into());
    }
    Ok(Asked {
        shown_match: Value::Object(m.clone()),
        matching,
        when,
        action,
        times,
        probability,
        seed,
    })
}

const REQUEST_KINDS: &str = "status, delay, reset, close, truncate, trickle, cut_stream";
const DELIVERY_KINDS: &str = "duplicate, bad_signature, status, delay";

fn action(a: &Map<String, Value>, deliveries: bool) -> Result<Action, String> {
    let known = if deliveries {
        DELIVERY_KINDS
    } else {
        REQUEST_KINDS
    };
    let kind =
        string(a, "kind", "action")?.ok_or(format!("action.kind: is required (one of {known})"))?;
    let members: &[&str] = match kind {
        "status" if deliveries => &["kind", "status", "retry_after", "message"],
        "status" => &[
            "kind",
            "status",
            "retry_after",
            "message",
            "body",
            "content_type",
        ],
        "delay" => &["kind", "ms"],
        "truncate" => &["kind", "bytes"],
        "trickle" => &["kind", "bytes", "every_ms"],
        "cut_stream" => &["kind", "after_events"],
        _ => &["kind"],
    };
    let required = |name: &str, range: (u64, u64)| {
        integer(a, name, "action", range)?.ok_or(format!(
            "action.{name}: is required (from {} to {})",
            range.0, range.1
        ))
    };
    let action = match kind {
        "status" => status(a)?,
        "delay" => delay(a)?,
        "reset" if !deliveries => Action::Reset,
        "close" if !deliveries => Action::Close,
        "truncate" if !deliveries => Action::Truncate {
            bytes: integer(a, "bytes", "action", (0, MAX_TRUNCATE_BYTES))?,
        },
        "trickle" if !deliveries => Action::Trickle {
            bytes: required("bytes", (1, MAX_TRICKLE_BYTES))?,
            every_ms: required("every_ms", (1, MAX_TRICKLE_EVERY_MS))?,
        },
        "cut_stream" if !deliveries => Action::CutStream {
            after_events: integer(a, "after_events", "action", (0, MAX_FAULT_EVENTS))?
                .ok_or("action.after_events: is required")?,
        },
        "duplicate" if deliveries => Action::Duplicate,
        "bad_signature" if deliveries => Action::BadSignature,
        other => {
            let what = if deliveries {
                "a webhook delivery"
            } else {
                "a request"
            };
            return Err(format!(
                "action.kind: `{}` is no fault of {what} (known: {known})",
                crate::api::error::printable(other, 32)
            ));
        }
    };
    only(a, members, "action")?;
    Ok(action)
}

/// A status fault: its status, `Retry-After`, and the contract's error body (its
/// `message`) or a `body` of its own with its `content_type`.
fn status(a: &Map<String, Value>) -> Result<Action, String> {
    let range = (MIN_FAULT_STATUS, 599);
    let status = integer(a, "status", "action", range)?.ok_or(format!(
        "action.status: is required (from {MIN_FAULT_STATUS} to 599)"
    ))?;
    let message = string(a, "message", "action")?;
    if message.is_some_and(|m| m.chars().count() > MAX_FAULT_MESSAGE) {
        return Err(format!(
            "action.message: at most {MAX_FAULT_MESSAGE} characters"
        ));
    }
    let body = string(a, "body", "action")?;
    let content_type = string(a, "content_type", "action")?;
    let bodiless = crate::api::error::no_content(status as u16);
    if let Some(member) = [
        ("body", body.is_some()),
        ("content_type", content_type.is_some()),
    ]
    .iter()
    .find(|(_, given)| *given && bodiless)
    {
        return Err(format!(
            "action.{}: a {status} answer has no body",
            member.0
        ));
    }
    if body.is_some() && message.is_some() {
        return Err("action.message: not with `body` (the body is sent as it is)".into());
    }
    if let Some(t) = content_type
        && (t.is_empty()
            || t.len() > MAX_FAULT_CONTENT_TYPE
            || t.starts_with(' ')
            || t.ends_with(' ')
            || !t.bytes().all(|b| (b' '..=b'~').contains(&b)))
    {
        return Err(format!(
            "action.content_type: must be a media type of 1 to {MAX_FAULT_CONTENT_TYPE} \
             visible ASCII characters, such as \"text/html; charset=utf-8\""
        ));
    }
    Ok(Action::Status {
        status: status as u16,
        retry_after: integer(a, "retry_after", "action", (0, MAX_FAULT_RETRY_AFTER))?,
        message: message.map(str::to_owned),
        body: body.map(str::to_owned),
        content_type: content_type.map(str::to_owned),
    })
}

/// A delay: `"ms": N`, or `"ms": {"min": A, "max": B}`.
fn delay(a: &Map<String, Value>) -> Result<Action, String> {
    let range = (0, MAX_FAULT_DELAY_MS);
    let Some(Value::Object(ms)) = a.get("ms") else {
        return Ok(Action::Delay {
            ms: integer(a, "ms", "action", range)
                .map_err(|_| {
                    format!(
                        "action.ms: must be an integer from 0 to {MAX_FAULT_DELAY_MS}, or \
                         {{\"min\": A, \"max\": B}}"
                    )
                })?
                .ok_or(format!(
                    "action.ms: is required (at most {MAX_FAULT_DELAY_MS})"
                ))?,
        });
    };
    only(ms, &["min", "max"], "action.ms")?;
    let end = |name: &str| {
        integer(ms, name, "action.ms", range)?.ok_or(format!(
            "action.ms.{name}: is required (from 0 to {MAX_FAULT_DELAY_MS})"
        ))
    };
    let (min, max) = (end("min")?, end("max")?);
    if max < min {
        return Err(format!("action.ms.max: must be at least `min` ({min})"));
    }
    Ok(Action::DelayRange { min, max })
}

/// Whether the fault's seeded generator draws its delays (a delay range).
fn draws_delays(action: &Action) -> bool {
    matches!(action, Action::DelayRange { .. })
}

/// Whether a fault asked so draws from a seed: by chance, or for its delays.
pub fn draws(asked: &Asked) -> bool {
    asked.probability.is_some() || draws_delays(&asked.action)
}

fn kind(action: &Action) -> &'static str {
    match action {
        Action::Status { .. } => "status",
        Action::Delay { .. } | Action::DelayRange { .. } => "delay",
        Action::Reset => "reset",
        Action::Close => "close",
        Action::Truncate { .. } => "truncate",
        Action::Trickle { .. } => "trickle",
        Action::CutStream { .. } => "cut_stream",
        Action::Duplicate => "duplicate",
        Action::BadSignature => "bad_signature",
    }
}

/// An action as the listing shows it: as it was given.
pub fn action_json(action: &Action) -> Value {
    let mut out = json!({ "kind": kind(action) });
    match action {
        Action::Status {
            status,
            retry_after,
            message,
            body,
            content_type,
        } => {
            out["status"] = json!(status);
            for (name, given) in [
                ("retry_after", retry_after.map(|r| json!(r))),
                ("message", message.as_ref().map(|m| json!(m))),
                ("body", body.as_ref().map(|b| json!(b))),
                ("content_type", content_type.as_ref().map(|t| json!(t))),
            ] {
                if let Some(v) = given {
                    out[name] = v;
                }
            }
        }
        Action::Delay { ms } => out["ms"] = json!(ms),
        Action::DelayRange { min, max } => out["ms"] = json!({ "min": min, "max": max }),
        Action::Truncate { bytes: Some(n) } => out["bytes"] = json!(n),
        Action::Trickle { bytes, every_ms } => {
            out["bytes"] = json!(bytes);
            out["every_ms"] = json!(every_ms);
        }
        Action::CutStream { after_events } => out["after_events"] = json!(after_events),
        _ => {}
    }
    out
}

#[cfg(test)]
mod tests;
