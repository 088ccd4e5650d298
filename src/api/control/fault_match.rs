//! A fault's `match` (docs/control.md, "Faults"): read from its body, each error naming
//! its member (`match.query.limit`), and tried on a request or a webhook delivery.
//!
//! A request matches when each member given holds: `method` and `principal` exactly,
//! `path` exactly or by its prefix before a final `*`, each `query` parameter present with
//! exactly that value (percent-decoded, `+` a space; any of its occurrences), each header
//! in `headers` present (the first of its fields, names in any case) with that value or,
//! for a value ending in `*`, that prefix, and `body` a JSON object each of whose members
//! the request's JSON body holds with an equal value (`same`). A body is compared as it is
//! read exactly (`Exact`): its numbers are never rounded through a float before they are
//! compared.

use crate::api::json::{self, Keys, Place};
use crate::api::query::decode;
use crate::api::seed::{only, text as string};
use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, Visitor};
use serde_json::value::RawValue;
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::fmt;

/// The paths a request fault can take, as the router names them: any other (`/metrics`,
/// `/_control/…`, a path no route has) is never faulted.
pub const FAULTED_PATHS: &str = "/plants, /plants/{id}, /events, /healthz, /openapi.json";

/// What a fault's `match` asks for.
pub struct Matching {
    pub method: Option<String>,
    pub path: Option<String>,
    pub principal: Option<String>,
    /// Parameters, each present with exactly this value.
    pub query: Vec<(String, String)>,
    /// Headers (names in lower case), each present with this value, or this prefix
    /// (`true`) when it ended in `*`.
    pub headers: Vec<(String, String, bool)>,
    /// Members the request's JSON body holds with equal values (`match.body`, exactly).
    pub body: Option<BTreeMap<String, Exact>>,
    pub webhook: Option<String>,
    /// It matches webhook deliveries (`webhook`, or `"target":"webhook"`), not requests.
    pub deliveries: bool,
}

/// A request as a fault's `match` sees it.
pub struct Request<'t> {
    pub method: &'t str,
    /// The path, without the query.
    pub path: &'t str,
    /// The query as sent (without `?`).
    pub query: &'t str,
    /// The first field of a header, by its name in any case.
    pub header: &'t dyn Fn(&str) -> Option<&'t str>,
    /// The body as received.
    pub body: &'t [u8],
    pub principal: Option<&'t str>,
}

impl Matching {
    /// Whether `r` is a request this matches; `sent` is its body read exactly, once for
    /// every fault (`None`: no JSON object).
    pub fn request(&self, r: &Request, sent: Option<&BTreeMap<String, Exact>>) -> bool {
        !self.deliveries
            && self.method.as_deref().is_none_or(|x| x == r.method)
            && self
                .path
                .as_deref()
                .is_none_or(|p| match p.strip_suffix('*') {
                    Some(prefix) => r.path.starts_with(prefix),
                    None => r.path == p,
                })
            && self
                .principal
                .as_deref()
                .is_none_or(|p| r.principal == Some(p))
            && self
                .query
                .iter()
                .all(|(name, value)| has_parameter(r.query, name, value))
            && self.headers.iter().all(|(name, value, prefix)| {
                (r.header)(name).is_some_and(|v| match prefix {
                    true => v.starts_with(value.as_str()),
                    false => v == value,
                })
            })
            && self
                .body
                .as_ref()
                .is_none_or(|wanted| sent.is_some_and(|sent| holds(sent, wanted)))
    }

    /// Whether a webhook delivery to `webhook` for `principal` is one this matches.
    pub fn delivery(&self, webhook: &str, principal: &str) -> bool {
        self.deliveries
            && self.webhook.as_deref().is_none_or(|w| w == webhook)
            && self.principal.as_deref().is_none_or(|p| p == principal)
    }
}

/// Whether the query has the parameter `name` with exactly `value` (either side
/// percent-decoded; a parameter without `=` has the empty value).
fn has_parameter(query: &str, name: &str, value: &str) -> bool {
    let decoded = |s: &str| decode(s).unwrap_or_else(|| s.to_owned());
    query.split('&').any(|pair| {
        let (n, v) = pair.split_once('=').unwrap_or((pair, ""));
        decoded(n) == name && decoded(v) == value
    })
}

/// Whether `sent` holds each member of `wanted` with an equal value (`same`).
fn holds(sent: &BTreeMap<String, Exact>, wanted: &BTreeMap<String, Exact>) -> bool {
    wanted
        .iter()
        .all(|(k, w)| sent.get(k).is_some_and(|s| same(s, w)))
}

