//! A plant's values: strings byte for byte, the limits inclusive, ids over the whole int64 range.

use crate::support::*;

#[test]
fn strings_round_trip_byte_for_byte_and_limits_are_inclusive() {
    let s = TestServer::memory();
    let name256 = "🌱".repeat(256);
    let tag256 = "t".repeat(256);
    let tricky = "nul\u{0}quote\"back\\slash\nnew\u{1f}ctl\u{2028}é日本🌵";
    for (id, name, tag) in [
        (1, name256.as_str(), Some(tag256.as_str())),
        (2, tricky, Some("")),
        (3, "x", Some(tricky)),
    ] {
        let body = serde_json::json!({"id": id, "name": name, "tag": tag}).to_string();
        let r = s.post(&body);
        assert_eq!(r.status, 200, "{}", r.text());
        assert_eq!(r.json(), serde_json::json!({"name": name, "tag": tag}));
    }
    let listed: serde_json::Value = serde_json::from_str(&s.list()).unwrap();
    assert_eq!(
        listed,
        serde_json::json!([
            {"name": name256, "tag": tag256},
            {"name": tricky, "tag": ""},
            {"name": "x", "tag": tricky},
        ])
    );
}

#[test]
fn ids_cover_int64_and_list_is_ordered_by_id() {
    let s = TestServer::memory();
    for id in [5i64, i64::MAX, -3, 0, i64::MIN, 10] {
        let r = s.post(&format!(r#"{{"id":{id},"name":"{id}"}}"#));
        assert_eq!(r.status, 200, "{id}: {}", r.text());
    }
    let want: Vec<String> = [i64::MIN, -3, 0, 5, 10, i64::MAX]
        .iter()
        .map(i64::to_string)
        .collect();
    assert_eq!(names(&s.list()), want);
    assert_eq!(s.delete(&i64::MIN.to_string()).status, 204);
    assert_eq!(s.delete(&i64::MAX.to_string()).status, 204);
    assert_eq!(names(&s.list()), vec!["-3", "0", "5", "10"]);
    // The served schema calls the path id an int64 integer, as JSON Schema defines one:
    // it takes the body's integer forms.
    for (form, left) in [
        ("5.0", vec!["-3", "0", "10"]),
        ("1e1", vec!["-3", "0"]),
        ("-30E-1", vec!["0"]),
    ] {
        assert_eq!(s.delete(form).status, 204, "{form}");
        assert_eq!(names(&s.list()), left, "{form}");
    }
    for bad in [
        "9223372036854775808",
        "-9223372036854775809",
        "%35",
        "+5",
        "5.5",
        "1.0e-9223372036854775808",
        "0x5",
        "5%20",
        &"9".repeat(5000),
    ] {
        let r = s.delete(bad);
        assert_eq!(r.status, 400, "{bad}: {}", r.text());
    }
}

/// `id` is an integer as JSON Schema 2020-12 (and the served OpenAPI 3.1 document) define
/// one: any number with a zero fractional part, taken exactly, never through a float.
#[test]
fn ids_written_as_numbers_with_a_zero_fraction_are_those_integers_exactly() {
    let s = TestServer::memory();
    for (written, id) in [
        ("7.0", "7"),
        ("8e0", "8"),
        ("9007199254740993.0", "9007199254740993"),
        ("9.223372036854775807e18", "9223372036854775807"),
    ] {
        let body = format!(r#"{{"id":{written},"name":"n{id}"}}"#);
        let r = s.post(&body);
        assert_eq!(
            (r.status, r.text()),
            (200, format!(r#"{{"name":"n{id}"}}"#))
        );
        // The same id written plainly is that plant: 409, and DELETE by it finds it.
        assert_eq!(
            s.post(&format!(r#"{{"id":{id},"name":"again"}}"#)).status,
            409
        );
    }
    assert_eq!(s.delete("9007199254740993").status, 204);
    assert_eq!(
        s.delete("9007199254740992").status,
        404,
        "no rounding to 2^53"
    );
    assert_eq!(names(&s.list()), ["n7", "n8", "n9223372036854775807"]);
}
