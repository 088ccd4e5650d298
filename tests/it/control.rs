//! Test control (docs/testing.md): `--test-control` and its door, `--seed`, tokens made
//! at run time, reset and snapshots (the journal: `control_journal.rs`). SQLite only: with PostgreSQL the start
//! is refused (checked here on any backend, since the refusal needs no database).

use crate::support::*;
use serde_json::{Value, json};

pub(crate) const CONTROL: &str = "control-token-0123456789";

pub(crate) fn controlled(db: &str) -> Launch<'_> {
    Launch {
        db,
        ..Launch::memory()
    }
    .arg("--test-control")
    .env("PLANT_STORE_CONTROL_TOKEN", CONTROL)
}

/// A control request as the control token.
pub(crate) fn ctl(method: &str, path: &str) -> Req {
    Req::new(method, path).token(CONTROL)
}

/// Writes a seed file into `dir` and returns its path.
pub(crate) fn seed_file(dir: &TempDir, text: &str) -> String {
    let path = dir.0.join(format!("seed-{}.json", text.len()));
    std::fs::write(&path, text).unwrap();
    path.to_str().unwrap().to_owned()
}

/// The token of alice in `alice_seed`.
pub(crate) const ALICE: &str = "alice-token-0123456789abcdef";

/// A seed file in `dir` with alice's token (`ALICE`), and her plant 1 when `plant`.
pub(crate) fn alice_seed(dir: &TempDir, plant: bool) -> String {
    let plants = match plant {
        true => r#","plants":{"alice":[{"id":1,"name":"Monstera"}]}"#,
        false => "",
    };
    let tokens = format!(r#"{{"tokens":[{{"token":"{ALICE}","principal":"alice"}}]"#);
    seed_file(dir, &format!("{tokens}{plants}}}"))
}

/// `POST /_control/snapshots`: the new snapshot's id.
pub(crate) fn snapshot(s: &TestServer) -> String {
    let r = s.request(&ctl("POST", "/_control/snapshots"));
    assert_eq!(r.status, 201, "{}", r.text());
    r.json()["id"].as_str().unwrap().to_owned()
}

/// `plant-store serve ARGS` with `env`: (exit code, stderr) of a start that is refused,
/// or the server killed once it listens (-1).
pub(crate) fn serve_refused(args: &[&str], env: &[(&str, &str)]) -> (i32, String) {
    use std::io::BufRead;
    use std::process::Stdio;
    let mut child = plant_store()
        .arg("serve")
        .args(["--addr", "127.0.0.1:0"])
        .args(args)
        .env_remove("PLANT_STORE_TOKEN")
        .env_remove("PLANT_STORE_CONTROL_TOKEN")
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The first line, or nothing: a start that is refused writes none.
    let mut first = String::new();
    let _ = std::io::BufReader::new(child.stdout.take().unwrap()).read_line(&mut first);
    if first.starts_with("listening on") {
        let _ = child.kill();
    }
    let out = child.wait_with_output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `GET /plants` as `token`: its body, once 200.
pub(crate) fn list_as(s: &TestServer, token: &str) -> String {
    let r = s.request(&Req::get("/plants").token(token));
    assert_eq!(r.status, 200, "{}", r.text());
    r.text()
}

/// `POST /plants` as `token` (not the test token).
pub(crate) fn create_as(token: &str, body: &str) -> Req {
    Req::new("POST", "/plants").token(token).json(body)
}

pub(crate) fn mint(s: &TestServer, body: &str) -> Value {
    let r = s.request(&ctl("POST", "/_control/tokens").json(body));
    assert_eq!(r.status, 201, "{}", r.text());
    r.json()
}

#[test]
fn without_test_control_every_control_path_is_404() {
    let s = Launch::memory()
        .env("PLANT_STORE_CONTROL_TOKEN", CONTROL)
        .start();
    for (method, path) in [
        ("POST", "/_control/reset"),
        ("POST", "/_control/tokens"),
        ("GET", "/_control/requests"),
        ("DELETE", "/_control/snapshots/snap_1"),
    ] {
        check(
            &s,
            &[(
                ctl(method, path),
                404,
                &[],
                err(404, &format!("no such path: {path}")),
            )],
        );
    }
}

#[test]
fn no_start_up_warning_that_only_cli_tokens_are_accepted_when_others_are() {
    if sqlite_only("test control and seeds are SQLite's") {
        return;
    }
    let dir = TempDir::new();
    let seed = seed_file(
        &dir,
        r#"{"tokens":[{"token":"alice-seeded-token","principal":"alice"}]}"#,
    );
    let seeded = Launch::memory()
        .token(None)
        .arg(&format!("--seed {seed}"))
        .start();
    let mut servers = vec![(seeded, "alice-seeded-token".to_owned())];
    if !without(Feature::TestControl) {
        let controlled = controlled(":memory:").token(None).start();
        let minted = mint(&controlled, r#"{"principal":"bob"}"#);
        servers.push((controlled, minted["token"].as_str().unwrap().to_owned()));
    }
    for (s, token) in &servers {
        assert_eq!(list_as(s, token), "[]");
        // Logged after the start-up warnings, by the same thread.
        let log = s.log_when(|l| l.contains(" workers, at most "));
        assert!(!log.contains("PLANT_STORE_TOKEN is not set"), "{log}");
    }
}

#[test]
fn turning_it_on_needs_a_control_token_of_16_bytes_and_sqlite() {
    let dir = TempDir::new();
    let seed = seed_file(&dir, "{}");
    // A build without PostgreSQL refuses the URL itself first.
    let no_postgres = "--db: cannot use a PostgreSQL URL: this build has no PostgreSQL support";
    let (code, e) = serve_refused(
        &["--db", "postgres://nowhere.invalid/x", "--seed", &seed],
        &[],
    );
    assert_eq!(code, 2, "{e}");
    assert!(
        e.contains("--seed needs SQLite") || e.contains(no_postgres),
        "{e}"
    );
    // Without the feature, `--test-control` is refused whole (options.rs).
    if without(Feature::TestControl) {
        return;
    }
    let (code, e) = serve_refused(&["--db", ":memory:", "--test-control"], &[]);
    assert_eq!(code, 2, "{e}");
    assert!(
        e.contains("--test-control needs PLANT_STORE_CONTROL_TOKEN"),
        "{e}"
    );
    let short = [("PLANT_STORE_CONTROL_TOKEN", "fifteen-bytes!!")];
    let (code, e) = serve_refused(&["--db", ":memory:", "--test-control"], &short);
    assert_eq!(code, 2, "{e}");
    assert!(e.contains("must be at least 16 bytes long"), "{e}");
    // One no request could carry, or one that is also the environment token's: refused,
    // and never shown.
    let spaced = "has space in it 123456";
    let (code, e) = serve_refused(
        &["--db", ":memory:", "--test-control"],
        &[("PLANT_STORE_CONTROL_TOKEN", spaced)],
    );
    assert_eq!(code, 2, "{e}");
    assert!(e.contains("is not a usable bearer token"), "{e}");
    assert!(!e.contains(spaced), "{e}");
    let same = [
        ("PLANT_STORE_CONTROL_TOKEN", CONTROL),
        ("PLANT_STORE_TOKEN", CONTROL),
    ];
    let (code, e) = serve_refused(&["--db", ":memory:", "--test-control"], &same);
    assert_eq!(code, 2, "{e}");
    assert!(e.contains("must differ from PLANT_STORE_TOKEN"), "{e}");
    assert!(!e.contains(CONTROL), "{e}");
    // The variable turns it on as the flag does.
    let on = [("PLANT_STORE_TEST_CONTROL", "1")];
    let (code, e) = serve_refused(&["--db", ":memory:"], &on);
    assert_eq!(code, 2, "{e}");
    let ok = [("PLANT_STORE_CONTROL_TOKEN", CONTROL)];
    let (code, e) = serve_refused(
        &["--db", "postgres://nowhere.invalid/x", "--test-control"],
        &ok,
    );
    assert_eq!(code, 2, "{e}");
    assert!(e.contains("needs SQLite") || e.contains(no_postgres), "{e}");
    // On, it says so in the log.
    if sqlite_only("test control is SQLite's") {
        return;
    }
    let s = controlled(":memory:").start();
    s.log_when(|l| l.contains("test control is on"));
    assert!(
        !s.log().contains(CONTROL),
        "the log holds the control token"
    );
}

#[test]
fn the_door_is_route_then_control_token_and_the_control_token_is_no_principal() {
    if no_test_control() {
        return;
    }
    let s = controlled(":memory:").start();
    let missing = r#"Bearer realm="plant-store""#;
    let invalid = r#"Bearer realm="plant-store", error="invalid_token""#;
    check(
        &s,
        &[
            // The route first: 404 and 405 whatever the token.
            (
                Req::new("POST", "/_control/nothing"),
                404,
                &[],
                err(404, "no such path: /_control/nothing"),
            ),
            (
                Req::new("GET", "/_control/reset"),
                405,
                &[("Allow", "POST")],
                err(405, "method not allowed here; allowed: POST"),
            ),
            (
                Req::new("PUT", "/_control/requests"),
                405,
                &[("Allow", "GET, DELETE")],
                err(405, "method not allowed here; allowed: GET, DELETE"),
            ),
            (
                Req::new("GET", "/_control/snapshots/snap_1"),
                405,
                &[("Allow", "DELETE")],
                err(405, "method not allowed here; allowed: DELETE"),
            ),
            // Then the control token.
            (
                Req::new("POST", "/_control/reset"),
                401,
                &[("WWW-Authenticate", missing)],
                err(401, "an Authorization: Bearer header is required"),
            ),
            (
                Req::new("POST", "/_control/reset").token(TOKEN),
                401,
                &[("WWW-Authenticate", invalid)],
                err(401, "the bearer token is unknown or revoked"),
            ),
            // The control token opens nothing else.
            (
                Req::get("/plants").token(CONTROL),
                401,
                &[("WWW-Authenticate", invalid)],
                err(401, "the bearer token is unknown or revoked"),
            ),
            (
                Req::get("/events").token(CONTROL),
                401,
                &[("WWW-Authenticate", invalid)],
                err(401, "the bearer token is unknown or revoked"),
            ),
            (
                create_as(CONTROL, r#"{"id":1,"name":"x"}"#),
                401,
                &[("WWW-Authenticate", invalid)],
                err(401, "the bearer token is unknown or revoked"),
            ),
        ],
    );
}

#[test]
fn tokens_made_at_run_time_work_on_memory_and_bad_bodies_name_the_member() {
    if no_test_control() {
        return;
    }
    let s = controlled(":memory:").start();
    let t = mint(&s, r#"{"principal":"p-42"}"#);
    let token = t["token"].as_str().unwrap().to_owned();
    assert_eq!(token.len(), 64, "{t}");
    let id = t["id"].as_str().unwrap().to_owned();
    assert!(
        id.len() == 8 && id.bytes().all(|b| b.is_ascii_hexdigit()),
        "{t}"
    );
    assert_eq!(
        t,
        json!({"token": token, "id": id, "principal": "p-42", "scope": "read-write",
               "expires_at": null})
    );
    let r = s.request(&create_as(&token, r#"{"id":7,"name":"Aloe"}"#));
    assert_eq!((r.status, r.text()), (200, r#"{"name":"Aloe"}"#.into()));
    // A read token reads, and may not write.
    let read = mint(
        &s,
        r#"{"principal":"p-42","scope":"read","expires_in":"15m"}"#,
    );
    assert_eq!(read["scope"], "read");
    let at = read["expires_at"].as_str().unwrap();
    assert!(at.len() == 20 && at.ends_with('Z'), "{at}");
    let read = read["token"].as_str().unwrap().to_owned();
    assert_eq!(
        s.request(&Req::get("/plants").token(&read)).text(),
        r#"[{"name":"Aloe"}]"#
    );
    assert_eq!(
        s.request(&create_as(&read, r#"{"id":8,"name":"x"}"#))
            .status,
        403
    );
    // Each form of DURATION.
    for d in ["90", "90s", "15m", "2h", "7d"] {
        mint(&s, &format!(r#"{{"principal":"p","expires_in":"{d}"}}"#));
    }
    let bad = |body: &str, message: &str| {
        (
            ctl("POST", "/_control/tokens").json(body),
            400,
            &[][..],
            err(400, message),
        )
    };
    check(
        &s,
        &[
            bad("{}", "principal: is required"),
            bad(r#"{"principal":7}"#, "principal: must be a string"),
            bad(
                r#"{"principal":"p","scope":"admin"}"#,
                "scope: must be `read` or `read-write`",
            ),
            bad(
                r#"{"principal":"p","expires_in":"1w"}"#,
                "expires_in: must be a duration from 1s to 3650d (such as 90, 90s, 15m, 2h, 7d), not `1w`",
            ),
            bad(
                r#"{"principal":"p","expires_in":"0s"}"#,
                "expires_in: must be a duration from 1s to 3650d (such as 90, 90s, 15m, 2h, 7d), not `0s`",
            ),
            bad(
                r#"{"principal":"p","expires_in":60}"#,
                "expires_in: must be a string such as \"15m\"",
            ),
            bad(
                r#"{"principal":"p","owner":"q"}"#,
                "owner: unknown member (known: principal, scope, expires_in, expires_at, token)",
            ),
            bad("[]", "the body must be a JSON object"),
            (
                ctl("POST", "/_control/tokens").body(b"{}"),
                415,
                &[],
                err(
                    415,
                    "the body must be sent as Content-Type: application/json",
                ),
            ),
        ],
    );
    let e = s
        .request(&ctl("POST", "/_control/tokens").json(r#"{"principal":"bad name"}"#))
        .json();
    assert_eq!(e["error"], 400);
    assert!(
        e["message"].as_str().unwrap().starts_with("principal: "),
        "{e}"
    );
    let e = s.request(&ctl("POST", "/_control/tokens").json("{")).json();
    assert!(
        e["message"].as_str().unwrap().starts_with("invalid body: "),
        "{e}"
    );
}

#[test]
fn minted_principals_in_parallel_never_see_each_other() {
    if no_test_control() {
        return;
    }
    let s = controlled(":memory:").start();
    std::thread::scope(|scope| {
        for t in 0..8 {
            let s = &s;
            scope.spawn(move || {
                for n in 0..5 {
                    let principal = format!("t{t}-{n}");
                    let me = mint(s, &format!(r#"{{"principal":"{principal}"}}"#));
                    let token = me["token"].as_str().unwrap();
                    for id in 1..=3 {
                        let body = format!(r#"{{"id":{id},"name":"{principal}-{id}"}}"#);
                        assert_eq!(s.request(&create_as(token, &body)).status, 200);
                    }
                    let want: Vec<String> = (1..=3).map(|id| format!("{principal}-{id}")).collect();
                    let listed = s.request(&Req::get("/plants").token(token)).text();
                    assert_eq!(names(&listed), want);
                    let events = s.request(&Req::get("/events?limit=10").token(token)).json();
                    let seqs: Vec<i64> = events
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|e| e["seq"].as_i64().unwrap())
                        .collect();
                    assert_eq!(seqs, [1, 2, 3]);
                }
            });
        }
    });
}
