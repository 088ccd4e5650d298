//! The plant: the creation body (`NewPlant`) with every validation rule of the contract,
//! and the JSON form of a `Plant` written straight into a buffer.

use crate::api::json::{self, Keys, Place};
use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, Visitor};
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
    // Nothing to escape (no control character, quote or backslash): the bytes as they
    // are, between quotes, as serde_json writes them too.
    if s.bytes().all(|b| b >= 0x20 && b != b'"' && b != b'\\') {
        out.reserve(s.len() + 2);
        out.push(b'"');
        out.extend_from_slice(s.as_bytes());
        out.push(b'"');
        return;
    }
    // serde_json escapes exactly as JSON requires (NUL as \u0000, quotes, controls).
    serde_json::to_writer(out, s).expect("writing to a Vec cannot fail");
}

/// Parses and validates a creation body. The error message names the member at fault.
pub fn parse_new_plant(body: &[u8]) -> Result<Plant, String> {
    json::read(body, NewPlant(Place::Root)).map_err(|e| format!("invalid body: {e}"))
}

/// A creation body at a place: the request's whole body, or a plant of a seed file
/// (`plants.alice[3]`), whose messages name its members by their places.
pub struct NewPlant<'p>(pub Place<'p>);

impl<'de> DeserializeSeed<'de> for NewPlant<'_> {
    type Value = Plant;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Plant, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for NewPlant<'_> {
    type Value = Plant;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        if let Place::Root = self.0 {
            f.write_str("a JSON object with members id, name and optionally tag")
        } else {
            write!(
                f,
                "{} to be an object with members id, name and optionally tag",
                self.0
            )
        }
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Plant, A::Error> {
        let (mut id, mut name, mut tag) = (None, None, None);
        let member = |name: &str| self.0.quoted(name);
        let mut keys = Keys::new(self.0);
        while let Some(key) = keys.next(&mut map)? {
            match key.as_ref() {
                "id" => {
                    let raw: &'de serde_json::value::RawValue = map.next_value()?;
                    let v = json_integer(raw.get()).ok_or_else(|| {
                        de::Error::custom(format!(
                            "{} must be an integer in the signed 64-bit range, not `{}`",
                            member("id"),
                            raw.get().chars().take(40).collect::<String>()
                        ))
                    })?;
                    id = Some(v);
                }
                "name" => name = Some(text_value(&mut map, self.0, "name", 1)?),
                "tag" => tag = Some(text_value(&mut map, self.0, "tag", 0)?),
                other => {
                    return Err(de::Error::custom(format!(
                        "unknown member {}",
                        member(other)
                    )));
                }
            }
        }
        let required =
            |name: &str| de::Error::custom(format!("member {} is required", member(name)));
        Ok(Plant {
            id: id.ok_or_else(|| required("id"))?,
            name: name.ok_or_else(|| required("name"))?,
            tag,
        })
    }
}

/// The value of a JSON number text when it is an integer in the signed 64-bit range, as
/// JSON Schema 2020-12 defines an integer (and the served OpenAPI 3.1 document promises):
/// any number whose fractional part is zero, so `7.0` and `7e0` are 7. Computed exactly
/// from the digits, never through a float: `9007199254740993.0` is 2^53 + 1. `None` for
/// anything else, a string, `true` or `null` included.
pub fn json_integer(text: &str) -> Option<i64> {
    let (negative, unsigned) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let (mantissa, exponent) = match unsigned.find(['e', 'E']) {
        Some(at) => (&unsigned[..at], &unsigned[at + 1..]),
        None => (unsigned, "0"),
    };
    let digits_only = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    // JSON's number grammar exactly (a path id is read by it too): no leading zero, a
    // `.` followed by digits, an exponent of digits.
    let (whole, fraction) = match mantissa.split_once('.') {
        Some((whole, fraction)) if digits_only(fraction) => (whole, fraction),
        Some(_) => return None,
        None => (mantissa, ""),
    };
    let exponent_digits = exponent.strip_prefix(['+', '-']).unwrap_or(exponent);
    if !digits_only(whole)
        || (whole.len() > 1 && whole.starts_with('0'))
        || !digits_only(exponent_digits)
    {
        return None;
    }
    // The value is `significand` × 10^`scale`.
    let significand = format!("{whole}{fraction}");
    let significand = significand.trim_start_matches('0');
    if significand.is_empty() {
        return Some(0);
    }
    // An exponent too long for i64 is far outside the range either way.
    let exponent: i64 = match exponent.parse() {
        Ok(e) => e,
        Err(_) if exponent.starts_with('-') => i64::MIN / 2,
        Err(_) => i64::MAX / 2,
    };
    // Checked: an exponent near i64::MIN would wrap. So small a scale leaves no integer.
    let scale = exponent.checked_sub(i64::try_from(fraction.len()).ok()?)?;
    let digits = if scale < 0 {
        // The last -scale digits are the fraction: they must all be zeros.
        let cut = (significand.len() as i64).checked_add(scale)?;
        if cut <= 0 || !significand[cut as usize..].bytes().all(|b| b == b'0') {
            return None;
        }
        significand[..cut as usize].to_owned()
    } else if scale <= 19 {
        format!("{significand}{}", "0".repeat(scale as usize))
    } else {
        return None;
    };
    if digits.len() > 19 {
        return None;
    }
    let magnitude: i128 = digits.parse().ok()?;
    let value = if negative { -magnitude } else { magnitude };
    i64::try_from(value).ok()
}

