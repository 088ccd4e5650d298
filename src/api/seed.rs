//! The seed file (`--seed FILE`, also without test control) and the body of test
//! control's `POST /_control/tokens`, each checked member by member; an error names its
//! place (`plants.alice[3].id`) or its member.

use crate::api::auth;
use crate::api::error::ApiError;
use crate::api::json::{self, Keys, Place, Tree};
use crate::api::plant::NewPlant;
use crate::store::Scope;
use crate::store::admin::{NewToken, Seed, SeedPlant};
use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::error::Category;
use serde_json::{Map, Value};
use std::collections::HashMap;
use std::fmt;

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

/// A seed file's text, checked whole: `{"tokens":[…],"plants":{"principal":[…]}}`, read
/// once, strictly (`json::read`): an error names its place and, where the reading knows
/// it, its line and column in the file.
pub fn parse(text: &[u8], now: i64) -> Result<Seed, String> {
    json::read(text, File { now }).map_err(|e| match e.classify() {
        Category::Syntax | Category::Eof | Category::Io => format!("not JSON: {e}"),
        Category::Data => e.to_string(),
    })
}

fn fail<E: de::Error>(message: String) -> E {
    E::custom(message)
}

/// The whole file.
struct File {
    now: i64,
}

impl<'de> DeserializeSeed<'de> for File {
    type Value = Seed;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Seed, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for File {
    type Value = Seed;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("the seed to be a JSON object with `tokens` and `plants`")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Seed, A::Error> {
        let mut seed = Seed::default();
        let mut keys = Keys::new(Place::Root);
        while let Some(key) = keys.next(&mut map)? {
            match key.as_ref() {
                "tokens" => seed.tokens = map.next_value_seed(Tokens { now: self.now })?,
                "plants" => seed.plants = map.next_value_seed(Plants)?,
                other => return Err(fail(unknown(other, &["tokens", "plants"], ""))),
            }
        }
        Ok(seed)
    }
}

/// `tokens`: each one read as a `Value`, then checked.
struct Tokens {
    now: i64,
}

impl<'de> DeserializeSeed<'de> for Tokens {
    type Value = Vec<NewToken>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for Tokens {
    type Value = Vec<NewToken>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("tokens to be an array")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let (root, mut tokens, mut hashes) = (Place::Root, Vec::new(), HashMap::new());
        let at = root.member("tokens");
        while let Some(t) = seq.next_element_seed(Tree(at.item(tokens.len())))? {
            let place = at.item(tokens.len()).to_string();
            let token = seed_token(&t, &place, self.now).map_err(fail)?;
            if let Some(first) = hashes.insert(token.hash, place.clone()) {
                return Err(fail(format!("{place}.token: the same token as {first}")));
            }
            tokens.push(token);
        }
        Ok(tokens)
    }
}

/// `plants`: principals, each with an array of plants.
struct Plants;

impl<'de> DeserializeSeed<'de> for Plants {
    type Value = Vec<SeedPlant>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for Plants {
    type Value = Vec<SeedPlant>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("plants to be an object of principals, each an array of plants")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let (root, mut plants) = (Place::Root, Vec::new());
        let at = root.member("plants");
        let mut keys = Keys::new(at);
        while let Some(principal) = keys.next(&mut map)? {
            let place = at.member(&principal);
            auth::validate_principal(&principal).map_err(|e| fail(format!("{place}: {e}")))?;
            map.next_value_seed(List {
                principal: &principal,
                place,
                plants: &mut plants,
            })?;
        }
        Ok(plants)
    }
}

/// One principal's plants, each read as a creation body is, in place in the file.
struct List<'l, 'p> {
    principal: &'l str,
    place: Place<'p>,
    plants: &'l mut Vec<SeedPlant>,
}

impl<'de> DeserializeSeed<'de> for List<'_, '_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for List<'_, '_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "{} to be an array of plants", self.place)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let (at, principal) = (self.place, self.principal);
        let mut ids = HashMap::new();
        let mut i = 0;
        while let Some(plant) = seq.next_element_seed(NewPlant(at.item(i)))? {
            let place = at.item(i).to_string();
            if let Some(first) = ids.insert(plant.id, i) {
                return Err(fail(format!(
                    "{place}.id: id {} is given twice for {principal} (first at {at}[{first}])",
                    plant.id
                )));
            }
            self.plants.push(SeedPlant {
                principal: principal.to_owned(),
                id: plant.id,
                name: plant.name,
                tag: plant.tag,
                place,
            });
            i += 1;
        }
        Ok(())
    }
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
        Some(v) => Some(auth::parse_expiry(v).map_err(|e| format!("{place}.expires_at: {e}"))?),
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
        Some(k) => Err(unknown(k, known, place)),
    }
}

