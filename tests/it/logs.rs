//! The access log: one bounded, escaped line per request, never a token; JSON lines. An
//! output nobody reads (standard error or standard output a full pipe) stalls no request
//! and no exit: lines are dropped, counted and reported.

use crate::control::{CONTROL, controlled, ctl};
use crate::support::*;
use std::os::fd::{FromRawFd, OwnedFd};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

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

/// Requests with long paths until the log has dropped lines (its output, a pipe nobody
/// reads, and its queue are full: `Launch::stderr_unread`).
pub(crate) fn fill_the_log(s: &TestServer) {
    // Each line a few hundred bytes.
    let path = format!("/{}", "a".repeat(180));
    for round in 0.. {
        for _ in 0..500 {
            assert_eq!(s.send("GET", &path, &[], None).status, 404);
        }
        if s.metric("plant_store_log_lines_dropped_total") > 0.0 {
            return;
        }
        assert!(round < 20, "10,000 lines and none dropped");
    }
}

/// A test fixture's mistake: the server started with standard error a pipe that it never
/// reads (the access log of about 1,000 requests filled it, and every request after that
/// waited for it). With a token made at run time (with test control), 3,000 requests are each answered; the
/// lines that did not fit are counted on `/metrics`; SIGTERM ends it with status 0 (the
/// log is given at most 1 s).
#[test]
fn a_log_nobody_reads_stalls_no_request_and_no_exit() {
    // A device build has no test control: the environment's token then.
    let control = !without(Feature::TestControl);
    let launch = if control {
        controlled(":memory:")
    } else {
        Launch::memory()
    };
    let mut s = launch.stderr_unread().start();
    let mut token = TOKEN.to_owned();
    if control {
        let minted = s.request(&ctl("POST", "/_control/tokens").json(r#"{"principal":"p"}"#));
        assert_eq!(minted.status, 201, "{}", minted.text());
        token = minted.json()["token"].as_str().unwrap().to_owned();
        assert_ne!(token, CONTROL);
    }
    for n in 1..=3000 {
        let r = s.request(&Req::get("/plants").token(&token));
        assert_eq!(r.status, 200, "request {n}: {}", r.text());
    }
    fill_the_log(&s);
    assert!(s.metric("plant_store_log_lines_dropped_total") > 0.0);
    s.signal(libc::SIGTERM);
    eventually(Duration::from_secs(10), || {
        s.child.try_wait().unwrap().is_some()
    });
    assert!(s.child.try_wait().unwrap().unwrap().success());
}

/// Once the pipe is read again, the log says how many lines it dropped: as many as
/// `/metrics` counts.
#[test]
fn a_log_read_again_says_how_many_lines_it_dropped() {
    let mut s = Launch::memory().stderr_unread().start();
    fill_the_log(&s);
    let log = Arc::new(Mutex::new(String::new()));
    read_into(s.child.stderr.take().unwrap(), log.clone());
    let reported = || -> f64 {
        let log = log.lock().unwrap();
        log.lines()
            .filter_map(|l| {
                l.split_once(" log lines dropped: the log's output did not take them in time")
            })
            .map(|(head, _)| head.rsplit(' ').next().unwrap().parse::<f64>().unwrap())
            .sum()
    };
    eventually(Duration::from_secs(10), || reported() > 0.0);
    // Each scrape is logged too; once the output takes lines, none is dropped.
    eventually(Duration::from_secs(10), || {
        reported() == s.metric("plant_store_log_lines_dropped_total")
    });
    assert!(log.lock().unwrap().contains("[WARN] "));
}

/// Starts `cmd` with its standard error read into the returned log.
fn spawn_logged(mut cmd: std::process::Command) -> (std::process::Child, Arc<Mutex<String>>) {
    let mut child = cmd.spawn().unwrap();
    let log = Arc::new(Mutex::new(String::new()));
    read_into(child.stderr.take().unwrap(), log.clone());
    (child, log)
}

/// The server's address read from its log (`serving ADDR with …`); three requests are
/// served, and SIGTERM ends it with status 0.
fn stops_cleanly_after_serving(mut child: std::process::Child, log: &Mutex<String>) {
    let addr = || {
        let log = log.lock().unwrap();
        let (_, rest) = log.split_once(" serving ")?;
        Some(rest.split_whitespace().next()?.to_owned())
    };
    eventually(Duration::from_secs(10), || addr().is_some());
    let addr = addr().unwrap();
    for _ in 0..3 {
        let r = Req::get("/plants").token(TOKEN).send_to(&addr).unwrap();
        assert_eq!(r.status, 200);
    }
    // SAFETY: kill(2) with our own child's pid.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    eventually(Duration::from_secs(10), || {
        child.try_wait().unwrap().is_some()
    });
    assert!(child.wait().unwrap().success(), "{}", log.lock().unwrap());
}

/// Standard output a pipe that is already full when the server starts: the `listening
/// on` line cannot go out, and still requests are served and SIGTERM ends the server with
/// status 0 (the address is read from the log instead).
#[test]
fn a_stdout_nobody_reads_holds_neither_requests_nor_the_stop() {
    let mut fds = [0; 2];
    // SAFETY: a valid array of two descriptors, owned below.
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
    let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    // Filled through a non-blocking write, then made blocking again, as an inherited
    // descriptor would be.
    // SAFETY: fcntl and write on a descriptor we own.
    unsafe {
        let flags = libc::fcntl(fds[1], libc::F_GETFL);
        libc::fcntl(fds[1], libc::F_SETFL, flags | libc::O_NONBLOCK);
        while libc::write(fds[1], [b'x'; 4096].as_ptr().cast(), 4096) > 0 {}
        libc::fcntl(fds[1], libc::F_SETFL, flags);
    }
    let mut cmd = plant_store();
    cmd.args(["serve", "--addr", "127.0.0.1:0", "--db", ":memory:"])
        .env("PLANT_STORE_TOKEN", TOKEN)
        .stdin(Stdio::null())
        .stdout(Stdio::from(write))
        .stderr(Stdio::piped());
    let (child, log) = spawn_logged(cmd);
    stops_cleanly_after_serving(child, &log);
    drop(read);
}
