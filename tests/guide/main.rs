//! docs/testing.md's Rust example, compiled and run: the code between the `guide`
//! markers is the guide's block word for word (`the_guide_shows_this_file` checks).
//! `suite.py` and `suite.test.mjs` beside it are the guide's Python and Node examples,
//! also word for word (checked here), run by `tests/it/control_guide.rs`.

#![cfg(feature = "test-control")]

// guide: begin
use plant_store::control::{Fault, Match, Query};
use plant_store::{Running, Server};
use std::io::{Read, Write};
use std::net::TcpStream;

const SEED: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/guide/seed.json");

/// A server of the test's own, in-process: test control on (a random control token),
/// the seed loaded before `start` returns, on 127.0.0.1 port 0 and `:memory:` (the
/// defaults).
fn server(test_seed: Option<u64>) -> Running {
    let mut builder = Server::builder().test_control().seed_file(SEED);
    if let Some(n) = test_seed {
        builder = builder.test_seed(n);
    }
    builder.start().expect("the server starts")
}

/// One request of the client under test, its status and body (HTTP/1.0: the answer
/// ends at the close; any HTTP client does).
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
    s.control().unwrap().mint(name).unwrap().token
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
fn a_503_twice_then_the_retry_goes_through() {
    let s = server(None);
    let dan = principal(&s, "dan");
    let control = s.control().unwrap();
    control
        .fault(
            Fault::on(Match::post("/plants").principal("dan"))
                .status(503)
                .times(2),
        )
        .unwrap();
    let create = || call(&s, "POST", "/plants", &dan, r#"{"id":1,"name":"Fern"}"#).0;
    assert_eq!([create(), create(), create()], [503, 503, 200]);
    // What the client sent: the same body each time.
    let sent = control.journal(Query::all().principal("dan")).unwrap();
    let statuses: Vec<Option<u16>> = sent.iter().map(|e| e.status).collect();
    assert_eq!(statuses, [Some(503), Some(503), Some(200)]);
    assert!(sent.iter().all(|e| e.body == sent[0].body));
}

#[test]
fn a_restore_and_a_reset_undo_what_a_test_did() {
    let s = server(None);
    let me = principal(&s, "carol");
    let control = s.control().unwrap();
    let snapshot = control.snapshot().unwrap();
    call(&s, "POST", "/plants", &me, r#"{"id":1,"name":"Ivy"}"#);
    control.restore(&snapshot).unwrap();
    assert_eq!(call(&s, "GET", "/plants", &me, "").1, "[]");
    // A reset: the store as at start, the seed's; the tokens minted since are gone.
    control.reset().unwrap();
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

/// docs/testing.md's three Rust lines at its top: the two of code are these, word for
/// word (`the_quick_start_is_this_code`).
#[rustfmt::skip]
fn quick_start() -> Result<Running, Box<dyn std::error::Error>> {
    // quick start: begin
    let server = plant_store::Server::builder().test_control().start()?; // use plant_store::control::{Fault, Match};
    server.control()?.fault(Fault::on(Match::post("/plants")).after().close().times(1))?;
    // quick start: end
    Ok(server)
}

/// The quick start does what the page says: the write is committed, its answer lost.
#[test]
fn the_quick_start_loses_the_answer_of_a_committed_write() {
    let server = quick_start().unwrap();
    let me = principal(&server, "quick");
    let mut tcp = TcpStream::connect(server.addr()).unwrap();
    let body = r#"{"id":1,"name":"Fern"}"#;
    let head = format!(
        "POST /plants HTTP/1.0\r\nAuthorization: Bearer {me}\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    tcp.write_all(head.as_bytes()).unwrap();
    let mut answer = Vec::new();
    tcp.read_to_end(&mut answer).unwrap();
    assert!(answer.is_empty(), "the answer is lost");
    // The write was committed: the retry is a 409.
    assert_eq!(call(&server, "POST", "/plants", &me, body).0, 409);
}

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

/// The quick start's Rust lines in docs/testing.md are the code between the `quick
/// start` markers above.
#[test]
fn the_quick_start_is_this_code() {
    let file = include_str!("main.rs");
    let code: Vec<&str> = file
        .split("    // quick start: begin\n")
        .nth(1)
        .and_then(|rest| rest.split("    // quick start: end\n").next())
        .unwrap()
        .lines()
        .map(str::trim)
        .collect();
    let doc =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/testing.md")).unwrap();
    let shown: Vec<&str> = doc
        .split("Rust (the library, in-process):\n\n")
        .nth(1)
        .and_then(|rest| rest.split("\n\n").next())
        .expect("docs/testing.md shows the Rust quick start")
        .lines()
        .map(str::trim)
        .collect();
    assert_eq!(
        shown,
        [&["cargo add --dev plant-store"], code.as_slice()].concat(),
        "docs/testing.md's Rust quick start must be tests/guide/main.rs's code"
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
