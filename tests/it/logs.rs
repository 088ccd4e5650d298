//! The access log: one bounded, escaped line per request, never a token; JSON lines.

use crate::support::*;

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