fn unknown(name: &str, known: &[&str], place: &str) -> String {
    format!(
        "{}: unknown member (known: {})",
        member(place, name),
        known.join(", ")
    )
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
    let value = json::parse(body).map_err(|e| bad(format!("invalid body: {e}")))?;
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
        Some(v) => Some(auth::parse_expiry(v).map_err(|e| bad(format!("expires_at: {e}")))?),
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
        let e = err(r#"{"tokens":[{"token":"abc","principal":"x","scope":"admin"}]}"#);
        assert!(e.starts_with("tokens[0].scope: "), "{e}");
        let e = err(r#"{"tokenz":[]}"#);
        assert!(e.starts_with("tokenz: unknown member"), "{e}");
        assert!(parse(b"{}", 0).unwrap().plants.is_empty());
    }

    #[test]
    fn a_plants_error_names_its_member_and_its_line_and_column_in_the_file() {
        let err = |t: &str| parse(t.as_bytes(), 0).err().unwrap();
        let file =
            "{\"plants\": {\"alice\": [\n  {\"id\": 1, \"name\": \"a\"},\n  {\"id\": 2}\n]}}";
        assert_eq!(
            err(file),
            "member `plants.alice[1].name` is required at line 3 column 11"
        );
        let file = "{\"plants\": {\"alice\": [\n  {\"id\": 1.5, \"name\": \"a\"}]}}";
        assert_eq!(
            err(file),
            "`plants.alice[0].id` must be an integer in the signed 64-bit range, not `1.5` at line 2 column 12"
        );
        let file = "{\"plants\": {\"alice\": [\n  {\"id\": 1, \"name\": 5}]}}";
        assert_eq!(
            err(file),
            "`plants.alice[0].name` must be a string, not a number at line 2 column 22"
        );
    }

    #[test]
    fn a_member_given_twice_is_refused_naming_its_place() {
        let err = |t: &str| parse(t.as_bytes(), 0).err().unwrap();
        // The last list would have won, and alice's plant 1 been lost without a word.
        let twice = "{\"plants\":{\"alice\":[{\"id\":1,\"name\":\"a\"}],\n \"alice\":[{\"id\":2,\"name\":\"b\"}]}}";
        assert_eq!(
            err(twice),
            "member `plants.alice` is given twice at line 2 column 8"
        );
        assert_eq!(
            err(r#"{"tokens":[{"token":"abc","principal":"x","principal":"y"}]}"#),
            "member `tokens[0].principal` is given twice at line 1 column 53"
        );
        assert_eq!(
            err(r#"{"tokens":[],"plants":{},"tokens":[]}"#),
            "member `tokens` is given twice at line 1 column 33"
        );
        assert_eq!(
            err(r#"{"plants":{"alice":[{"id":1,"name":"a","name":"b"}]}}"#),
            "member `plants.alice[0].name` is given twice at line 1 column 45"
        );
    }

    #[test]
    fn a_seeded_id_is_read_exactly_from_its_digits() {
        let seed = parse(
            br#"{"plants":{"alice":[{"id":9007199254740993.0,"name":"a"},{"id":7e0,"name":"b"}]}}"#,
            0,
        )
        .unwrap();
        let ids: Vec<i64> = seed.plants.iter().map(|p| p.id).collect();
        assert_eq!(ids, [9_007_199_254_740_993, 7]);
    }
}