/// Equal as the fault's `match.body` means it: objects as `holds` (the sent one may have
/// more members), arrays element by element, numbers by their exact value (`Number`),
/// the rest exactly.
fn same(sent: &Exact, wanted: &Exact) -> bool {
    match (sent, wanted) {
        (Exact::Object(s), Exact::Object(w)) => holds(s, w),
        (Exact::Array(s), Exact::Array(w)) => {
            s.len() == w.len() && s.iter().zip(w).all(|(s, w)| same(s, w))
        }
        _ => sent == wanted,
    }
}

/// The deepest nesting a body is read to (serde_json's own limit).
const MAX_DEPTH: usize = 128;

/// A JSON value as `match.body` compares it: its numbers read exactly.
#[derive(Debug, Clone, PartialEq)]
pub enum Exact {
    Number(Number),
    Object(BTreeMap<String, Exact>),
    Array(Vec<Exact>),
    /// A string, `true`, `false` or `null`.
    Other(Value),
}

/// A JSON number's value: an integer of the signed 64-bit range exactly, as a creation
/// body's `id` is read (`plant::json_integer`: `7.0` is 7, `9007199254740993.0` is
/// 2^53 + 1), never equal to any other number; any other number as its nearest double.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Number {
    Integer(i64),
    Other(f64),
}

impl Exact {
    /// A JSON text read exactly (strictly: an object gives each member once, as
    /// `json::read` reads it).
    pub fn read(text: &[u8]) -> Result<Exact, serde_json::Error> {
        let raw: &RawValue = json::read(text, std::marker::PhantomData)?;
        Exact::of(raw, Place::Root, 0)
    }

    /// The value `raw` at `place`: each object and array read again for its members, a
    /// number from its text.
    fn of(raw: &RawValue, place: Place, depth: usize) -> Result<Exact, serde_json::Error> {
        let text = raw.get();
        if depth > MAX_DEPTH {
            return Err(de::Error::custom("nested too deeply"));
        }
        Ok(match text.as_bytes().first() {
            Some(b'{') => {
                let members = json::read(text.as_bytes(), Members(place))?;
                let mut object = BTreeMap::new();
                for (name, value) in members {
                    let value = Exact::of(value, place.member(&name), depth + 1)?;
                    object.insert(name, value);
                }
                Exact::Object(object)
            }
            Some(b'[') => {
                let items: Vec<&RawValue> = serde_json::from_str(text)?;
                let items = items.into_iter().enumerate();
                let read = items.map(|(i, v)| Exact::of(v, place.item(i), depth + 1));
                Exact::Array(read.collect::<Result<_, _>>()?)
            }
            Some(b'-' | b'0'..=b'9') => {
                Exact::Number(match crate::api::plant::json_integer(text) {
                    Some(n) => Number::Integer(n),
                    None => Number::Other(text.parse().map_err(de::Error::custom)?),
                })
            }
            _ => Exact::Other(serde_json::from_str(text)?),
        })
    }

    /// Its members, when it is an object.
    pub fn members(self) -> Option<BTreeMap<String, Exact>> {
        match self {
            Exact::Object(members) => Some(members),
            _ => None,
        }
    }
}

/// An object's members at a place, each as its text, read through `Keys` (no member
/// twice).
struct Members<'p>(Place<'p>);

