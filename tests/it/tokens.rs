//! Tokens, principals and scopes, through the binary's subcommands and a running server.
//! Expiry, the rate limit and revoked tokens under load are in `tokens_limits`.

use crate::support::*;

pub(crate) const SCOPE: &str = r#"Bearer realm="plant-store", error="insufficient_scope""#;
pub(crate) const INVALID: &str = r#"Bearer realm="plant-store", error="invalid_token""#;

pub(crate) fn list_as(s: &TestServer, token: &str) -> (u16, String) {
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
