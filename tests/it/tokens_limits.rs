//! Tokens against time and load: expiry mid-test and a past expiry refused, the rate
//! limit, unknown tokens that do not grow the server, a write's token answered alike
//! however it is checked, and revoked tokens that are 401 and never 429.

use crate::support::*;
use crate::tokens::{INVALID, SCOPE, list_as};
use std::io::Write;
use std::time::{Duration, Instant};

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