impl<'de> DeserializeSeed<'de> for Members<'_> {
    type Value = Vec<(String, &'de RawValue)>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for Members<'_> {
    type Value = Vec<(String, &'de RawValue)>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let (mut keys, mut members) = (Keys::new(self.0), Vec::new());
        while let Some(key) = keys.next(&mut map)? {
            members.push((key.into_owned(), map.next_value()?));
        }
        Ok(members)
    }
}

/// Reads a fault's `match`; `exact` is its `body` read exactly, when it has one.
pub fn parse(m: &Map<String, Value>, exact: Option<Exact>) -> Result<Matching, String> {
    only(
        m,
        &[
            "method",
            "path",
            "principal",
            "query",
            "headers",
            "body",
            "webhook",
            "target",
        ],
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
    let query = query(m)?;
    let headers = headers(m)?;
    let body = match (m.get("body"), exact.and_then(Exact::members)) {
        (None | Some(Value::Null), _) => None,
        (Some(Value::Object(_)), Some(members)) => Some(members),
        _ => return Err("match.body: must be a JSON object (members the body holds)".into()),
    };
    let webhook = string(m, "webhook", "match")?;
    if webhook.is_some_and(|w| !w.starts_with("wh_") || w.len() > 64) {
        return Err("match.webhook: must be a webhook id (`wh_…`)".into());
    }
    let deliveries = match string(m, "target", "match")? {
        None => webhook.is_some(),
        Some("webhook") => true,
        Some(_) => return Err("match.target: the one target is \"webhook\"".into()),
    };
    if deliveries {
        let request_only = [
            ("method", method.is_some()),
            ("path", path.is_some()),
            ("query", !query.is_empty()),
            ("headers", !headers.is_empty()),
            ("body", body.is_some()),
        ];
        if let Some((member, _)) = request_only.iter().find(|(_, given)| *given) {
            return Err(format!("match.{member}: a webhook delivery has none"));
        }
    } else if let Some(path) = path
        && !faulted(path)
    {
        return Err(format!(
            "match.path: `{}` is never faulted (faults take {FAULTED_PATHS})",
            crate::api::error::printable(path, 64)
        ));
    }
    Ok(Matching {
        method: method.map(str::to_owned),
        path: path.map(str::to_owned),
        principal: principal.map(str::to_owned),
        query,
        headers,
        body,
        webhook: webhook.map(str::to_owned),
        deliveries,
    })
}

/// Whether `match.path` can match a path that is faulted (`FAULTED_PATHS`): exactly one
/// of them, or a prefix of one; `/plants/{id}` is `/plants/` and an id without `/`.
fn faulted(path: &str) -> bool {
    let plant = |p: &str| {
        p.strip_prefix("/plants/")
            .is_some_and(|id| !id.contains('/'))
    };
    match path.strip_suffix('*') {
        None => {
            ["/plants", "/events", "/healthz", "/openapi.json"].contains(&path) || {
                plant(path) && path.len() > "/plants/".len()
            }
        }
        Some(prefix) => {
            ["/plants/", "/events", "/healthz", "/openapi.json"]
                .iter()
                .any(|p| p.starts_with(prefix))
                || plant(prefix)
        }
    }
}

fn query(m: &Map<String, Value>) -> Result<Vec<(String, String)>, String> {
    let Some(given) = object(m, "query", "an object of parameters and their values")? else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    for (name, value) in given {
        let at = || format!("match.query.{}", crate::api::error::printable(name, 64));
        if name.is_empty() {
            return Err("match.query: a parameter has a name".into());
        }
        let value = value
            .as_str()
            .ok_or_else(|| format!("{}: must be a string (the value as decoded)", at()))?;
        out.push((name.clone(), value.to_owned()));
    }
    Ok(out)
}

/// The header `match.headers` may not name: a fault must not store a token.
const CREDENTIALS: &str = "authorization";

fn headers(m: &Map<String, Value>) -> Result<Vec<(String, String, bool)>, String> {
    let Some(given) = object(m, "headers", "an object of header names and their values")? else {
        return Ok(Vec::new());
    };
    let mut out: Vec<(String, String, bool)> = Vec::new();
    for (name, value) in given {
        let at = format!("match.headers.{}", crate::api::error::printable(name, 64));
        let token = !name.is_empty()
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b));
        if !token {
            return Err(format!("{at}: must be a header name"));
        }
        let lower = name.to_ascii_lowercase();
        if lower == CREDENTIALS {
            return Err(format!(
                "{at}: a fault never matches credentials (it would keep a token); match the \
                 principal instead"
            ));
        }
        if out.iter().any(|(n, ..)| *n == lower) {
            return Err(format!("{at}: the same header is given twice"));
        }
        let value = value
            .as_str()
            .filter(|v| v.bytes().all(|b| b == b'\t' || (b' '..=b'~').contains(&b)))
            .ok_or_else(|| {
                format!("{at}: must be a string of visible ASCII, exact or ending in `*`")
            })?;
        let (value, prefix) = match value.strip_suffix('*') {
            Some(v) => (v, true),
            None => (value, false),
        };
        out.push((lower, value.to_owned(), prefix));
    }
    Ok(out)
}

/// An object member, absent or `null` as `None`.
fn object<'v>(
    m: &'v Map<String, Value>,
    name: &str,
    what: &str,
) -> Result<Option<&'v Map<String, Value>>, String> {
    match m.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Object(o)) => Ok(Some(o)),
        Some(_) => Err(format!("match.{name}: must be {what}")),
    }
}

#[cfg(test)]
mod tests;
