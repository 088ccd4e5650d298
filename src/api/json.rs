//! The one strict reading of the JSON the server is given: a creation body, every
//! control request's body, the seed file. `read` takes the whole text as one value
//! (nothing but blanks after it), and every object is read through `Keys`, which
//! refuses a member given twice (serde_json keeps the last one silently), naming it by
//! its place: `` member `plants.alice` is given twice at line 3 column 12 ``.

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};
use std::borrow::Cow;
use std::collections::HashSet;
use std::fmt;

/// Where a value is in the document, as messages name it: `plants.alice[3].id`; the
/// document itself is `Root`, shown as nothing.
#[derive(Debug, Clone, Copy)]
pub enum Place<'p> {
    Root,
    Member(&'p Place<'p>, &'p str),
    Item(&'p Place<'p>, usize),
}

impl<'p> Place<'p> {
    pub fn member(&'p self, name: &'p str) -> Place<'p> {
        Place::Member(self, name)
    }

    pub fn item(&'p self, index: usize) -> Place<'p> {
        Place::Item(self, index)
    }

    /// The member `name` of this place as a message names it: `` `name` `` in the
    /// document itself, `` `plants.alice[1].name` `` below it.
    pub fn quoted(&self, name: &str) -> String {
        format!("`{}`", self.member(name))
    }
}

impl fmt::Display for Place<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Place::Root => Ok(()),
            Place::Member(Place::Root, name) => f.write_str(&printable(name)),
            Place::Member(parent, name) => write!(f, "{parent}.{}", printable(name)),
            Place::Item(parent, index) => write!(f, "{parent}[{index}]"),
        }
    }
}

/// A member name as a message shows it (the client's text, escaped and cut short).
fn printable(name: &str) -> String {
    crate::api::error::printable(name, 64)
}

/// Reads `text` as one JSON value through `seed`: nothing but blanks may follow it. An
/// error says what and where (`… at line L column C`).
pub fn read<'de, S: DeserializeSeed<'de>>(
    text: &'de [u8],
    seed: S,
) -> Result<S::Value, serde_json::Error> {
    let mut de = serde_json::Deserializer::from_slice(text);
    let value = seed.deserialize(&mut de)?;
    de.end()?;
    Ok(value)
}

/// A JSON document as a `Value`, read by `read`: no object in it gives a member twice.
pub fn parse(text: &[u8]) -> Result<Value, serde_json::Error> {
    read(text, Tree(Place::Root))
}

/// What a value is, as a message says it: `null`, `a number`, `an object`.
pub fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// The members of one object, one key at a time; a key given twice is an error naming
/// its place. Every object the server reads is read through it.
pub struct Keys<'de, 'p> {
    place: Place<'p>,
    seen: HashSet<Cow<'de, str>>,
}

impl<'de, 'p> Keys<'de, 'p> {
    /// The keys of the object at `place`.
    pub fn new(place: Place<'p>) -> Keys<'de, 'p> {
        Keys {
            place,
            seen: HashSet::new(),
        }
    }

    /// The object's next key, `None` after its last.
    pub fn next<A: MapAccess<'de>>(
        &mut self,
        map: &mut A,
    ) -> Result<Option<Cow<'de, str>>, A::Error> {
        let Some(key) = map.next_key_seed(Key)? else {
            return Ok(None);
        };
        if !self.seen.insert(key.clone()) {
            return Err(de::Error::custom(format!(
                "member {} is given twice",
                self.place.quoted(&key)
            )));
        }
        Ok(Some(key))
    }
}

/// A member name, borrowed from the text unless it holds an escape.
struct Key;

impl<'de> DeserializeSeed<'de> for Key {
    type Value = Cow<'de, str>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for Key {
    type Value = Cow<'de, str>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a member name")
    }

    fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Self::Value, E> {
        Ok(Cow::Borrowed(v))
    }

    fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
        Ok(Cow::Owned(v.to_owned()))
    }

    fn visit_string<E>(self, v: String) -> Result<Self::Value, E> {
        Ok(Cow::Owned(v))
    }
}

/// Any JSON value at a place, as a `Value`, its objects read through `Keys`.
pub struct Tree<'p>(pub Place<'p>);

impl<'de> DeserializeSeed<'de> for Tree<'_> {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Tree<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(v) = seq.next_element_seed(Tree(self.0.item(items.len())))? {
            items.push(v);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut keys = Keys::new(self.0);
        let mut object = Map::new();
        while let Some(key) = keys.next(&mut map)? {
            let value = map.next_value_seed(Tree(self.0.member(&key)))?;
            object.insert(key.into_owned(), value);
        }
        Ok(Value::Object(object))
    }
}

#[cfg(test)]
mod tests {
    use super::parse;

    fn err(text: &str) -> String {
        parse(text.as_bytes()).unwrap_err().to_string()
    }

    #[test]
    fn a_member_given_twice_is_refused_by_its_place_at_any_depth() {
        assert_eq!(
            err(r#"{"a":1,"a":2}"#),
            "member `a` is given twice at line 1 column 10"
        );
        assert_eq!(
            err("{\"plants\":{\"alice\":[],\n\"alice\":[]}}"),
            "member `plants.alice` is given twice at line 2 column 7"
        );
        assert_eq!(
            err(r#"{"t":[{"x":{}},{"x":{"y":1,"y":1}}]}"#),
            "member `t[1].x.y` is given twice at line 1 column 30"
        );
        // An escape spells the same key.
        assert!(err(r#"{"ab":1,"a\u0062":2}"#).starts_with("member `ab` is given twice"));
        // The same name in two objects is no repeat.
        let v = parse(br#"{"a":{"a":1},"b":[{"a":1},{"a":2}]}"#).unwrap();
        assert_eq!(v["b"][1]["a"], 2);
    }

    #[test]
    fn the_whole_text_is_one_value() {
        assert!(err(r#"{"a":1} x"#).starts_with("trailing characters"));
        assert!(err("").starts_with("EOF while parsing"));
        assert_eq!(parse(b" [1, -2, 2.5, null, true, \"s\"] ").unwrap()[2], 2.5);
        // Nesting past serde_json's depth is an error, not a stack overflow.
        assert!(err(&"[".repeat(100_000)).starts_with("recursion limit exceeded"));
    }
}
