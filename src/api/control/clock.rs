//! Test control's clock (`/_control/clock`, docs/testing.md): the bodies of a set and an
//! advance, each error naming its member, and the clock as JSON. The clock itself is the
//! server's `ops::clock::Clock`, which every reader of time is given.

use crate::api::error::{ApiError, printable};
use crate::ops::clock::EARLIEST_MS;
use crate::ops::clock::LATEST_MS;
use crate::ops::clock::{self, Clock, Reading};
use serde_json::{Map, Value};

/// `GET /_control/clock`, and the answer of a set or an advance:
/// `{"now":"RFC 3339 with ms","frozen":false}`.
pub fn show(reading: Reading) -> Vec<u8> {
    // In the contract's order (a JSON object of serde_json's sorts its members).
    format!(
        r#"{{"now":"{}","frozen":{}}}"#,
        clock::utc_millis(reading.now_ms),
        reading.frozen
    )
    .into_bytes()
}

/// `PUT /_control/clock` `{"now":"RFC 3339","frozen":true}` (`frozen` default false).
pub fn set(clock: &Clock, body: &[u8]) -> Result<Reading, ApiError> {
    let object = object(body, &["now", "frozen"])?;
    let now = match object.get("now") {
        None | Some(Value::Null) => return Err(bad("now: is required")),
        Some(Value::String(v)) => clock::parse_rfc3339_millis(v).ok_or_else(|| {
            ApiError::BadRequest(format!(
                "now: must be an RFC 3339 time such as 2030-01-01T00:00:00Z, not `{}`",
                printable(v, 64)
            ))
        })?,
        Some(_) => {
            return Err(bad(
                "now: must be a string such as \"2030-01-01T00:00:00Z\"",
            ));
        }
    };
    if !(EARLIEST_MS..=LATEST_MS).contains(&now) {
        return Err(bad(
            "now: must be from 0000-01-01T00:00:00Z to 9999-12-31T23:59:59.999Z",
        ));
    }
    let frozen = match object.get("frozen") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(_) => return Err(bad("frozen: must be true or false")),
    };
    clock.set(now, frozen).map_err(|_| too_far("now"))
}

/// `POST /_control/clock/advance` `{"by":"DURATION"}` (at least 1 s).
pub fn advance(clock: &Clock, body: &[u8]) -> Result<Reading, ApiError> {
    let object = object(body, &["by"])?;
    let by = match object.get("by") {
        None | Some(Value::Null) => return Err(bad("by: is required")),
        Some(Value::String(v)) => clock::parse_duration(v)
            .filter(|&s| s >= 1)
            .and_then(|s| s.checked_mul(1000))
            .ok_or_else(|| {
                ApiError::BadRequest(format!(
                    "by: must be a duration of at least 1s (such as 90, 90s, 15m, 2h, 7d), not `{}`",
                    printable(v, 32)
                ))
            })?,
        Some(_) => return Err(bad("by: must be a string such as \"2h\"")),
    };
    if clock.reading().now_ms.saturating_add(by) > LATEST_MS {
        return Err(bad(
            "by: would move the clock past 9999-12-31T23:59:59.999Z",
        ));
    }
    clock.advance(by).map_err(|_| too_far("by"))
}

fn bad(why: &str) -> ApiError {
    ApiError::BadRequest(why.to_owned())
}

/// A set or an advance that would put what waits on the clock past `MAX_AHEAD_MS`.
fn too_far(member: &str) -> ApiError {
    ApiError::BadRequest(format!(
        "{member}: the test clocks since the last reset would move the server's time more \
         than {} years ahead in all; POST /_control/reset brings it back",
        clock::MAX_AHEAD_YEARS
    ))
}

/// The body as a JSON object with no member but `known`.
fn object(body: &[u8], known: &[&str]) -> Result<Map<String, Value>, ApiError> {
    let value = crate::api::json::parse(body)
        .map_err(|e| ApiError::BadRequest(format!("invalid body: {e}")))?;
    let Value::Object(object) = value else {
        return Err(bad("the body must be a JSON object"));
    };
    if let Some(k) = object.keys().find(|k| !known.contains(&k.as_str())) {
        return Err(ApiError::BadRequest(format!(
            "{}: unknown member (known: {})",
            printable(k, 64),
            known.join(", ")
        )));
    }
    Ok(object)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(e: ApiError) -> String {
        match e {
            ApiError::BadRequest(m) => m,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn bounds_are_the_four_digit_years() {
        assert_eq!(
            clock::parse_rfc3339_millis("0000-01-01T00:00:00Z"),
            Some(EARLIEST_MS)
        );
        assert_eq!(
            clock::parse_rfc3339_millis("9999-12-31T23:59:59.999Z"),
            Some(LATEST_MS)
        );
    }

    #[test]
    fn bad_bodies_name_their_member() {
        let c = Clock::new(true);
        let set = |b: &str| message(set(&c, b.as_bytes()).unwrap_err());
        assert!(set(r#"{"frozen":true}"#).starts_with("now: is required"));
        assert!(set(r#"{"now":"2030-01-01"}"#).starts_with("now: must be an RFC 3339"));
        assert!(set(r#"{"now":5}"#).starts_with("now: must be a string"));
        assert!(set(r#"{"now":"2030-01-01T00:00:00Z","frozen":"yes"}"#).starts_with("frozen:"));
        assert!(set(r#"{"now":"2030-01-01T00:00:00Z","at":1}"#).starts_with("at: unknown member"));
        assert!(set(r#"[]"#).starts_with("the body must be a JSON object"));
        assert!(set(r#"{"now":"0000-01-01T00:00:00+01:00"}"#).starts_with("now: must be from"));
        let advance = |b: &str| message(advance(&c, b.as_bytes()).unwrap_err());
        assert!(advance(r#"{}"#).starts_with("by: is required"));
        for by in ["0", "1.5h", "-1h", "1w", "", "99999999999999999d"] {
            let m = advance(&format!(r#"{{"by":"{by}"}}"#));
            assert!(m.starts_with("by: must be a duration"), "{by}: {m}");
        }
        assert!(advance(r#"{"by":3600}"#).starts_with("by: must be a string"));
        c.set(LATEST_MS - 1000, true).unwrap();
        assert!(advance(r#"{"by":"2s"}"#).starts_with("by: would move the clock past"));
        assert_eq!(
            super::advance(&c, br#"{"by":"1s"}"#).unwrap().now_ms,
            LATEST_MS
        );
    }

    #[test]
    fn a_set_shows_the_clock_to_the_millisecond() {
        let c = Clock::new(true);
        let r = set(&c, br#"{"now":"2030-01-01T00:00:00.5Z","frozen":true}"#).unwrap();
        assert_eq!(
            String::from_utf8(show(r)).unwrap(),
            r#"{"now":"2030-01-01T00:00:00.500Z","frozen":true}"#
        );
        let r = advance(&c, br#"{"by":"2h"}"#).unwrap();
        assert_eq!(clock::utc_millis(r.now_ms), "2030-01-01T02:00:00.500Z");
        assert!(r.frozen);
        let r = set(&c, br#"{"now":"2030-01-01T00:00:00Z"}"#).unwrap();
        assert!(!r.frozen);
    }
}
