//! Tokens, principals and scopes, through the binary's subcommands and a running server.

use crate::support::*;
use std::io::Write;
use std::time::{Duration, Instant};

const SCOPE: &str = r#"Bearer realm="plant-store", error="insufficient_scope""#;
const INVALID: &str = r#"Bearer realm="plant-store", error="invalid_token""#;

fn list_as(s: &TestServer, token: &str) -> (u16, String) {
    let r = s.send("GET", "/plants", &[("Authorization", &bearer(token))], None);
    (r.status, r.text())
}

#[test]
fn principals_are_isolated_in_both_directions() {
    let dir = TempDir::new();
    let alice = add_token(&dir.db(), "alice", false);
    let bob = add_token(&dir.db(), "bob", false);
    let s = TestServer::start(&dir.db());
    let create = |token: &str, body: &str| Req::new("POST", "/plants").token(token).json(body);
    let list = |token: &str| Req::get("/plants").token(token);
    let delete = |token: &str, id: i64| Req::new("DELETE", &format!("/plants/{id}")).token(token);
    check(
        &s,
        &[
            (
                create(&alice, r#"{"id":7,"name":"alice-7"}"#),
                200,
                &[],
                r#"{"name":"alice-7"}"#.into(),
            ),
            // Each principal has its own ids.
            (
                create(&bob, r#"{"id":7,"name":"bob-7"}"#),
                200,
                &[],
                r#"{"name":"bob-7"}"#.into(),
            ),
            (
                create(&alice, r#"{"id":8,"name":"alice-8"}"#),
                200,
                &[],
                r#"{"name":"alice-8"}"#.into(),
            ),
            (
                create(&alice, r#"{"id":7,"name":"again"}"#),
                409,
                &[],
                err(409, "a plant with id 7 already exists"),
            ),
            (
                list(&alice),
                200,
                &[],
                r#"[{"name":"alice-7"},{"name":"alice-8"}]"#.into(),
            ),
            (list(&bob), 200, &[], r#"[{"name":"bob-7"}]"#.into()),
            // The environment's token is principal `default`.
            (list(TOKEN), 200, &[], "[]".into()),
            // Another principal's id answers exactly like one that never existed.
            (delete(&bob, 8), 404, &[], err(404, "no plant with id 8")),
            (
                delete(&bob, 999),
                404,
                &[],
                err(404, "no plant with id 999"),
            ),
            (delete(&alice, 7), 204, &[], String::new()),
            // Alice's delete left bob's 7.
            (list(&bob), 200, &[], r#"[{"name":"bob-7"}]"#.into()),
            (list(&alice), 200, &[], r#"[{"name":"alice-8"}]"#.into()),
        ],
    );
}

#[test]
fn a_read_token_reads_and_every_write_is_403() {
    let dir = TempDir::new();
    let writer = add_token(&dir.db(), "carol", false);
    let reader = add_token(&dir.db(), "carol", true);
    let s = TestServer::start(&dir.db());
    let refused = err(
        403,
        "this token may only read; writing needs a read-write token",
    );
    let scope: &[(&str, &str)] = &[("WWW-Authenticate", SCOPE)];
    check(
        &s,
        &[
            (
                Req::new("POST", "/plants")
                    .token(&writer)
                    .json(r#"{"id":1,"name":"c1"}"#),
                200,
                &[],
                r#"{"name":"c1"}"#.into(),
            ),
            (
                Req::get("/plants").token(&reader),
                200,
                &[],
                r#"[{"name":"c1"}]"#.into(),
            ),
            (
                Req::new("POST", "/plants")
                    .token(&reader)
                    .json(r#"{"id":2,"name":"c2"}"#),
                403,
                scope,
                refused.clone(),
            ),
            (
                Req::new("DELETE", "/plants/1").token(&reader),
                403,
                scope,
                refused.clone(),
            ),
            // Scope is checked before the request: a bad body or id with a read token is
            // 403 too.
            (
                Req::new("POST", "/plants").token(&reader).json("{"),
                403,
                scope,
                refused.clone(),
            ),
            (
                Req::new("DELETE", "/plants/x").token(&reader),
                403,
                scope,
                refused.clone(),
            ),
            // The store is unchanged.
            (
                Req::get("/plants").token(&writer),
                200,
                &[],
                r#"[{"name":"c1"}]"#.into(),
            ),
        ],
    );
}

#[test]
fn revocation_and_new_tokens_take_effect_on_a_running_server() {
    let dir = TempDir::new();
    let first = add_token(&dir.db(), "dave", false);
    let s = TestServer::start(&dir.db());
    assert_eq!(list_as(&s, &first).0, 200);

    let second = add_token(&dir.db(), "dave", false);
    assert_eq!(list_as(&s, &second).0, 200, "a new token works at once");

    let (_, listing, _) = run_cli(&["token", "list", "--db", dir.db().to_str().unwrap()]);
    let ids: Vec<&str> = listing
        .lines()
        .skip(1)
        .map(|l| l.split_whitespace().next().unwrap())
        .collect();
    assert_eq!(ids.len(), 2);
    // Which id is the first token's: revoke each in turn and see which one stops working.
    let (code, out, _) = run_cli(&[
        "token",
        "revoke",
        ids[0],
        "--db",
        dir.db().to_str().unwrap(),
    ]);
    assert_eq!(
        (code, out.trim()),
        (0, format!("token {} revoked", ids[0]).as_str())
    );
    let statuses = (list_as(&s, &first).0, list_as(&s, &second).0);
    assert!(
        statuses == (401, 200) || statuses == (200, 401),
        "{statuses:?}"
    );
    let revoked = if statuses.0 == 401 { &first } else { &second };
    let r = s.send(
        "GET",
        "/plants",
        &[("Authorization", &bearer(revoked))],
        None,
    );
    assert_eq!(r.header("WWW-Authenticate"), Some(INVALID));

    let (code, _, err) = run_cli(&[
        "token",
        "revoke",
        ids[0],
        "--db",
        dir.db().to_str().unwrap(),
    ]);
    assert_eq!(code, 2);
    assert!(err.contains("no token has the identifier"), "{err}");
}

#[test]
fn token_list_shows_no_secret_and_the_server_logs_none() {
    let dir = TempDir::new();
    let token = add_token(&dir.db(), "erin", true);
    assert_eq!(token.len(), 64, "256 random bits as hex");
    assert!(token.bytes().all(|b| b.is_ascii_hexdigit()));
    let (code, out, _) = run_cli(&["token", "list", "--db", dir.db().to_str().unwrap()]);
    assert_eq!(code, 0);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 2, "{out}");
    let cols: Vec<&str> = lines[1].split_whitespace().collect();
    assert_eq!(cols.len(), 5, "{out}");
    assert_eq!(
        (cols[0].len(), cols[1], cols[2], cols[4]),
        (8, "erin", "read", "never")
    );
    assert!(cols[3].ends_with('Z') && cols[3].starts_with("20"), "{out}");
    // Neither the token nor any 8 characters of it, nor of its SHA-256, is shown.
    let hash = sha256_hex(&token);
    for secret in [&token, &hash] {
        for w in secret.as_bytes().windows(8) {
            assert!(
                !out.contains(std::str::from_utf8(w).unwrap()) || cols[0].as_bytes() == w,
                "list shows a secret: {out}"
            );
        }
    }
    let s = TestServer::start(&dir.db());
    assert_eq!(list_as(&s, &token).0, 200);
    assert_eq!(list_as(&s, &format!("{token}0")).0, 401);
    // Both requests' access lines are in.
    let log = s.log_when(|log| log.matches("GET /plants ").count() >= 2);
    assert!(
        !log.contains(&token) && !log.contains(&hash),
        "a secret reached the log"
    );
    // Nor the hash's bytes as a list of numbers (a database client's debug line).
    let bytes: Vec<u8> = (0..8)
        .map(|i| u8::from_str_radix(&hash[2 * i..2 * i + 2], 16).unwrap())
        .collect();
    let listed = format!("{bytes:?}");
    assert!(
        !log.contains(listed.trim_end_matches(']')),
        "the token's hash reached the log as bytes"
    );
}

fn sha256_hex(s: &str) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(s.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[test]
fn malformed_authorization_is_401_never_500() {
    let s = TestServer::memory();
    let long = format!("Bearer {}", "a".repeat(16 * 1024));
    let cases = [
        TOKEN.to_string(),               // no scheme
        format!("Basic {TOKEN}"),        // wrong scheme
        "Bearer".to_string(),            // no token
        "Bearer ".to_string(),           // empty token
        format!("Bearer  {TOKEN}"),      // two spaces
        format!("Bearer {TOKEN}x "),     // wrong token, trailing space
        format!("Bearer {TOKEN} extra"), // two words
        format!("Bearer \"{TOKEN}\""),   // quoted
        long,                            // very long
    ];
    for value in &cases {
        let r = s.send("GET", "/plants", &[("Authorization", value)], None);
        assert_eq!(r.status, 401, "{:.40}: {}", value, r.text());
        assert!(
            r.header("WWW-Authenticate")
                .unwrap()
                .starts_with(r#"Bearer realm="plant-store""#)
        );
    }
    // The scheme is case-insensitive, and blanks around the whole value are not part of
    // it (RFC 9110 5.5; the HTTP layer strips them).
    for value in [
        format!("bearer {TOKEN}"),
        format!("BEARER {TOKEN}"),
        format!("Bearer {TOKEN} "),
    ] {
        let r = s.send("GET", "/plants", &[("Authorization", &value)], None);
        assert_eq!(r.status, 200, "{value:?}");
    }
}

#[test]
fn principal_names_are_checked_with_exit_status_2() {
    let dir = TempDir::new();
    let db = dir.db();
    for bad in [
        "",
        "-lead",
        "has space",
        "slash/y",
        "ümlaut",
        &"p".repeat(65),
    ] {
        let (code, out, err) = run_cli(&["token", "add", bad, "--db", db.to_str().unwrap()]);
        assert_eq!(code, 2, "{bad:?}");
        assert!(
            out.is_empty() && err.contains("invalid principal"),
            "{bad:?}: {err}"
        );
    }
    assert!(!db.exists(), "an invalid principal created the database");
    let (code, _, err) = run_cli(&["token", "add", "x", "--db", ":memory:"]);
    assert_eq!(code, 1);
    assert!(err.contains("database file"), "{err}");
}

/// A mistyped `--db` is not a new, empty database for any command but `serve`: they say
/// so and exit 2, creating nothing; `token add --create` creates the file.
#[test]
fn token_list_and_revoke_on_a_missing_file_exit_2_and_create_nothing() {
    let dir = TempDir::new();
    let typo = dir.0.join("typo.db");
    let typo = typo.to_str().unwrap();
    for args in [
        &["token", "list", "--db", typo][..],
        &["token", "revoke", "3f9a1c07", "--db", typo],
        &["token", "add", "fay", "--db", typo],
        &[
            "webhook",
            "add",
            "fay",
            "http://127.0.0.1:9/h",
            "--db",
            typo,
        ],
        &["webhook", "list", "--db", typo],
    ]
    .into_iter()
    .filter(has_command)
    {
        let (code, out, err) = run_cli(args);
        assert_eq!(code, 2, "{args:?}: {out}{err}");
        assert!(
            err.contains("no database at") && err.contains("--create"),
            "{err}"
        );
        assert!(
            !std::path::Path::new(typo).exists(),
            "{args:?} created the file"
        );
    }
    add_token(std::path::Path::new(typo), "fay", false);
    let (code, out, _) = run_cli(&["token", "list", "--db", typo]);
    assert_eq!(code, 0);
    assert!(out.contains("fay"), "{out}");
}

/// A token made with an expiry works until then and is 401 after, with the reason in
/// `WWW-Authenticate`; an expiry in the past is refused at `token add` with exit 2.
#[test]
fn a_token_expires_mid_test_and_a_past_expiry_is_refused() {
    let dir = TempDir::new();
    let db = dir.db();
    let db_arg = db.to_str().unwrap();
    // Two seconds: expiry is kept in whole seconds, so one could already be over by the
    // first request if the token were made at the very end of a second.
    let (code, out, err) = run_cli(&[
        "token",
        "add",
        "gil",
        "--expires-in",
        "2s",
        "--create",
        "--db",
        db_arg,
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains(", expires 20"), "{out}");
    let token = out.lines().last().unwrap().to_owned();
    let s = TestServer::start(&db);
    let made = Instant::now();
    assert_eq!(s.post_as(&token, r#"{"id":1,"name":"before"}"#).status, 200);
    std::thread::sleep(Duration::from_secs(3).saturating_sub(made.elapsed()));
    let r = s.send(
        "GET",
        "/plants",
        &[("Authorization", &bearer(&token))],
        None,
    );
    assert_eq!(r.status, 401);
    assert_eq!(
        r.header("WWW-Authenticate"),
        Some(
            r#"Bearer realm="plant-store", error="invalid_token", error_description="the token has expired""#
        )
    );
    assert_eq!(
        r.text(),
        r#"{"error":401,"message":"the bearer token has expired"}"#
    );
    // A write with it too, whoever checks the token (on PostgreSQL it had been found
    // able to write), and nothing is written.
    for req in [
        Req::new("POST", "/plants")
            .token(&token)
            .json(r#"{"id":2,"name":"after"}"#),
        Req::new("DELETE", "/plants/1").token(&token),
    ] {
        let r = s.request(&req);
        assert_eq!(
            (r.status, r.text()),
            (
                401,
                r#"{"error":401,"message":"the bearer token has expired"}"#.into()
            )
        );
    }
    let fresh = add_token(&db, "gil", true);
    assert_eq!(list_as(&s, &fresh), (200, r#"[{"name":"before"}]"#.into()));
    let (code, out, _) = run_cli(&["token", "list", "--db", db_arg]);
    assert_eq!(code, 0);
    assert!(out.lines().next().unwrap().ends_with("expires"), "{out}");
    assert!(out.lines().nth(1).unwrap().contains("gil"), "{out}");
    for past in [
        &["--expires-at", "2001-01-01T00:00:00Z"][..],
        &["--expires-in", "0d"],
        &["--expires-in", "soon"],
    ] {
        let mut args = vec!["token", "add", "hal", "--db", db_arg];
        args.extend_from_slice(past);
        let (code, _, err) = run_cli(&args);
        assert_eq!(code, 2, "{past:?}: {err}");
    }
    let (_, out, _) = run_cli(&["token", "list", "--db", db_arg]);
    assert!(!out.contains("hal"), "a refused token was stored: {out}");
}

/// `--rate-limit`: a token that sends three times its burst, over several connections,
/// gets 429 with `Retry-After` past its budget and nothing it sent then is done; another
/// token is unaffected; once the budget refills it is served again.
#[test]
fn a_rate_limited_token_gets_429_past_its_budget_and_others_do_not() {
    let dir = TempDir::new();
    let limited = add_token(&dir.db(), "ida", false);
    let other = add_token(&dir.db(), "jo", false);
    let s = Launch::new(&dir.db()).arg("--rate-limit 5/s").start();
    let mut statuses = Vec::new();
    let started = Instant::now();
    for i in 0..15 {
        // A new connection each time: the budget belongs to the token.
        let body = format!(r#"{{"id":{i},"name":"p{i}"}}"#);
        let r = s.post_as(&limited, &body);
        assert_eq!(r.header("RateLimit-Policy"), Some(r#""default";q=5;w=1"#));
        if r.status == 429 {
            assert_eq!(r.header("Retry-After"), Some("1"));
            assert_eq!(r.header("RateLimit"), Some(r#""default";r=0;t=1"#));
            assert_eq!(
                r.text(),
                r#"{"error":429,"message":"this token's request budget is spent; retry in 1 s"}"#
            );
        }
        statuses.push(r.status);
    }
    let served = statuses.iter().filter(|&&st| st == 200).count();
    // The burst, and what refilled (5 a second) while the 15 requests ran.
    let refilled = (started.elapsed().as_secs_f64() * 5.0).ceil() as usize;
    assert!(
        served >= 5 && served <= 5 + refilled && served < 15,
        "{statuses:?} in {:?}",
        started.elapsed()
    );
    assert!(statuses[..5].iter().all(|&st| st == 200), "{statuses:?}");
    assert_eq!(
        statuses.iter().filter(|&&st| st == 429).count(),
        15 - served
    );
    let listed = s.send(
        "GET",
        "/plants",
        &[("Authorization", &bearer(&other))],
        None,
    );
    assert_eq!(listed.status, 200, "another token is unaffected");
    assert_eq!(listed.header("RateLimit"), Some(r#""default";r=4;t=1"#));
    // Not a stand-in for a state: the budget refills with real time, which is what is tested.
    std::thread::sleep(Duration::from_millis(1100));
    let r = s.send(
        "GET",
        "/plants",
        &[("Authorization", &bearer(&limited))],
        None,
    );
    assert_eq!(r.status, 200, "served again once the budget refilled");
    assert_eq!(names(&r.text()).len(), served, "no refused create was done");
}

/// Only a valid token gets a budget: 10,000 made-up tokens cost the server no memory.
#[test]
fn ten_thousand_unknown_tokens_do_not_grow_the_server() {
    if native_only(EMULATED_TCP_INFO) {
        return;
    }
    let dir = TempDir::new();
    add_token(&dir.db(), "kit", false);
    let s = Launch::new(&dir.db()).arg("--rate-limit 100/s").start();
    let send = |from: usize, n: usize| {
        let mut c = s.connect();
        let mut batch = Vec::new();
        for i in from..from + n {
            batch.extend(
                Req::get("/plants")
                    .token(&format!("made-up-{i}"))
                    .keep_alive()
                    .bytes(),
            );
        }
        c.write_all(&batch).unwrap();
        for _ in 0..n {
            assert_eq!(read_response(&mut c).unwrap().status, 401);
        }
    };
    send(0, 1000); // the allocator's working set settles
    let before = s.proc_status("VmRSS");
    for k in 0..10 {
        send(1000 + k * 1000, 1000);
    }
    let after = s.proc_status("VmRSS");
    assert!(
        after < before + 1024,
        "RSS grew from {before} to {after} kB over 10,000 unknown tokens"
    );
}

/// A write's token is answered alike however it is checked: before the write, or by the
/// write's own commit (PostgreSQL, one round trip), with and without `--rate-limit` (where
/// a token is folded only once it has a budget). The same statuses, bodies and headers, a
/// refused token's checks before the request's, nothing written for a refused write, the
/// rate-limit headers only for a token found valid, and each access line's principal.
#[test]
fn a_write_s_token_is_answered_alike_however_it_is_checked() {
    for limit in [None, Some("--rate-limit 100/s")] {
        let dir = TempDir::new();
        let db = dir.db();
        let ann = add_token(&db, "ann", false);
        let reads = add_token(&db, "ann", true);
        let gone = add_token(&db, "zed", false);
        let unknown = "0".repeat(64);
        let mut launch = Launch::new(&db);
        if let Some(flag) = limit {
            launch = launch.arg(flag);
        }
        let s = launch.start();
        // Each token is seen valid once (so it has a budget), then `gone` is revoked.
        for t in [&ann, &reads, &gone] {
            assert_eq!(list_as(&s, t), (200, "[]".into()));
        }
        revoke_token_of(&db, "zed");

        let post = |t: &str, body: &str| Req::new("POST", "/plants").token(t).json(body);
        let delete = |t: &str, id: &str| Req::new("DELETE", &format!("/plants/{id}")).token(t);
        let scope = err(
            403,
            "this token may only read; writing needs a read-write token",
        );
        let invalid = err(401, "the bearer token is unknown or revoked");
        let s403: &[(&str, &str)] = &[("WWW-Authenticate", SCOPE)];
        let s401: &[(&str, &str)] = &[("WWW-Authenticate", INVALID)];
        let bad_body = err(
            400,
            "invalid body: EOF while parsing an object at line 1 column 1",
        );
        let rows: Vec<Row> = vec![
            (
                post(&ann, r#"{"id":1,"name":"a"}"#),
                200,
                &[],
                r#"{"name":"a"}"#.into(),
            ),
            (
                post(&ann, r#"{"id":1,"name":"b"}"#),
                409,
                &[],
                err(409, "a plant with id 1 already exists"),
            ),
            (post(&ann, "{"), 400, &[], bad_body.clone()),
            (
                post(&reads, r#"{"id":2,"name":"r"}"#),
                403,
                s403,
                scope.clone(),
            ),
            (post(&reads, "{"), 403, s403, scope.clone()),
            (delete(&reads, "1"), 403, s403, scope.clone()),
            (
                post(&gone, r#"{"id":3,"name":"g"}"#),
                401,
                s401,
                invalid.clone(),
            ),
            (post(&gone, "{"), 401, s401, invalid.clone()),
            (delete(&gone, "1"), 401, s401, invalid.clone()),
            (
                post(&unknown, r#"{"id":4,"name":"u"}"#),
                401,
                s401,
                invalid.clone(),
            ),
            (delete(&unknown, "x"), 401, s401, invalid.clone()),
            (
                delete(&ann, "x"),
                400,
                &[],
                err(
                    400,
                    "the id in the path must be a signed 64-bit integer, not `x`",
                ),
            ),
            (
                delete(&ann, "99"),
                404,
                &[],
                err(404, "no plant with id 99"),
            ),
            (delete(&ann, "1"), 204, &[], String::new()),
            (
                post(&ann, r#"{"id":5,"name":"e"}"#),
                200,
                &[],
                r#"{"name":"e"}"#.into(),
            ),
        ];
        check(&s, &rows);
        // Nothing refused was written, for anyone.
        assert_eq!(list_as(&s, &ann), (200, r#"[{"name":"e"}]"#.into()));
        assert_eq!(list_as(&s, &reads), (200, r#"[{"name":"e"}]"#.into()));
        // The rate-limit headers go with a token found valid, never with one refused.
        for (req, limited) in [
            (post(&ann, r#"{"id":6,"name":"f"}"#), limit.is_some()),
            (post(&reads, r#"{"id":7,"name":"g"}"#), limit.is_some()),
            (post(&gone, r#"{"id":8,"name":"h"}"#), false),
        ] {
            let r = s.request(&req);
            assert_eq!(
                r.header("RateLimit-Policy").is_some(),
                limited,
                "{limit:?} {}",
                r.status
            );
            assert_eq!(
                r.header("RateLimit").is_some(),
                limited,
                "{limit:?} {}",
                r.status
            );
        }
        // One access line per request, with the principal its token named (a read
        // token's too), `-` where none was found.
        let expected = [
            ("POST /plants 200 ", " ann", 3),
            ("POST /plants 409 ", " ann", 1),
            ("POST /plants 400 ", " ann", 1),
            ("POST /plants 403 ", " ann", 3),
            ("DELETE /plants/1 403 ", " ann", 1),
            ("POST /plants 401 ", " -", 4),
            ("DELETE /plants/1 401 ", " -", 1),
            ("DELETE /plants/x 401 ", " -", 1),
            ("DELETE /plants/x 400 ", " ann", 1),
            ("DELETE /plants/99 404 ", " ann", 1),
            ("DELETE /plants/1 204 ", " ann", 1),
        ];
        let total: usize = expected.iter().map(|e| e.2).sum();
        let log = s.log_when(|log| {
            log.lines()
                .filter(|l| l.contains(" /plants/") || l.contains(" /plants "))
                .filter(|l| !l.contains("GET "))
                .count()
                >= total
        });
        for (what, principal, n) in expected {
            let found = log
                .lines()
                .filter(|l| l.contains(what) && l.ends_with(principal))
                .count();
            assert_eq!(found, n, "{what}…{principal} with {limit:?} in\n{log}");
        }
        assert!(
            !log.contains(&ann) && !log.contains(&gone),
            "a token reached the log"
        );
    }
}

/// A token revoked after it was found valid (so it has a budget, and on PostgreSQL its
/// writes went to the commit) is 401 on every later write, never 429, and without
/// rate-limit headers: a refused token is never charged.
#[test]
fn a_revoked_token_is_401_on_every_write_never_429() {
    let dir = TempDir::new();
    let db = dir.db();
    let zed = add_token(&db, "zed", false);
    let s = Launch::new(&db)
        .arg("--rate-limit 1/s")
        .arg("--rate-burst 3")
        .start();
    let post = |id: i64| {
        let body = format!(r#"{{"id":{id},"name":"z"}}"#);
        s.request(&Req::new("POST", "/plants").token(&zed).json(&body))
    };
    assert_eq!(post(1).status, 200);
    revoke_token_of(&db, "zed");
    for id in 2..8 {
        let r = post(id);
        assert_eq!(r.status, 401, "write {id}: {}", r.text());
        assert_eq!(r.header("RateLimit"), None, "write {id}");
        assert_eq!(r.header("Retry-After"), None, "write {id}");
    }
}

/// A token revoked while writes of it are on their way: however many arrive at once, each
/// is 401 without rate-limit headers, never 429 (on PostgreSQL the first of them go to the
/// commit with the token and are charged before it refuses them).
#[test]
fn writes_of_a_revoked_token_arriving_at_once_are_each_401() {
    let dir = TempDir::new();
    let db = dir.db();
    let zed = add_token(&db, "zed", false);
    let s = Launch::new(&db)
        .arg("--rate-limit 1/m")
        .arg("--rate-burst 4")
        .start();
    let post = |id: i64| {
        let body = format!(r#"{{"id":{id},"name":"z"}}"#);
        Req::new("POST", "/plants").token(&zed).json(&body)
    };
    assert_eq!(s.request(&post(1)).status, 200);
    revoke_token_of(&db, "zed");
    let at_once = std::sync::Arc::new(std::sync::Barrier::new(12));
    let threads: Vec<_> = (2..14)
        .map(|id| {
            let (addr, req, at_once) = (s.addr.clone(), post(id), at_once.clone());
            std::thread::spawn(move || {
                at_once.wait();
                req.send_to(&addr).unwrap()
            })
        })
        .collect();
    for t in threads {
        let r = t.join().unwrap();
        assert_eq!(r.status, 401, "{}", r.text());
        assert_eq!(r.header("RateLimit"), None);
    }
}
