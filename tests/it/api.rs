//! The interface and the contract, as a client sees it: statuses, headers, exact bodies.

use crate::support::*;
use std::io::{Read, Write};

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
    check(
        &s,
        &[(
            (
                "POST",
                "/plants",
                T,
                &[JSON],
                Some(r#"{"id":1,"name":"Monstera","tag":"tropical"}"#),
            )
                .into(),
            200,
            &[],
            r#"{"name":"Monstera","tag":"tropical"}"#.to_string(),
        )],
    );
    check(
        &s,
        &[(
            (
                "POST",
                "/plants",
                T,
                &[JSON],
                Some(r#"{"name":"Fern","id":2}"#),
            )
                .into(),
            200,
            &[],
            r#"{"name":"Fern"}"#.to_string(),
        )],
    );
    check(
        &s,
        &[(
            ("GET", "/plants", T, &[], None).into(),
            200,
            &[],
            r#"[{"name":"Monstera","tag":"tropical"},{"name":"Fern"}]"#.to_string(),
        )],
    );
    check(
        &s,
        &[(
            ("DELETE", "/plants/1", T, &[], None).into(),
            204,
            &[],
            "".to_string(),
        )],
    );
    check(
        &s,
        &[(
            ("DELETE", "/plants/1", T, &[], None).into(),
            404,
            &[],
            err(404, "no plant with id 1"),
        )],
    );
    check(
        &s,
        &[(
            ("GET", "/plants", T, &[], None).into(),
            200,
            &[],
            r#"[{"name":"Fern"}]"#.to_string(),
        )],
    );
    check(
        &s,
        &[(
            ("GET", "/healthz", None, &[], None).into(),
            200,
            &[],
            r#"{"status":"ok"}"#.to_string(),
        )],
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

#[test]
fn limit_caps_the_list() {
    let s = TestServer::memory();
    for id in 1..=5 {
        assert_eq!(
            s.post(&format!(r#"{{"id":{id},"name":"p{id}"}}"#)).status,
            200
        );
    }
    let list = |q: &str| {
        let r = s.get(&format!("/plants{q}"));
        (r.status, r.text())
    };
    assert_eq!(list("?limit=0"), (200, "[]".into()));
    assert_eq!(names(&list("?limit=2").1), vec!["p1", "p2"]);
    assert_eq!(names(&list("?limit=2147483647").1).len(), 5);
    assert_eq!(names(&list("?limit=5").1).len(), 5);
    assert_eq!(names(&list("?").1).len(), 5);
    for bad in [
        "?limit=-1",
        "?limit=2147483648",
        "?limit=1&limit=1",
        "?limit=",
        "?limit",
        "?limit=1.5",
        "?limit=%31",
        "?limit=1&x",
        "?LIMIT=1",
    ] {
        let (status, body) = list(bad);
        assert_eq!(status, 400, "{bad}: {body}");
    }
}

/// HTTP/1.1 pipelining: requests sent back to back on one connection are applied in the
/// order sent and answered in that order, so a pipelined DELETE finds the plant the POST
/// before it created, and a pipelined GET sees both.
#[test]
fn pipelined_requests_on_one_connection_apply_in_order() {
    let s = TestServer::memory();
    let auth = format!("Authorization: {}\r\n", bearer(TOKEN));
    for id in 0..25 {
        let body = format!(r#"{{"id":{id},"name":"p{id}"}}"#);
        let post = format!(
            "POST /plants HTTP/1.1\r\nHost: t\r\n{auth}Content-Type: application/json\r\n\
             Content-Length: {}\r\n\r\n{body}",
            body.len()
        );
        let delete = format!("DELETE /plants/{id} HTTP/1.1\r\nHost: t\r\n{auth}\r\n");
        let get = format!("GET /plants HTTP/1.1\r\nHost: t\r\n{auth}Connection: close\r\n\r\n");
        let mut conn = s.connect();
        conn.write_all(format!("{post}{delete}{post}{get}").as_bytes())
            .unwrap();
        let mut all = String::new();
        conn.read_to_string(&mut all).unwrap();
        let statuses: Vec<&str> = all.split("HTTP/1.1 ").skip(1).map(|r| &r[..3]).collect();
        assert_eq!(statuses, ["200", "204", "200", "200"], "{all}");
        let listed = all.rsplit("\r\n\r\n").next().unwrap();
        let want: Vec<String> = (0..=id).map(|i| format!("p{i}")).collect();
        assert_eq!(names(listed), want, "{all}");
    }
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
fn fifty_thousand_plants_stream_in_order_in_flat_memory() {
    let dir = TempDir::new();
    // Seed the database directly (50,000 HTTP creates would take most of the test's
    // time); the schema comes from the server itself.
    TestServer::start(&dir.db()).stop();
    if on_postgres() {
        psql(
            &dir.db(),
            "INSERT INTO plants (principal, id, name, tag)
             SELECT 'default', g * 3 - 1000, convert_to('p' || g, 'UTF8'), convert_to(repeat('g', 200), 'UTF8')
             FROM generate_series(49999, 0, -1) AS g",
        );
    } else {
        let mut conn = rusqlite::Connection::open(dir.db()).unwrap();
        let tx = conn.transaction().unwrap();
        let mut st = tx
            .prepare("INSERT INTO plants (principal, id, name, tag) VALUES ('default', ?1, ?2, ?3)")
            .unwrap();
        for id in (0..50_000i64).rev() {
            st.execute(rusqlite::params![
                id * 3 - 1000,
                format!("p{id}"),
                "g".repeat(200)
            ])
            .unwrap();
        }
        drop(st);
        tx.commit().unwrap();
    }
    let s = TestServer::start(&dir.db());
    let before = s.proc_status("VmHWM");
    let r = s.get("/plants");
    assert_eq!(r.status, 200);
    assert_eq!(
        r.header("Transfer-Encoding"),
        Some("chunked"),
        "a long list is streamed"
    );
    let got = names(&r.text());
    assert_eq!(got.len(), 50_000);
    assert!(
        got.iter().enumerate().all(|(i, n)| *n == format!("p{i}")),
        "order by id"
    );
    // Over 11 MB of JSON went out a page at a time: the server's peak grew by far less.
    assert!(r.body.len() > 11_000_000, "{}", r.body.len());
    let grown = s.proc_status("VmHWM") - before;
    assert!(grown < 4096, "peak RSS grew by {grown} kB");
    let r = s.get("/plants?limit=49999");
    assert_eq!(names(&r.text()).len(), 49_999);
    // HTTP/1.0 (no chunked coding) and `TE: identity` stream too: a body that ends when
    // the connection closes, never buffered whole to count it.
    for (version, te) in [("1.0", ""), ("1.1", "TE: identity\r\n")] {
        let mut c = s.connect();
        write!(
            c,
            "GET /plants HTTP/{version}\r\nHost: t\r\n{te}Authorization: Bearer {TOKEN}\r\n\r\n"
        )
        .unwrap();
        let mut all = Vec::new();
        c.read_to_end(&mut all).unwrap();
        let text = String::from_utf8(all).unwrap();
        let (head, body) = text.split_once("\r\n\r\n").unwrap();
        assert!(
            head.starts_with(&format!("HTTP/{version} 200 OK\r\n")),
            "{head}"
        );
        assert!(head.contains("\r\nConnection: close"), "{head}");
        assert!(!head.contains("Content-Length"), "{head}");
        assert!(!head.contains("Transfer-Encoding"), "{head}");
        let got = names(body);
        assert_eq!(got.len(), 50_000, "HTTP/{version} {te}");
        assert!(got.iter().enumerate().all(|(i, n)| *n == format!("p{i}")));
    }
    let grown = s.proc_status("VmHWM") - before;
    assert!(grown < 4096, "peak RSS grew by {grown} kB");
}

#[test]
fn openapi_document_parses_and_documents_every_observed_status() {
    let s = TestServer::memory();
    let r = s.send("GET", "/openapi.json", &[], None);
    assert_eq!(r.status, 200);
    let doc = r.json();
    assert_eq!(doc["openapi"], "3.1.0");
    assert_eq!(doc["info"]["version"], "1.0.0");
    // Every status the test suite observes, per operation.
    let observed: &[(&str, &str, &[u16])] = &[
        ("/plants", "get", &[200, 400, 401, 404, 405, 500, 503]),
        (
            "/plants",
            "post",
            &[200, 400, 401, 403, 405, 408, 409, 413, 415, 429, 500, 503],
        ),
        (
            "/plants/{id}",
            "delete",
            &[204, 400, 401, 403, 404, 405, 503],
        ),
        ("/healthz", "get", &[200, 400, 405, 503]),
        ("/openapi.json", "get", &[200, 304, 400, 405]),
        ("/metrics", "get", &[200, 400, 405]),
    ];
    for (path, op, statuses) in observed {
        let responses = &doc["paths"][path][op]["responses"];
        assert!(responses.is_object(), "{op} {path} is not documented");
        for st in *statuses {
            assert!(
                responses.get(st.to_string()).is_some(),
                "{op} {path} lacks {st}"
            );
        }
        for (_, resp) in responses.as_object().unwrap() {
            if let Some(reference) = resp.get("$ref").and_then(|r| r.as_str()) {
                let name = reference.rsplit('/').next().unwrap();
                assert!(
                    doc["components"]["responses"].get(name).is_some(),
                    "dangling {reference}"
                );
            }
        }
    }
}

/// Whatever a client puts in the method, path and query, the access line stays one
/// short line of printable text: control characters never reach it (the gate refuses a
/// method outside the token set), and each part is bounded.
#[test]
fn access_lines_are_bounded_and_escaped() {
    let s = TestServer::memory();
    let names: Vec<String> = (0..500).map(|i| format!("n{i}\u{7}x=1")).collect();
    let query = names.join("&").replace('\u{7}', "%07");
    let long = format!(
        "{} /plants/{}?{query} HTTP/1.1\r\nHost: t\r\n\r\n",
        "M".repeat(5000),
        "p".repeat(5000)
    );
    let r = s.raw(long.as_bytes());
    assert_eq!(r.status, 405, "{}", r.text());
    for method in ["G\tET", "G\u{1b}[2JET", "GE\u{7}T"] {
        let r = s.raw(format!("{method} /healthz HTTP/1.1\r\nHost: t\r\n\r\n").as_bytes());
        assert_eq!(r.status, 400, "{method:?}");
    }
    let log = s.log_when(|log| log.lines().filter(|l| l.contains(" 400 ")).count() >= 3);
    assert!(
        !log.chars().any(|c| c.is_control() && c != '\n'),
        "a control character reached the log: {log:?}"
    );
    let line = log
        .lines()
        .find(|l| l.contains(" 405 "))
        .expect("the 405's line");
    assert!(line.len() < 1000, "{} bytes: {line}", line.len());
    assert!(
        line.contains(&format!("{}… /plants/", "M".repeat(16))),
        "{line}"
    );
}

#[test]
fn access_log_has_one_line_per_request_and_never_the_token() {
    let s = TestServer::memory();
    assert_eq!(s.post(r#"{"id":1,"name":"a"}"#).status, 200);
    assert_eq!(s.get("/plants?limit=1").status, 200);
    assert_eq!(
        s.send(
            "GET",
            "/plants",
            &[("Authorization", "Bearer sneaky-guess")],
            None
        )
        .status,
        401
    );
    let log = s.log_when(|log| log.matches(" /plants").count() >= 3);
    let access: Vec<&str> = log.lines().filter(|l| l.contains(" /plants")).collect();
    assert_eq!(access.len(), 3, "{log}");
    assert!(
        access[0].contains("POST /plants 200 12 ") && access[0].ends_with(" default"),
        "{}",
        access[0]
    );
    assert!(
        access[1].contains("GET /plants?limit=… 200 14 "),
        "{}",
        access[1]
    );
    assert!(
        access[2].contains("GET /plants 401 ") && access[2].ends_with(" -"),
        "{}",
        access[2]
    );
    assert!(
        !log.contains(TOKEN) && !log.contains("sneaky-guess"),
        "a token reached the log"
    );
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
    assert!(s.log().contains("PLANT_STORE_TOKEN is not set"));
}

#[test]
fn help_lists_every_flag_and_bad_flags_exit_2() {
    let (code, out, _) = run_cli(&["--help"]);
    assert_eq!(code, 0);
    for flag in [
        "--addr",
        "--db",
        "--workers",
        "--max-connections",
        "--queue-timeout",
        "--read-timeout",
        "--body-timeout",
        "--rate-limit",
        "--rate-burst",
        "--log-format",
        "--drain-timeout",
        "--log-level",
        "PLANT_STORE_TOKEN",
        "token add",
        "token list",
        "token revoke",
        "backup",
    ] {
        assert!(out.contains(flag), "--help lacks {flag}");
    }
    let (code, _, err) = run_cli(&["serve", "--workers", "zero"]);
    assert_eq!(code, 2);
    assert!(err.contains("--workers must be a whole number"), "{err}");
    // A listen address is not looked up in DNS: a name other than localhost is refused.
    let (code, _, err) = run_cli(&["serve", "--addr", "example.com:80"]);
    assert_eq!(code, 2);
    assert!(
        err.contains("--addr must be an IP address and a port"),
        "{err}"
    );
    let s = Launch::memory().arg("--addr localhost:0").start();
    assert!(s.addr.starts_with("127.0.0.1:"), "{}", s.addr);
    assert_eq!(s.send("GET", "/healthz", &[], None).status, 200);
    // The old fixed queue length is gone: naming it is an error, not silently ignored.
    let (code, _, err) = run_cli(&["serve", "--queue", "256"]);
    assert_eq!(code, 2);
    assert!(err.contains("unknown option --queue"), "{err}");
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

/// Caches store no health check and no caller's plants; the OpenAPI document carries a
/// validator and is answered 304 while the client's copy is current.
#[test]
fn cache_headers_keep_health_and_plants_out_of_caches_and_validate_the_document() {
    let s = TestServer::memory();
    let no_store = Some("no-store");
    assert_eq!(
        s.send("GET", "/healthz", &[], None).header("Cache-Control"),
        no_store
    );
    assert_eq!(s.get("/plants").header("Cache-Control"), no_store);
    assert_eq!(
        s.post(r#"{"id":1,"name":"a"}"#).header("Cache-Control"),
        no_store
    );
    assert_eq!(s.delete("1").header("Cache-Control"), no_store);
    let unauthenticated = s.send("GET", "/plants", &[], None);
    assert_eq!(
        (
            unauthenticated.status,
            unauthenticated.header("Cache-Control")
        ),
        (401, no_store)
    );
    let doc = s.send("GET", "/openapi.json", &[], None);
    assert_eq!(doc.header("Cache-Control"), Some("no-cache"));
    let etag = doc.header("ETag").expect("an ETag").to_owned();
    assert!(
        etag.starts_with('"') && etag.ends_with('"') && etag.len() == 18,
        "{etag}"
    );
    for current in [
        etag.clone(),
        format!("W/{etag}"),
        format!("\"x\", {etag}"),
        "*".into(),
    ] {
        let r = s.send("GET", "/openapi.json", &[("If-None-Match", &current)], None);
        assert_eq!((r.status, r.body.len()), (304, 0), "{current}");
        assert_eq!(r.header("ETag"), Some(etag.as_str()));
    }
    let stale = s.send(
        "GET",
        "/openapi.json",
        &[("If-None-Match", "\"0000\"")],
        None,
    );
    assert_eq!((stale.status, stale.body), (200, doc.body));
}

/// `--log-format json`: every line is one JSON object; access lines carry their fields,
/// never a token or a query value.
#[test]
fn json_log_lines_are_objects_with_the_access_fields() {
    let s = Launch::memory().arg("--log-format json").start();
    assert_eq!(s.post(r#"{"id":1,"name":"a"}"#).status, 200);
    assert_eq!(s.get("/plants?limit=5").status, 200);
    let sneaky = [("Authorization", "Bearer sneaky-guess")];
    assert_eq!(s.send("GET", "/plants", &sneaky, None).status, 401);
    let log = s.log_when(|log| log.matches("\"path\":\"/plants").count() >= 3);
    let lines: Vec<serde_json::Value> = log
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    assert!(
        lines
            .iter()
            .all(|l| l["time"].is_string() && l["level"].is_string() && l["message"].is_string())
    );
    let access: Vec<&serde_json::Value> = lines.iter().filter(|l| l["path"].is_string()).collect();
    let find = |method: &str, status: u64| {
        access
            .iter()
            .find(|l| l["method"] == method && l["status"] == status)
            .unwrap_or_else(|| panic!("no {method} {status} line:\n{log}"))
    };
    let post = find("POST", 200);
    assert_eq!(
        (post["path"].as_str(), post["bytes"].as_u64()),
        (Some("/plants"), Some(12))
    );
    assert_eq!(post["principal"], "default");
    assert!(post["duration_us"].is_u64());
    assert_eq!(find("GET", 200)["path"], "/plants?limit=…");
    assert_eq!(find("GET", 401)["principal"], serde_json::Value::Null);
    assert!(!log.contains(TOKEN) && !log.contains("sneaky-guess"));
}
