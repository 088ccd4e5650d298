//! What test control reads: the seed file (`--seed FILE`) and the body of
//! `POST /_control/tokens`, each checked member by member; an error names its place
//! (`plants.alice[3].id`) or its member.

use crate::api::auth;
use crate::api::error::ApiError;
use crate::store::Scope;
use crate::store::admin::{NewToken, Seed, SeedPlant};
use serde_json::{Map, Value};
use std::collections::HashMap;

/// The longest `expires_in` of a token made at run time: 10 years, in seconds.
pub const MAX_EXPIRES_IN_SECS: i64 = 10 * 365 * 86_400;
/// The largest seed file read, in bytes.
pub const MAX_SEED_BYTES: u64 = 256 * 1024 * 1024;

/// Reads and checks a seed file (its tokens made at `now`, seconds since the epoch); the
/// error names the file and the place.
pub fn read(path: &std::path::Path, now: i64) -> Result<Seed, String> {
    use std::io::Read;
    let shown = path.display();
    let mut text = Vec::new();
    std::fs::File::open(path)
        .and_then(|f| f.take(MAX_SEED_BYTES + 1).read_to_end(&mut text))
        .map_err(|e| format!("cannot read the seed file {shown}: {e}"))?;
    if text.len() as u64 > MAX_SEED_BYTES {
        return Err(format!(
            "the seed file {shown} is over {MAX_SEED_BYTES} bytes"
        ));
    }
    parse(&text, now).map_err(|e| format!("seed file {shown}: {e}"))
}

/// A seed file's text, checked whole: `{"tokens":[…],"plants":{"principal":[…]}}`.
pub fn parse(text: &[u8], now: i64) -> Result<Seed, String> {
    let value: Value = serde_json::from_slice(text).map_err(|e| format!("not JSON: {e}"))?;
    let top = value
        .as_object()
        .ok_or("the seed must be a JSON object with `tokens` and `plants`")?;
    only(top, &["tokens", "plants"], "")?;
    let mut seed = Seed::default();
    let mut hashes = HashMap::new();
    if let Some(tokens) = top.get("tokens") {
        let tokens = tokens.as_array().ok_or("tokens: must be an array")?;
        for (i, t) in tokens.iter().enumerate() {
            let place = format!("tokens[{i}]");
            let token = seed_token(t, &place, now)?;
            if let Some(first) = hashes.insert(token.hash, place.clone()) {
                return Err(format!("{place}.token: the same token as {first}"));
            }
            seed.tokens.push(token);
        }
    }
    if let Some(plants) = top.get("plants") {
        let plants = plants
            .as_object()
            .ok_or("plants: must be an object of principals, each an array of plants")?;
        for (principal, list) in plants {
            let at = format!("plants.{principal}");
            auth::validate_principal(principal).map_err(|e| format!("{at}: {e}"))?;
            let list = list.as_array().ok_or(format!("{at}: must be an array"))?;
            let mut ids = HashMap::new();
            for (i, plant) in list.iter().enumerate() {
                let place = format!("{at}[{i}]");
                if !plant.is_object() {
                    return Err(format!("{place}: must be an object"));
                }
                let body = serde_json::to_vec(plant).map_err(|e| e.to_string())?;
                let plant = crate::api::plant::parse_new_plant(&body)
                    .map_err(|e| format!("{place}: {e}"))?;
                if let Some(first) = ids.insert(plant.id, i) {
                    return Err(format!(
                        "{place}.id: id {} is given twice for {principal} (first at {at}[{first}])",
                        plant.id
                    ));
                }
                seed.plants.push(SeedPlant {
                    principal: principal.clone(),
                    id: plant.id,
                    name: plant.name,
                    tag: plant.tag,
                    place,
                });
            }
        }
    }
    Ok(seed)
}

fn seed_token(t: &Value, place: &str, now: i64) -> Result<NewToken, String> {
    let t = t.as_object().ok_or(format!("{place}: must be an object"))?;
    only(t, &["token", "principal", "scope", "expires_at"], place)?;
    let token = text(t, "token", place)?.ok_or(format!("{place}.token: is required"))?;
    let header = format!("Bearer {token}");
    if auth::bearer_token(Some(&header)).is_err() {
        return Err(format!(
            "{place}.token: must be a bearer token (letters, digits, -._~+/, then = padding)"
        ));
    }
    let principal =
        text(t, "principal", place)?.ok_or(format!("{place}.principal: is required"))?;
    auth::validate_principal(principal).map_err(|e| format!("{place}.principal: {e}"))?;
    let scope = match text(t, "scope", place)? {
        None => Scope::ReadWrite,
        Some(s) => {
            Scope::parse(s).ok_or(format!("{place}.scope: must be `read` or `read-write`"))?
        }
    };
    let expires_at = match text(t, "expires_at", place)? {
        None => None,
        Some(v) => Some(crate::ops::clock::parse_rfc3339(v).ok_or(format!(
            "{place}.expires_at: must be an RFC 3339 time such as 2027-01-31T12:00:00Z"
        ))?),
    };
    Ok(NewToken {
        public_id: auth::new_public_id(&Default::default())
            .map_err(|e| format!("no randomness: {e}"))?,
        hash: auth::hash_token(token),
        principal: principal.to_owned(),
        scope: scope.as_str(),
        created_at: now,
        expires_at,
        place: place.to_owned(),
    })
}

