//! docs/testing.md's Rust example, compiled and run: the code between the `guide`
//! markers is the guide's block word for word (`the_guide_shows_this_file` checks).
//! `suite.py` and `suite.test.mjs` beside it are the guide's Python and Node examples,
//! also word for word (checked here), run by `tests/it/control_guide.rs`.

// guide: begin
use plant_store::{Running, Server};
use std::io::{Read, Write};
use std::net::TcpStream;

const CONTROL: &str = "control-token-for-tests-0123";
const SEED: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/guide/seed.json");

/// A server of the test's own, in-process: test control on, the seed loaded before
/// `start` returns, on 127.0.0.1 port 0 and `:memory:` (the defaults).
fn server(test_seed: Option<u64>) -> Running {
    let mut builder = Server::builder().control_token(CONTROL).seed_file(SEED);
    if let Some(n) = test_seed {
        builder = builder.test_seed(n);
    }
    builder.start().expect("the server starts")
}

/// One request, its status and body (HTTP/1.0: the answer ends at the close; any
/// HTTP client does).
fn call(s: &Running, method: &str, path: &str, token: &str, body: &str) -> (u16, String) {
    let mut tcp = TcpStream::connect(s.addr()).unwrap();
    let head = format!(
        "{method} {path} HTTP/1.0\r\nAuthorization: Bearer {token}\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    tcp.write_all((head + body).as_bytes()).unwrap();
    let mut answer = String::new();
    tcp.read_to_string(&mut answer).unwrap();
    let (head, body) = answer.split_once("\r\n\r\n").unwrap();
    (head[9..12].parse().unwrap(), body.to_owned())
}

/// A principal of the test's own: a token minted at run time.
fn principal(s: &Running, name: &str) -> String {
    let asked = format!(r#"{{"principal":"{name}"}}"#);
    let (status, body) = call(s, "POST", "/_control/tokens", CONTROL, &asked);
    assert_eq!(status, 201, "{body}");
    let minted: serde_json::Value = serde_json::from_str(&body).unwrap();
    minted["token"].as_str().unwrap().to_owned()
}

#[test]
fn each_principal_has_its_own_plants() {
    let s = server(None);
    let (ann, bob) = (principal(&s, "ann"), principal(&s, "bob"));
    for token in [&ann, &bob] {
        let (status, _) = call(&s, "POST", "/plants", token, r#"{"id":1,"name":"Fern"}"#);
        assert_eq!(status, 200);
    }
    let (status, list) = call(&s, "GET", "/plants", &ann, "");
    assert_eq!((status, list.as_str()), (200, r#"[{"name":"Fern"}]"#));
    s.stop().unwrap();
}

#[test]
fn a_restore_and_a_reset_undo_what_a_test_did() {
    let s = server(None);
    let me = principal(&s, "carol");
    let (_, snapshot) = call(&s, "POST", "/_control/snapshots", CONTROL, "");
    let snapshot: serde_json::Value = serde_json::from_str(&snapshot).unwrap();
    call(&s, "POST", "/plants", &me, r#"{"id":1,"name":"Ivy"}"#);
    let restore = format!(
        "/_control/snapshots/{}/restore",
        snapshot["id"].as_str().unwrap()
    );
    assert_eq!(call(&s, "POST", &restore, CONTROL, "").0, 204);
    assert_eq!(call(&s, "GET", "/plants", &me, "").1, "[]");
    // A reset: the store as at start, the seed's; the tokens minted since are gone.
    assert_eq!(call(&s, "POST", "/_control/reset", CONTROL, "").0, 204);
    assert_eq!(call(&s, "GET", "/plants", &me, "").0, 401);
    let seeded = call(&s, "GET", "/plants", "alice-token-from-the-seed", "").1;
    assert_eq!(seeded, r#"[{"name":"Monstera","tag":"tropical"}]"#);
}

#[test]
fn one_test_seed_makes_the_same_tokens() {
    let (a, b) = (server(Some(42)), server(Some(42)));
    assert_eq!(principal(&a, "p1"), principal(&b, "p1"));
}
// guide: end

/// The block of `lang` under `heading` in docs/testing.md.
fn guide_block(heading: &str, lang: &str) -> String {
    let doc =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/testing.md")).unwrap();
    doc.split(heading)
        .nth(1)
        .and_then(|rest| rest.split(&format!("```{lang}\n")).nth(1))
        .and_then(|rest| rest.split("```\n").next())
        .unwrap_or_else(|| panic!("docs/testing.md has a {lang} block under {heading}"))
        .to_owned()
}

/// The guide's Rust block is the code above, so that what it shows compiles and runs.
#[test]
fn the_guide_shows_this_file() {
    let file = include_str!("main.rs");
    let code = file
        .split("// guide: begin\n")
        .nth(1)
        .and_then(|rest| rest.split("// guide: end\n").next())
        .unwrap();
    assert_eq!(
        guide_block("## A test suite in Rust (the library)", "rust"),
        code,
        "docs/testing.md's Rust example must be tests/guide/main.rs between its markers"
    );
}

/// The guide's Python block is `suite.py` (which `tests/it/control_guide.rs` runs).
#[test]
fn the_guide_shows_the_python_suite() {
    assert_eq!(
        guide_block(
            "## A test suite in Python (pytest and `requests`)",
            "python"
        ),
        include_str!("suite.py"),
        "docs/testing.md's Python example must be tests/guide/suite.py"
    );
}

/// The guide's Node block is `suite.test.mjs` (which `tests/it/control_guide.rs` runs).
#[test]
fn the_guide_shows_the_node_suite() {
    assert_eq!(
        guide_block("## A test suite in Node (`node --test`)", "js"),
        include_str!("suite.test.mjs"),
        "docs/testing.md's Node example must be tests/guide/suite.test.mjs"
    );
}
