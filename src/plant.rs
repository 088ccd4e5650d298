//! The plant: the creation body (`NewPlant`) with every validation rule of the contract,
//! and the JSON form of a `Plant` written straight into a buffer.

use serde::de::{self, Deserializer, MapAccess, Visitor};
use std::fmt;

/// Longest `name` or `tag`, in Unicode characters.
pub const MAX_TEXT_CHARS: usize = 256;

/// A plant as stored and listed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plant {
    pub id: i64,
    pub name: String,
    pub tag: Option<String>,
}

impl Plant {
    /// Appends `{"name":...,"tag":...}` (the list and create shape: no id; `tag` only
    /// when present) to `out`.
    pub fn write_json(&self, out: &mut Vec<u8>) {
        write_plant_json(&self.name, self.tag.as_deref(), out);
    }
}

/// Appends the JSON form of a plant with this name and tag to `out`.
pub fn write_plant_json(name: &str, tag: Option<&str>, out: &mut Vec<u8>) {
    out.extend_from_slice(b"{\"name\":");
    write_json_string(name, out);
    if let Some(tag) = tag {
        out.extend_from_slice(b",\"tag\":");
        write_json_string(tag, out);
    }
    out.push(b'}');
}

fn write_json_string(s: &str, out: &mut Vec<u8>) {
    // serde_json escapes exactly as JSON requires (NUL as \u0000, quotes, controls).
    serde_json::to_writer(out, s).expect("writing to a Vec cannot fail");
}

/// Parses and validates a creation body. The error message names the member at fault.
pub fn parse_new_plant(body: &[u8]) -> Result<Plant, String> {
    let mut de = serde_json::Deserializer::from_slice(body);
    let plant = de
        .deserialize_map(NewPlantVisitor)
        .map_err(|e| format!("invalid body: {e}"))?;
    de.end().map_err(|e| format!("invalid body: {e}"))?;
    Ok(plant)
}

struct NewPlantVisitor;

impl<'de> Visitor<'de> for NewPlantVisitor {
    type Value = Plant;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON object with members id, name and optionally tag")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Plant, A::Error> {
        let (mut id, mut name, mut tag) = (None, None, None);
        while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
            let duplicate = || de::Error::custom(format!("member `{key}` is given twice"));
            match key.as_ref() {
                "id" => {
                    if id.is_some() {
                        return Err(duplicate());
                    }
                    let v: i64 = map.next_value().map_err(|e| {
                        de::Error::custom(format!(
                            "`id` must be an integer in the signed 64-bit range ({e})"
                        ))
                    })?;
                    id = Some(v);
                }
                "name" => {
                    if name.is_some() {
                        return Err(duplicate());
                    }
                    name = Some(text_value(&mut map, "name", 1)?);
                }
                "tag" => {
                    if tag.is_some() {
                        return Err(duplicate());
                    }
                    tag = Some(text_value(&mut map, "tag", 0)?);
                }
                other => return Err(de::Error::custom(format!("unknown member `{other}`"))),
            }
        }
        Ok(Plant {
            id: id.ok_or_else(|| de::Error::custom("member `id` is required"))?,
            name: name.ok_or_else(|| de::Error::custom("member `name` is required"))?,
            tag,
        })
    }
}

fn text_value<'de, A: MapAccess<'de>>(
    map: &mut A,
    member: &str,
    min_chars: usize,
) -> Result<String, A::Error> {
    let s: String = map
        .next_value()
        .map_err(|e| de::Error::custom(format!("`{member}` must be a string ({e})")))?;
    let chars = s.chars().count();
    if chars < min_chars || chars > MAX_TEXT_CHARS {
        return Err(de::Error::custom(format!(
            "`{member}` must have {min_chars} to {MAX_TEXT_CHARS} characters, not {chars}"
        )));
    }
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(body: &str) -> String {
        parse_new_plant(body.as_bytes()).unwrap_err()
    }

    #[test]
    fn accepts_the_full_range_and_optional_tag() {
        let p = parse_new_plant(br#"{"id":-9223372036854775808,"name":"a"}"#).unwrap();
        assert_eq!((p.id, p.name.as_str(), p.tag), (i64::MIN, "a", None));
        let p = parse_new_plant(br#"{"tag":"","name":"b","id":9223372036854775807}"#).unwrap();
        assert_eq!((p.id, p.tag.as_deref()), (i64::MAX, Some("")));
    }

    #[test]
    fn rejects_each_bad_member_by_name() {
        assert!(err(r#"{"id":1.0,"name":"a"}"#).contains("`id`"));
        assert!(err(r#"{"id":"1","name":"a"}"#).contains("`id`"));
        assert!(err(r#"{"id":9223372036854775808,"name":"a"}"#).contains("`id`"));
        assert!(err(r#"{"id":1,"name":""}"#).contains("`name` must have 1 to 256"));
        assert!(err(r#"{"id":1,"name":"a","tag":null}"#).contains("`tag` must be a string"));
        assert!(err(r#"{"id":1,"name":"a","id":2}"#).contains("`id` is given twice"));
        assert!(err(r#"{"id":1,"name":"a","color":"red"}"#).contains("unknown member `color`"));
        assert!(err(r#"{"name":"a"}"#).contains("`id` is required"));
        assert!(err(r#"{"id":1}"#).contains("`name` is required"));
        assert!(err(r#"{"id":1,"name":"a"} x"#).contains("trailing"));
        assert!(err(r#"[1,"a"]"#).contains("invalid body"));
    }

    #[test]
    fn counts_characters_not_bytes() {
        let ok = format!(r#"{{"id":1,"name":"{}"}}"#, "🌱".repeat(256));
        assert!(parse_new_plant(ok.as_bytes()).is_ok());
        let long = format!(r#"{{"id":1,"name":"{}"}}"#, "é".repeat(257));
        assert!(err(&long).contains("not 257"));
    }

    #[test]
    fn json_round_trips_nul_and_emoji_and_omits_absent_tag() {
        let p = Plant {
            id: 1,
            name: "a\0b\"🌵".into(),
            tag: None,
        };
        let mut out = Vec::new();
        p.write_json(&mut out);
        assert_eq!(
            String::from_utf8(out.clone()).unwrap(),
            r#"{"name":"a\u0000b\"🌵"}"#
        );
        let back: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(back["name"], "a\0b\"🌵");
    }
}
