//! Every JSON the server reads (the creation body, each control body, the seed file) is
//! read strictly: a member given twice is refused by its place, never settled by the
//! last one; a seed file's error names the place and its line and column in the file.

use crate::control::{controlled, ctl, seed_file, serve_refused};
use crate::support::*;

#[test]
fn a_member_given_twice_is_400_naming_it_in_every_body_and_changes_nothing() {
    if no_test_control() {
        return;
    }
    let s = controlled(":memory:").start();
    let fault =
        r#"{"match":{"path":"/plants","path":"/events"},"action":{"kind":"status","status":503}}"#;
    check(
        &s,
        &[
            (
                Req::create(r#"{"id":1,"name":"a","name":"b"}"#),
                400,
                &[],
                err(
                    400,
                    "invalid body: member `name` is given twice at line 1 column 25",
                ),
            ),
            (
                ctl("POST", "/_control/tokens").json(r#"{"principal":"a","principal":"b"}"#),
                400,
                &[],
                err(
                    400,
                    "invalid body: member `principal` is given twice at line 1 column 28",
                ),
            ),
            (
                ctl("PUT", "/_control/clock")
                    .json(r#"{"now":"2030-01-01T00:00:00Z","frozen":true,"frozen":false}"#),
                400,
                &[],
                err(
                    400,
                    "invalid body: member `frozen` is given twice at line 1 column 52",
                ),
            ),
            (
                ctl("POST", "/_control/clock/advance").json(r#"{"by":"1h","by":"1s"}"#),
                400,
                &[],
                err(
                    400,
                    "invalid body: member `by` is given twice at line 1 column 15",
                ),
            ),
            (
                ctl("POST", "/_control/faults").json(fault),
                400,
                &[],
                err(
                    400,
                    "invalid body: member `match.path` is given twice at line 1 column 33",
                ),
            ),
        ],
    );
    assert_eq!(s.list(), "[]");
    assert_eq!(s.request(&ctl("GET", "/_control/faults")).text(), "[]");
    let clock = s.request(&ctl("GET", "/_control/clock")).json();
    assert_eq!(clock["frozen"], false, "{clock}");
    assert!(clock["now"].as_str().unwrap() < "2030", "{clock}");
}

#[test]
fn a_seed_with_a_member_given_twice_refuses_the_start_naming_its_place() {
    if sqlite_only("seeds are SQLite's") {
        return;
    }
    let dir = TempDir::new();
    for (text, message) in [
        // The last list would win, and alice's plant 1 be lost without a word.
        (
            "{\"plants\": {\"alice\": [{\"id\": 1, \"name\": \"a\"}],\n            \"alice\": [{\"id\": 2, \"name\": \"b\"}]}}",
            "member `plants.alice` is given twice at line 2 column 19",
        ),
        (
            r#"{"tokens": [{"token": "a-seeded-token", "principal": "a", "principal": "b"}]}"#,
            "member `tokens[0].principal` is given twice at line 1 column 69",
        ),
        (
            r#"{"tokens": [], "plants": {}, "tokens": []}"#,
            "member `tokens` is given twice at line 1 column 37",
        ),
    ] {
        let path = seed_file(&dir, text);
        let (code, e) = serve_refused(&["--db", ":memory:", "--seed", &path], &[]);
        assert_eq!(code, 2, "{text}: {e}");
        let want = format!("plant-store: seed file {path}: {message}; nothing of it was loaded");
        assert!(
            e.lines().any(|l| l == want),
            "{text}:\nwanted {want}\ngot {e}"
        );
    }
}

/// The seed-error example of docs/control.md: its file, its command's arguments and the
/// line it shows the binary printing.
fn documented_seed_error() -> (String, Vec<String>, String) {
    let doc =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/control.md")).unwrap();
    let example = doc
        .split("<!-- seed error: tests/it/strict_json.rs runs it -->")
        .nth(1)
        .expect("docs/control.md has its seed-error example");
    let block = |n: usize| {
        example
            .split("```")
            .nth(n)
            .unwrap()
            .split_once('\n')
            .unwrap()
            .1
    };
    let (command, shown) = block(3).trim_end().split_once('\n').unwrap();
    let args = command.strip_prefix("$ plant-store ").unwrap();
    (
        block(1).to_owned(),
        args.split(' ').map(str::to_owned).collect(),
        shown.to_owned(),
    )
}

#[test]
fn the_seed_error_of_the_docs_is_what_the_binary_prints() {
    if sqlite_only("seeds are SQLite's") {
        return;
    }
    let (file, args, shown) = documented_seed_error();
    let dir = TempDir::new();
    std::fs::write(dir.0.join("seed.json"), &file).unwrap();
    let out = plant_store()
        .current_dir(&dir.0)
        .args(&args)
        .env_remove("PLANT_STORE_TOKEN")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    // The log's lines (timestamped) aside, the one line the binary prints.
    let stderr = String::from_utf8_lossy(&out.stderr);
    let printed: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("plant-store: "))
        .collect();
    assert_eq!(printed, [shown.as_str()], "{stderr}");
}
