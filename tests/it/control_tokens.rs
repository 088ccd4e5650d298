//! Tokens at run time, part 2 (docs/control.md, "Tokens at run time"): a chosen value,
//! `expires_at`, the token's id in the 201 as `token list` shows it, and a token that
//! would expire at once. SQLite only (test control is).

use crate::control::{CONTROL, controlled, ctl, mint};
use crate::support::*;
use serde_json::json;

/// `POST /_control/tokens` with `body`: its status and message, when refused.
fn minting(s: &TestServer, body: &str) -> (u16, String) {
    let r = s.request(&ctl("POST", "/_control/tokens").json(body));
    (
        r.status,
        r.json()["message"].as_str().unwrap_or("").to_owned(),
    )
}

#[test]
fn a_chosen_token_is_stored_listed_and_never_one_already_known() {
    if no_test_control() {
        return;
    }
    let dir = TempDir::new();
    let db = dir.db();
    let s = controlled(db.to_str().unwrap()).start();
    const CHOSEN: &str = "my-chosen-token-0123.~+/==";
    let t = mint(
        &s,
        &json!({"principal":"chosen","token":CHOSEN,"expires_at":"2999-01-31T12:00:00+01:00"})
            .to_string(),
    );
    let id = t["id"].as_str().unwrap().to_owned();
    assert_eq!(
        t,
        json!({"token":CHOSEN,"id":id,"principal":"chosen","scope":"read-write",
               "expires_at":"2999-01-31T11:00:00Z"})
    );
    assert_eq!(s.request(&Req::get("/plants").token(CHOSEN)).status, 200);
    let (code, listing, err) = run_cli(&["token", "list", "--db", db.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let line = listing
        .lines()
        .find(|l| l.starts_with(&id))
        .unwrap_or_else(|| panic!("no {id} in\n{listing}"));
    assert_eq!(line.split_whitespace().nth(1), Some("chosen"), "{line}");
    assert!(line.ends_with("2999-01-31T11:00:00Z"), "{line}");
    let taken = |token: &str| json!({"principal":"other","token":token}).to_string();
    for (body, message) in [
        (taken(CHOSEN), "token: this token is already stored"),
        (
            taken(CONTROL),
            "token: that is the control token; choose another",
        ),
        (
            taken(TOKEN),
            "token: that is PLANT_STORE_TOKEN's token; choose another",
        ),
    ] {
        assert_eq!(minting(&s, &body), (409, message.to_owned()), "{body}");
    }
    let malformed = "token: must be 16 to 256 token68 characters (letters, digits, -._~+/, \
                     then = padding)";
    for token in [
        "fifteen-chars15".to_owned(),
        "a".repeat(257),
        "has a space in it here".to_owned(),
        "padding=in-the-middle0".to_owned(),
    ] {
        assert_eq!(
            minting(&s, &taken(&token)),
            (400, malformed.to_owned()),
            "{token}"
        );
    }
    for (body, message) in [
        (
            r#"{"principal":"p","expires_in":"1h","expires_at":"2030-01-01T00:00:00Z"}"#,
            "expires_at: not with `expires_in`; give one of them",
        ),
        (
            r#"{"principal":"p","expires_at":"tomorrow"}"#,
            "expires_at: must be an RFC 3339 time such as 2027-01-31T12:00:00Z",
        ),
        (r#"{"principal":"p","token":7}"#, "token: must be a string"),
    ] {
        assert_eq!(minting(&s, body), (400, message.to_owned()), "{body}");
    }
    // The 256-character token is taken whole; a reset forgets the chosen ones.
    let long = "b".repeat(256);
    assert_eq!(mint(&s, &taken(&long))["token"], long);
    assert_eq!(s.request(&ctl("POST", "/_control/reset")).status, 204);
    assert_eq!(s.request(&Req::get("/plants").token(CHOSEN)).status, 401);
    assert_eq!(mint(&s, &taken(CHOSEN))["principal"], "other");
}

/// An `expires_at` already past makes a token that is expired from the start: the way to
/// test a client's handling of an expired token without moving the clock every parallel
/// test shares.
#[test]
fn a_token_may_be_made_expired_and_expires_at_its_time() {
    if no_test_control() {
        return;
    }
    let s = controlled(":memory:").start();
    let past = mint(
        &s,
        r#"{"principal":"p","expires_at":"2001-01-01T00:00:00Z"}"#,
    );
    let r = s.request(&Req::get("/plants").token(past["token"].as_str().unwrap()));
    assert_eq!(r.text(), err(401, "the bearer token has expired"));
    let later = mint(
        &s,
        r#"{"principal":"p","expires_at":"2100-01-01T00:00:00Z"}"#,
    );
    let later = later["token"].as_str().unwrap().to_owned();
    assert_eq!(s.request(&Req::get("/plants").token(&later)).status, 200);
    let clock = ctl("PUT", "/_control/clock").json(r#"{"now":"2100-01-01T00:00:00Z"}"#);
    assert_eq!(s.request(&clock).status, 200);
    assert_eq!(s.request(&Req::get("/plants").token(&later)).status, 401);
}

/// Was: at the clock's last millisecond, `expires_in` gave a token that expired at
/// 9999-12-31T23:59:59Z, before the 201 that made it came back.
#[test]
fn a_token_minted_in_the_clocks_last_second_is_refused_not_born_expired() {
    if no_test_control() {
        return;
    }
    let s = controlled(":memory:").start();
    let set = |now: &str| {
        let body = json!({"now":now,"frozen":true}).to_string();
        assert_eq!(
            s.request(&ctl("PUT", "/_control/clock").json(&body)).status,
            200
        );
    };
    set("9999-12-31T23:59:59.999Z");
    assert_eq!(
        minting(&s, r#"{"principal":"late","expires_in":"1h"}"#),
        (
            400,
            "expires_in: a token minted now would be expired at once: the clock reads \
             9999-12-31T23:59:59.999Z, and no token expires after 9999-12-31T23:59:59Z"
                .to_owned()
        )
    );
    // A second earlier it lives until that last second.
    set("9999-12-31T23:59:58.999Z");
    let t = mint(&s, r#"{"principal":"late","expires_in":"1h"}"#);
    assert_eq!(t["expires_at"], "9999-12-31T23:59:59Z");
    let token = t["token"].as_str().unwrap();
    assert_eq!(s.request(&Req::get("/plants").token(token)).status, 200);
}

/// An expiry past the last moment a clock reads (9999-12-31T23:59:59.999Z) is refused
/// wherever a token is given one (they share its reading): minted (400), seeded and
/// added with the CLI (exit 2), each naming its member or flag. The last second is kept.
#[test]
fn an_expiry_past_the_clock_s_last_moment_is_refused_by_its_name() {
    if no_test_control() {
        return;
    }
    let s = controlled(":memory:").start();
    let range =
        "must be from 0000-01-01T00:00:00Z to 9999-12-31T23:59:59Z (the times a clock reads)";
    for past in ["9999-12-31T23:59:60Z", "9999-12-31T23:59:59-01:00"] {
        let body = json!({"principal":"p","expires_at":past}).to_string();
        assert_eq!(minting(&s, &body), (400, format!("expires_at: {range}")));
    }
    let last = mint(
        &s,
        r#"{"principal":"p","expires_at":"9999-12-31T23:59:59Z"}"#,
    );
    assert_eq!(last["expires_at"], "9999-12-31T23:59:59Z");
    let dir = TempDir::new();
    let seed = crate::control::seed_file(
        &dir,
        r#"{"tokens":[{"token":"seeded-token-0123456789","principal":"s","expires_at":"9999-12-31T23:59:60Z"}]}"#,
    );
    let (code, stderr) = crate::control::serve_refused(&["--db", ":memory:", "--seed", &seed], &[]);
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains(&format!("tokens[0].expires_at: {range}")),
        "{stderr}"
    );
    let db = dir.db();
    let db = db.to_str().unwrap();
    let (code, _, stderr) = run_cli(&[
        "token",
        "add",
        "cli",
        "--create",
        "--db",
        db,
        "--expires-at",
        "9999-12-31T23:59:60Z",
    ]);
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains(&format!("--expires-at {range}, not `9999-12-31T23:59:60Z`")),
        "{stderr}"
    );
}