/// Refuses a member not in `known`.
pub(super) fn only(object: &Map<String, Value>, known: &[&str], place: &str) -> Result<(), String> {
    match object.keys().find(|k| !known.contains(&k.as_str())) {
        None => Ok(()),
        Some(k) => Err(format!(
            "{}: unknown member (known: {})",
            member(place, k),
            known.join(", ")
        )),
    }
}

fn member(place: &str, name: &str) -> String {
    let name = crate::api::error::printable(name, 64);
    if place.is_empty() {
        name
    } else {
        format!("{place}.{name}")
    }
}

/// A string member, absent or `null` as `None`.
pub(super) fn text<'v>(
    object: &'v Map<String, Value>,
    name: &str,
    place: &str,
) -> Result<Option<&'v str>, String> {
    match object.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(format!("{}: must be a string", member(place, name))),
    }
}

/// The shortest token `POST /_control/tokens` takes as chosen, in characters.
pub const MIN_CHOSEN_TOKEN_CHARS: usize = 16;
/// The longest token `POST /_control/tokens` takes as chosen, in characters.
pub const MAX_CHOSEN_TOKEN_CHARS: usize = 256;

/// What `POST /_control/tokens` asks for.
pub struct TokenRequest {
    pub principal: String,
    pub scope: Scope,
    /// Seconds.
    pub expires_in: Option<i64>,
    /// Seconds since the Unix epoch.
    pub expires_at: Option<i64>,
    /// A token of the caller's choosing (else one is drawn).
    pub token: Option<String>,
}

/// The body of `POST /_control/tokens`:
/// `{"principal":"p-42","scope":"read"|"read-write","expires_in":"DURATION"}`, or
/// `"expires_at":"RFC 3339"` instead of `expires_in`, and a chosen `"token"`.
pub fn token_request(body: &[u8]) -> Result<TokenRequest, ApiError> {
    let bad = ApiError::BadRequest;
    let value: Value =
        serde_json::from_slice(body).map_err(|e| bad(format!("invalid body: {e}")))?;
    let object = value
        .as_object()
        .ok_or_else(|| bad("the body must be a JSON object".into()))?;
    only(
        object,
        &["principal", "scope", "expires_in", "expires_at", "token"],
        "",
    )
    .map_err(bad)?;
    let principal = text(object, "principal", "")
        .map_err(bad)?
        .ok_or_else(|| bad("principal: is required".into()))?;
    auth::validate_principal(principal).map_err(|e| bad(format!("principal: {e}")))?;
    let scope = match text(object, "scope", "").map_err(bad)? {
        None => Scope::ReadWrite,
        Some(s) => {
            Scope::parse(s).ok_or_else(|| bad("scope: must be `read` or `read-write`".into()))?
        }
    };
    let expires_in = match object.get("expires_in") {
        None | Some(Value::Null) => None,
        Some(Value::String(v)) => Some(
            crate::ops::clock::parse_duration(v)
                .filter(|&n| (1..=MAX_EXPIRES_IN_SECS).contains(&n))
                .ok_or_else(|| {
                    bad(format!(
                        "expires_in: must be a duration from 1s to 3650d (such as 90, 90s, 15m, 2h, 7d), not `{}`",
                        crate::api::error::printable(v, 32)
                    ))
                })?,
        ),
        Some(_) => return Err(bad("expires_in: must be a string such as \"15m\"".into())),
    };
    let expires_at = match text(object, "expires_at", "").map_err(bad)? {
        None => None,
        Some(v) => Some(crate::ops::clock::parse_rfc3339(v).ok_or_else(|| {
            bad("expires_at: must be an RFC 3339 time such as 2027-01-31T12:00:00Z".into())
        })?),
    };
    if expires_at.is_some() && expires_in.is_some() {
        return Err(bad(
            "expires_at: not with `expires_in`; give one of them".into()
        ));
    }
    let token = text(object, "token", "").map_err(bad)?;
    if let Some(t) = token {
        let header = format!("Bearer {t}");
        let chars = MIN_CHOSEN_TOKEN_CHARS..=MAX_CHOSEN_TOKEN_CHARS;
        if !chars.contains(&t.len()) || auth::bearer_token(Some(&header)).is_err() {
            return Err(bad(format!(
                "token: must be {MIN_CHOSEN_TOKEN_CHARS} to {MAX_CHOSEN_TOKEN_CHARS} token68 \
                 characters (letters, digits, -._~+/, then = padding)"
            )));
        }
    }
    Ok(TokenRequest {
        principal: principal.to_owned(),
        scope,
        expires_in,
        expires_at,
        token: token.map(str::to_owned),
    })
}

#[cfg(test)]
mod tests {
    use super::parse;

    #[test]
    fn seed_errors_name_their_place() {
        let err = |t: &str| parse(t.as_bytes(), 0).err().unwrap();
        let plants = r#"{"plants":{"alice":[{"id":1,"name":"a"},{"id":2,"name":"b"},{"id":3,"name":"c"},{"id":1,"name":"d"}]}}"#;
        assert!(
            err(plants).starts_with("plants.alice[3].id: "),
            "{}",
            err(plants)
        );
        let e = err(r#"{"plants":{"alice":[{"id":1}]}}"#);
        assert!(e.starts_with("plants.alice[0]: "), "{e}");
        let e = err(r#"{"tokens":[{"token":"abc","principal":"x","scope":"admin"}]}"#);
        assert!(e.starts_with("tokens[0].scope: "), "{e}");
        let e = err(r#"{"tokenz":[]}"#);
        assert!(e.starts_with("tokenz: unknown member"), "{e}");
        assert!(parse(b"{}", 0).unwrap().plants.is_empty());
    }
}
