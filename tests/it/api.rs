//! The interface and the contract, as a client sees it: statuses, headers, exact bodies.

use crate::support::*;

const JSON: (&str, &str) = ("Content-Type", "application/json");

const T: Option<&str> = Some(TOKEN);
const REALM: (&str, &str) = ("WWW-Authenticate", r#"Bearer realm="plant-store""#);
const INVALID: (&str, &str) = (
    "WWW-Authenticate",
    r#"Bearer realm="plant-store", error="invalid_token""#,
);

#[test]
fn create_list_delete_round_trip() {
    let s = TestServer::memory();
    let list = || Req::get("/plants").token(TOKEN);
    let delete = || Req::new("DELETE", "/plants/1").token(TOKEN);
    check(
        &s,
        &[
            (
                Req::create(r#"{"id":1,"name":"Monstera","tag":"tropical"}"#),
                200,
                &[],
                r#"{"name":"Monstera","tag":"tropical"}"#.into(),
            ),
            (
                Req::create(r#"{"name":"Fern","id":2}"#),
                200,
                &[],
                r#"{"name":"Fern"}"#.into(),
            ),
            (
                list(),
                200,
                &[],
                r#"[{"name":"Monstera","tag":"tropical"},{"name":"Fern"}]"#.into(),
            ),
            (delete(), 204, &[], String::new()),
            (delete(), 404, &[], err(404, "no plant with id 1")),
            (list(), 200, &[], r#"[{"name":"Fern"}]"#.into()),
            (Req::get("/healthz"), 200, &[], r#"{"status":"ok"}"#.into()),
        ],
    );
}

#[test]
fn every_row_of_the_error_table() {
    let s = TestServer::memory();
    assert_eq!(s.post(r#"{"id":7,"name":"Seven"}"#).status, 200);
    let big = format!(r#"{{"id":1,"name":"{}"}}"#, "x".repeat(70_000));
    let rows: &[Row] = &[
        (
            ("GET", "/nope", T, &[], None).into(),
            404,
            &[],
            err(404, "no such path: /nope"),
        ),
        (
            ("GET", "/plants/", T, &[], None).into(),
            404,
            &[],
            err(404, "no such path: /plants/"),
        ),
        (
            ("DELETE", "/plants/1/x", T, &[], None).into(),
            404,
            &[],
            err(404, "no such path: /plants/1/x"),
        ),
        (
            ("GET", "/PLANTS", T, &[], None).into(),
            404,
            &[],
            err(404, "no such path: /PLANTS"),
        ),
        (
            ("PUT", "/plants", T, &[], None).into(),
            405,
            &[("Allow", "GET, POST")],
            err(405, "method not allowed here; allowed: GET, POST"),
        ),
        (
            ("GET", "/plants/7", T, &[], None).into(),
            405,
            &[("Allow", "DELETE")],
            err(405, "method not allowed here; allowed: DELETE"),
        ),
        (
            ("POST", "/healthz", None, &[], None).into(),
            405,
            &[("Allow", "GET")],
            err(405, "method not allowed here; allowed: GET"),
        ),
        (
            ("HEAD", "/openapi.json", None, &[], None).into(),
            405,
            &[("Allow", "GET")],
            String::new(),
        ),
        (
            ("GET", "/plants", None, &[], None).into(),
            401,
            &[REALM],
            err(401, "an Authorization: Bearer header is required"),
        ),
        (
            ("GET", "/plants", Some("wrong-token"), &[], None).into(),
            401,
            &[INVALID],
            err(401, "the bearer token is unknown or revoked"),
        ),
        (
            (
                "POST",
                "/plants",
                T,
                &[("Content-Type", "text/plain")],
                Some(r#"{"id":1,"name":"a"}"#),
            )
                .into(),
            415,
            &[],
            err(
                415,
                "the body must be sent as Content-Type: application/json",
            ),
        ),
        (
            ("POST", "/plants", T, &[], Some(r#"{"id":1,"name":"a"}"#)).into(),
            415,
            &[],
            err(
                415,
                "the body must be sent as Content-Type: application/json",
            ),
        ),
        (
            ("POST", "/plants", T, &[JSON], Some(big.as_str())).into(),
            413,
            &[],
            err(413, "the body is larger than 65536 bytes"),
        ),
        (
            ("POST", "/plants", T, &[JSON], Some("{")).into(),
            400,
            &[],
            err(
                400,
                "invalid body: EOF while parsing an object at line 1 column 1",
            ),
        ),
        (
            ("GET", "/plants?limit=x", T, &[], None).into(),
            400,
            &[],
            err(
                400,
                "`limit` must be an integer from 0 to 2147483647, not `x`",
            ),
        ),
        (
            ("GET", "/plants?limt=5", T, &[], None).into(),
            400,
            &[],
            err(400, "unknown query parameter `limt`"),
        ),
        (
            ("GET", "/healthz?verbose=1", None, &[], None).into(),
            400,
            &[],
            err(400, "unknown query parameter `verbose`"),
        ),
        (
            ("DELETE", "/plants/abc", T, &[], None).into(),
            400,
            &[],
            err(
                400,
                "the id in the path must be a signed 64-bit integer, not `abc`",
            ),
        ),
        // JSON's number grammar exactly, as for the body's id.
        (
            ("DELETE", "/plants/1.", T, &[], None).into(),
            400,
            &[],
            err(
                400,
                "the id in the path must be a signed 64-bit integer, not `1.`",
            ),
        ),
        (
            ("DELETE", "/plants/07", T, &[], None).into(),
            400,
            &[],
            err(
                400,
                "the id in the path must be a signed 64-bit integer, not `07`",
            ),
        ),
        (
            (
                "POST",
                "/plants",
                T,
                &[JSON],
                Some(r#"{"id":7,"name":"again"}"#),
            )
                .into(),
            409,
            &[],
            err(409, "a plant with id 7 already exists"),
        ),
        (
            ("DELETE", "/plants/8", T, &[], None).into(),
            404,
            &[],
            err(404, "no plant with id 8"),
        ),
        // The order of checks: route, then token, then request, then store.
        (
            ("PUT", "/plants/x", None, &[], None).into(),
            405,
            &[("Allow", "DELETE")],
            err(405, "method not allowed here; allowed: DELETE"),
        ),
        (
            (
                "POST",
                "/plants",
                None,
                &[("Content-Type", "text/plain")],
                Some("{"),
            )
                .into(),
            401,
            &[REALM],
            err(401, "an Authorization: Bearer header is required"),
        ),
        (
            ("DELETE", "/plants/abc", Some("nope"), &[], None).into(),
            401,
            &[INVALID],
            err(401, "the bearer token is unknown or revoked"),
        ),
        (
            (
                "POST",
                "/plants?x=1",
                T,
                &[("Content-Type", "text/plain")],
                Some("{"),
            )
                .into(),
            415,
            &[],
            err(
                415,
                "the body must be sent as Content-Type: application/json",
            ),
        ),
    ];
    check(&s, rows);
    // None of it changed the store.
    assert_eq!(s.list(), r#"[{"name":"Seven"}]"#);
}

#[test]
fn creation_body_validation() {
    let s = TestServer::memory();
    let bad: &[(&str, &str)] = &[
        (r#"{"id":1.5,"name":"a"}"#, "`id` must be an integer"),
        (r#"{"id":"1","name":"a"}"#, "`id` must be an integer"),
        (r#"{"id":true,"name":"a"}"#, "`id` must be an integer"),
        (
            r#"{"id":9223372036854775808,"name":"a"}"#,
            "`id` must be an integer in the signed 64-bit range",
        ),
        (
            r#"{"id":1.0e-9223372036854775808,"name":"a"}"#,
            "`id` must be an integer in the signed 64-bit range",
        ),
        (
            r#"{"id":-9223372036854775809,"name":"a"}"#,
            "`id` must be an integer",
        ),
        (r#"{"id":null,"name":"a"}"#, "`id` must be an integer"),
        (r#"{"name":"a"}"#, "member `id` is required"),
        (r#"{"id":1}"#, "member `name` is required"),
        (
            r#"{"id":1,"name":""}"#,
            "`name` must have 1 to 256 characters, not 0",
        ),
        (r#"{"id":1,"name":5}"#, "`name` must be a string"),
        (
            r#"{"id":1,"name":"a","tag":null}"#,
            "`tag` must be a string",
        ),
        (r#"{"id":1,"name":"a","tag":7}"#, "`tag` must be a string"),
        (
            r#"{"id":1,"name":"a","color":"red"}"#,
            "unknown member `color`",
        ),
        (
            r#"{"id":1,"name":"a","name":"b"}"#,
            "member `name` is given twice",
        ),
        (
            r#"{"id":1,"id":1,"name":"a"}"#,
            "member `id` is given twice",
        ),
        (r#"{"id":1,"name":"a"}x"#, "trailing characters"),
        (r#"{"id":1,"name":"a"}{}"#, "trailing characters"),
        (r#"[{"id":1,"name":"a"}]"#, "invalid body"),
        ("", "EOF while parsing"),
        ("null", "invalid body"),
        ("{\"id\":1,\"name\":\"\u{fffd}\"", "EOF"),
    ];
    let long_name = format!(r#"{{"id":1,"name":"{}"}}"#, "n".repeat(257));
    let long_tag = format!(r#"{{"id":1,"name":"a","tag":"{}"}}"#, "🌿".repeat(257));
    let mut cases: Vec<(String, &str)> = bad.iter().map(|(b, m)| (b.to_string(), *m)).collect();
    cases.push((long_name, "`name` must have 1 to 256 characters, not 257"));
    cases.push((long_tag, "`tag` must have 0 to 256 characters, not 257"));
    for (body, message) in &cases {
        let r = s.post(body);
        assert_eq!(r.status, 400, "{body}: {}", r.text());
        let v = r.json();
        assert_eq!(v["error"], 400);
        assert!(
            v["message"].as_str().unwrap().contains(message),
            "{body}: {}",
            r.text()
        );
    }
    // Invalid UTF-8 in the body is 400 too.
    let auth = bearer(TOKEN);
    let r = s.send(
        "POST",
        "/plants",
        &[("Authorization", &auth), JSON],
        Some(b"{\"id\":1,\"name\":\"\xff\"}"),
    );
    assert_eq!(r.status, 400);
    assert_eq!(s.list(), "[]", "a refused body must change nothing");
}

#[test]
fn content_type_parameters_and_case_are_accepted() {
    let s = TestServer::memory();
    let auth = bearer(TOKEN);
    for (id, ct) in [
        (1, "application/json; charset=utf-8"),
        (2, "Application/JSON"),
        (3, " application/json ;x=y"),
    ] {
        let body = format!(r#"{{"id":{id},"name":"a"}}"#);
        let r = s.send(
            "POST",
            "/plants",
            &[("Authorization", &auth), ("Content-Type", ct)],
            Some(body.as_bytes()),
        );
        assert_eq!(r.status, 200, "{ct}: {}", r.text());
    }
    for ct in [
        "application/jsonx",
        "text/json",
        "application/json-patch+json",
    ] {
        let r = s.send(
            "POST",
            "/plants",
            &[("Authorization", &auth), ("Content-Type", ct)],
            Some(b"{}"),
        );
        assert_eq!(r.status, 415, "{ct}");
    }
}

#[test]
fn without_a_token_configured_every_plants_request_is_refused() {
    let s = Launch::memory().token(None).start();
    let r = s.get("/plants");
    assert_eq!(
        (r.status, r.header("WWW-Authenticate")),
        (401, Some(INVALID.1))
    );
    assert_eq!(s.send("GET", "/healthz", &[], None).status, 200);
    // The warning is written by the log's own thread: wait for it (log_when panics when
    // it never comes).
    s.log_when(|log| log.contains("PLANT_STORE_TOKEN is not set"));
}
