//! The body of `POST /_control/faults`, checked member by member: each error names the
//! member that is wrong (`match.path`, `action.status`, `times`).

use crate::api::control::seed::only;
use crate::api::control::seed::text as string;
use serde_json::{Map, Value, json};

/// The longest `delay` a fault may ask for, in milliseconds.
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

/// When a fault acts on a request: before it is carried out, or on its answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum When {
    Before,
    After,
}

/// What a fault does.
#[derive(Clone, Debug, PartialEq)]
pub enum Action {
    /// The contract's error body with this status (`Retry-After` when given).
    Status {
        status: u16,
        retry_after: Option<u64>,
        message: Option<String>,
    },
    /// Waits this long (holding no worker).
    Delay { ms: u64 },
    /// A TCP reset, no answer.
    Reset,
    /// The connection closed, no answer.
    Close,
    /// The head and less than the whole body, then closed.
    Truncate,
    /// An event stream ends after this many events.
    CutStream { after_events: u64 },
    /// A webhook delivery sent twice.
    Duplicate,
    /// A webhook delivery signed with another key.
    BadSignature,
}

/// What a fault's `match` asks for.
pub struct Matching {
    pub method: Option<String>,
    pub path: Option<String>,
    pub principal: Option<String>,
    pub webhook: Option<String>,
    /// It matches webhook deliveries (`webhook`, or `"target":"webhook"`), not requests.
    pub deliveries: bool,
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
    let matching = matching(m)?;
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
    let acts_on_answer = matches!(action, Action::Truncate | Action::CutStream { .. });
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
    if seed.is_some() && probability.is_none() {
        return Err("seed: only with `probability`".into());
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

fn matching(m: &Map<String, Value>) -> Result<Matching, String> {
    only(
        m,
        &["method", "path", "principal", "webhook", "target"],
        "match",
    )?;
    let method = string(m, "method", "match")?;
    if let Some(method) = method
        && (method.is_empty()
            || method.len() > 16
            || !method.bytes().all(|b| b.is_ascii_uppercase()))
    {
        return Err("match.method: must be a method in capitals, such as \"POST\"".into());
    }
    let path = string(m, "path", "match")?;
    if let Some(path) = path {
        let inner = path.strip_suffix('*').unwrap_or(path);
        if !path.starts_with('/') || inner.contains('*') || inner.contains('?') {
            return Err(
                "match.path: must be a path from `/`, exact or ending in `*` for a prefix".into(),
            );
        }
    }
    let principal = string(m, "principal", "match")?;
    if let Some(p) = principal {
        crate::api::auth::validate_principal(p).map_err(|e| format!("match.principal: {e}"))?;
    }
    let webhook = string(m, "webhook", "match")?;
    if webhook.is_some_and(|w| !w.starts_with("wh_") || w.len() > 64) {
        return Err("match.webhook: must be a webhook id (`wh_…`)".into());
    }
    let deliveries = match string(m, "target", "match")? {
        None => webhook.is_some(),
        Some("webhook") => true,
        Some(_) => return Err("match.target: the one target is \"webhook\"".into()),
    };
    if deliveries && (method.is_some() || path.is_some()) {
        let member = if method.is_some() { "method" } else { "path" };
        return Err(format!("match.{member}: a webhook delivery has none"));
    }
    Ok(Matching {
        method: method.map(str::to_owned),
        path: path.map(str::to_owned),
        principal: principal.map(str::to_owned),
        webhook: webhook.map(str::to_owned),
        deliveries,
    })
}

const REQUEST_KINDS: &str = "status, delay, reset, close, truncate, cut_stream";
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
        "status" => &["kind", "status", "retry_after", "message"],
        "delay" => &["kind", "ms"],
        "cut_stream" => &["kind", "after_events"],
        _ => &["kind"],
    };
    let action = match kind {
        "status" => {
            let low = if deliveries { 200 } else { 400 };
            let status = integer(a, "status", "action", (low, 599))?
                .ok_or(format!("action.status: is required (from {low} to 599)"))?;
            let message = string(a, "message", "action")?;
            if message.is_some_and(|m| m.chars().count() > MAX_FAULT_MESSAGE) {
                return Err(format!(
                    "action.message: at most {MAX_FAULT_MESSAGE} characters"
                ));
            }
            Action::Status {
                status: status as u16,
                retry_after: integer(a, "retry_after", "action", (0, MAX_FAULT_RETRY_AFTER))?,
                message: message.map(str::to_owned),
            }
        }
        "delay" => Action::Delay {
            ms: integer(a, "ms", "action", (0, MAX_FAULT_DELAY_MS))?.ok_or(format!(
                "action.ms: is required (at most {MAX_FAULT_DELAY_MS})"
            ))?,
        },
        "reset" if !deliveries => Action::Reset,
        "close" if !deliveries => Action::Close,
        "truncate" if !deliveries => Action::Truncate,
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

fn kind(action: &Action) -> &'static str {
    match action {
        Action::Status { .. } => "status",
        Action::Delay { .. } => "delay",
        Action::Reset => "reset",
        Action::Close => "close",
        Action::Truncate => "truncate",
        Action::CutStream { .. } => "cut_stream",
        Action::Duplicate => "duplicate",
        Action::BadSignature => "bad_signature",
    }
}

/// An action as the listing shows it.
pub fn action_json(action: &Action) -> Value {
    let mut out = json!({ "kind": kind(action) });
    match action {
        Action::Status {
            status,
            retry_after,
            message,
        } => {
            out["status"] = json!(status);
            if let Some(r) = retry_after {
                out["retry_after"] = json!(r);
            }
            if let Some(m) = message {
                out["message"] = json!(m);
            }
        }
        Action::Delay { ms } => out["ms"] = json!(ms),
        Action::CutStream { after_events } => out["after_events"] = json!(after_events),
        _ => {}
    }
    out
}

#[cfg(test)]
mod tests {
    use super::parse;