/// The value of the string member `name` of the object at `place`.
fn text_value<'de, A: MapAccess<'de>>(
    map: &mut A,
    place: Place,
    name: &str,
    min_chars: usize,
) -> Result<String, A::Error> {
    let member = place.quoted(name);
    let s = match map.next_value_seed(json::Tree(place.member(name)))? {
        serde_json::Value::String(s) => s,
        other => {
            return Err(de::Error::custom(format!(
                "{member} must be a string, not {}",
                json::kind(&other)
            )));
        }
    };
    let chars = s.chars().count();
    if chars < min_chars || chars > MAX_TEXT_CHARS {
        return Err(de::Error::custom(format!(
            "{member} must have {min_chars} to {MAX_TEXT_CHARS} characters, not {chars}"
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
    fn strings_are_written_as_serde_json_writes_them() {
        for text in [
            "fern",
            "",
            "a\"b",
            "back\\slash",
            "nul\u{0}",
            "tab\t",
            "del\u{7f}",
            "émoji 🌿",
            "\u{1f}",
        ] {
            let mut ours = Vec::new();
            write_json_string(text, &mut ours);
            assert_eq!(ours, serde_json::to_vec(text).unwrap(), "{text:?}");
        }
    }

    #[test]
    fn ids_are_integers_as_json_schema_defines_them_exactly() {
        for (text, id) in [
            ("7", Some(7)),
            ("7.0", Some(7)),
            ("7e0", Some(7)),
            ("70E-1", Some(7)),
            ("0.7e1", Some(7)),
            ("-0", Some(0)),
            ("0.000e99999999999999999999", Some(0)),
            ("9.223372036854775807e18", Some(i64::MAX)),
            ("-9223372036854775808.000", Some(i64::MIN)),
            ("9007199254740993.0", Some(9_007_199_254_740_993)),
            ("1.5", None),
            ("1.", None),
            ("1.e2", None),
            (".5", None),
            ("01", None),
            ("-01.0", None),
            ("00", None),
            ("1e", None),
            ("1e+", None),
            ("7.01e1", None),
            ("1e-400", None),
            ("9223372036854775808", None),
            ("9.223372036854775808e18", None),
            ("-9223372036854775809", None),
            ("1e19", None),
            ("1e99999999999999999999", None),
            ("1.0e-9223372036854775808", None),
            ("10e-9223372036854775808", None),
            ("1.5e-9223372036854775807", None),
            ("1.0e9223372036854775807", None),
            ("\"1\"", None),
            ("true", None),
            ("null", None),
            ("{}", None),
        ] {
            assert_eq!(json_integer(text), id, "{text}");
        }
        let p = parse_new_plant(br#"{"id":9007199254740993.0,"name":"a"}"#).unwrap();
        assert_eq!(p.id, 9_007_199_254_740_993);
        let p = parse_new_plant(b"{ \"id\" :\t7e0 , \"name\":\"a\"}").unwrap();
        assert_eq!(p.id, 7, "blanks around the number are not part of it");
    }

    #[test]
    fn rejects_each_bad_member_by_name() {
        assert!(err(r#"{"id":1.5,"name":"a"}"#).contains("`id`"));
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