    #[test]
    fn each_error_names_its_member() {
        for (body, member) in [
            (
                r#"{"match":{"path":"plants"},"action":{"kind":"close"}}"#,
                "match.path",
            ),
            (
                r#"{"action":{"kind":"status","status":200}}"#,
                "action.status",
            ),
            (r#"{"action":{"kind":"status"}}"#, "action.status"),
            (r#"{"action":{"kind":"close"},"times":0}"#, "times"),
            (
                r#"{"action":{"kind":"close"},"probability":0}"#,
                "probability",
            ),
            (
                r#"{"action":{"kind":"close"},"probability":1.5}"#,
                "probability",
            ),
            (r#"{"action":{"kind":"delay","ms":60001}}"#, "action.ms"),
            (r#"{"action":{"kind":"truncate"},"when":"before"}"#, "when"),
            (r#"{"action":{"kind":"close"},"colour":1}"#, "colour"),
            (r#"{"action":{"kind":"close","ms":1}}"#, "action.ms"),
            (r#"{"action":{"kind":"explode"}}"#, "action.kind"),
            (r#"{"action":{"kind":"duplicate"}}"#, "action.kind"),
            (
                r#"{"match":{"webhook":"wh_1"},"action":{"kind":"reset"}}"#,
                "action.kind",
            ),
            (
                r#"{"match":{"method":"post"},"action":{"kind":"close"}}"#,
                "match.method",
            ),
            (
                r#"{"match":{"who":"x"},"action":{"kind":"close"}}"#,
                "match.who",
            ),
            (r#"{"action":{"kind":"close"},"seed":1}"#, "seed"),
            (
                r#"{"action":{"kind":"close"},"probability":0.5,"seed":9007199254740993}"#,
                "seed",
            ),
            (r#"{}"#, "action"),
        ] {
            let e = parse(body.as_bytes())
                .err()
                .unwrap_or_else(|| panic!("{body} passed"));
            assert!(e.starts_with(&format!("{member}:")), "{body}: {e}");
        }
    }
}
