//! `GET /metrics`: Prometheus's own checker accepts it, the figures move exactly as the
//! test drives requests, and nothing in it names a caller, a token or a plant.

use crate::support::*;
use std::collections::HashMap;
use std::io::Write;
use std::process::{Command, Stdio};

/// The samples of an exposition: `name{labels}` (as written) → value.
fn samples(text: &str) -> HashMap<String, f64> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| {
            let (series, value) = l.rsplit_once(' ').unwrap();
            (series.to_owned(), value.parse().unwrap())
        })
        .collect()
}

fn scrape(s: &TestServer) -> (String, HashMap<String, f64>) {
    let r = s.send("GET", "/metrics", &[], None);
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(
        r.header("Content-Type"),
        Some("text/plain; version=0.0.4; charset=utf-8")
    );
    assert_eq!(r.header("Cache-Control"), Some("no-store"));
    let text = r.text();
    let mut check = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("promtool (Debian's prometheus package; .ci/run installs it)");
    check
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = check.wait_with_output().unwrap();
    assert!(
        out.status.success() && out.stdout.is_empty() && out.stderr.is_empty(),
        "promtool: {}{}\n{text}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let samples = samples(&text);
    (text, samples)
}

fn get(m: &HashMap<String, f64>, series: &str) -> f64 {
    m.get(series).copied().unwrap_or(0.0)
}

#[test]
fn metrics_pass_promtool_and_count_what_the_test_drives() {
    let dir = TempDir::new();
    let before = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    let s = Launch::new(&dir.db()).arg("--max-connections 40").start();
    let (_, first) = scrape(&s);
    assert_eq!(get(&first, "plant_store_connections_max"), 40.0);
    let started = get(&first, "process_start_time_seconds");
    assert!(
        (before - 1.0..before + 30.0).contains(&started),
        "{started} vs {before}"
    );
    // File sizes: only a SQLite file has them.
    assert_eq!(
        first.contains_key("plant_store_database_size_bytes"),
        !on_postgres()
    );
    if !on_postgres() {
        assert!(get(&first, "plant_store_database_size_bytes") > 0.0);
    }
    let groups_before = get(&first, "plant_store_commit_group_size_sum");

    for id in [7001, 7002, 7003] {
        assert_eq!(
            s.post(&format!(r#"{{"id":{id},"name":"fern"}}"#)).status,
            200
        );
    }
    assert_eq!(s.post(r#"{"id":7001,"name":"again"}"#).status, 409);
    assert_eq!(s.delete("7002").status, 204);
    assert_eq!(s.delete("7002").status, 404);
    assert_eq!(s.list(), r#"[{"name":"fern"},{"name":"fern"}]"#);
    assert_eq!(s.send("GET", "/plants", &[], None).status, 401);
    assert_eq!(s.send("GET", "/secret-7001", &[], None).status, 404);
    // Three idle connections, held through the scrape.
    let idle: Vec<_> = (0..3).map(|_| s.connect()).collect();
    let (text, m) = scrape(&s);

    let requests = |route: &str, method: &str, code: &str| {
        get(
            &m,
            &format!(
                "plant_store_http_requests_total{{route=\"{route}\",method=\"{method}\",code=\"{code}\"}}"
            ),
        )
    };
    assert_eq!(requests("/plants", "POST", "2xx"), 3.0);
    assert_eq!(requests("/plants", "POST", "4xx"), 1.0);
    assert_eq!(requests("/plants/{id}", "DELETE", "2xx"), 1.0);
    assert_eq!(requests("/plants/{id}", "DELETE", "4xx"), 1.0);
    assert_eq!(requests("/plants", "GET", "2xx"), 1.0);
    assert_eq!(requests("/plants", "GET", "4xx"), 1.0);
    assert_eq!(requests("other", "GET", "4xx"), 1.0);
    // The first scrape is counted; this one is answered after its figures are taken.
    assert_eq!(requests("/metrics", "GET", "2xx"), 1.0);
    let duration = |suffix: &str| {
        get(
            &m,
            &format!("plant_store_http_request_duration_seconds_{suffix}"),
        )
    };
    assert_eq!(duration("count{route=\"/plants\"}"), 6.0);
    assert_eq!(
        duration("bucket{route=\"/plants\",le=\"+Inf\"}"),
        6.0,
        "{text}"
    );
    assert!(duration("sum{route=\"/plants\"}") > 0.0);
    // Four changes reached the writer (three creates and a delete; the conflict and
    // the missing id are changes too, that write nothing): six in all, in any grouping.
    let committed = get(&m, "plant_store_commit_group_size_sum") - groups_before;
    assert_eq!(committed, 6.0, "{text}");
    let groups = get(&m, "plant_store_commit_group_size_count");
    assert!((1.0..=6.0).contains(&groups), "{text}");
    assert_eq!(get(&m, "plant_store_commit_duration_seconds_count"), groups);
    assert_eq!(get(&m, "plant_store_commit_failures_total"), 0.0);
    // This scrape is in flight, and its connection and the three idle ones are open.
    assert!(
        get(&m, "plant_store_http_requests_in_flight") >= 1.0,
        "{text}"
    );
    assert!(get(&m, "plant_store_connections_open") >= 4.0, "{text}");
    assert_eq!(get(&m, "plant_store_queue_depth"), 0.0);
    if !on_postgres() {
        assert!(
            get(&m, "plant_store_database_wal_size_bytes") > 0.0,
            "{text}"
        );
    }

    // Names, labels and help only: a sample's value (a start time, say) may hold any digits.
    let without_values: String = text
        .lines()
        .map(|l| match l.starts_with('#') {
            true => l,
            false => l.rsplit_once(' ').map_or(l, |(series, _)| series),
        })
        .collect::<Vec<_>>()
        .join("\n");
    for secret in [TOKEN, "default", "7001", "7002", "secret", "fern"] {
        assert!(!without_values.contains(secret), "`{secret}` in\n{text}");
    }
    drop(idle);
}

#[test]
fn metrics_take_no_token_and_only_get() {
    let s = TestServer::memory();
    check(
        &s,
        &[
            (
                Req::new("POST", "/metrics").json("{}"),
                405,
                &[("Allow", "GET")],
                err(405, "method not allowed here; allowed: GET"),
            ),
            (
                Req::get("/metrics?name=x"),
                400,
                &[],
                err(400, "unknown query parameter `name`"),
            ),
        ],
    );
    let (text, m) = scrape(&s);
    assert_eq!(
        get(
            &m,
            "plant_store_http_requests_total{route=\"/metrics\",method=\"POST\",code=\"4xx\"}"
        ),
        1.0
    );
    assert_eq!(
        get(
            &m,
            "plant_store_http_requests_total{route=\"/metrics\",method=\"GET\",code=\"4xx\"}"
        ),
        1.0
    );
    // In memory there is no file to measure.
    assert!(!text.contains("plant_store_database_size_bytes"), "{text}");
}

/// The bytes the process wrote to storage: on a SQLite file, a counter that a create moves
/// by at least a page of its write-ahead log (on tmpfs the kernel counts no writes: there
/// it only exists); on PostgreSQL and in memory, absent (the database's writes are not
/// this process's).
#[test]
fn bytes_written_to_storage_grow_with_a_create() {
    const NAME: &str = "plant_store_storage_bytes_written_total";
    let dir = TempDir::new();
    let s = TestServer::start(&dir.db());
    let (text, before) = scrape(&s);
    if on_postgres() {
        assert!(!text.contains(NAME), "{text}");
        return;
    }
    assert!(text.contains(&format!("# TYPE {NAME} counter")), "{text}");
    assert!(before.contains_key(NAME), "{text}");
    assert_eq!(s.post(r#"{"id":1,"name":"fern"}"#).status, 200);
    let (_, after) = scrape(&s);
    let grown = get(&after, NAME) - get(&before, NAME);
    // SAFETY: a statfs of a path into a zeroed struct. (`f_type` and the magic number
    // have other widths on other targets: the casts are not the same type everywhere.)
    #[allow(clippy::unnecessary_cast)]
    let tmpfs = unsafe {
        let mut fs: libc::statfs = std::mem::zeroed();
        let path = std::ffi::CString::new(dir.0.to_str().unwrap()).unwrap();
        libc::statfs(path.as_ptr(), &mut fs) == 0 && fs.f_type as i64 == libc::TMPFS_MAGIC as i64
    };
    if !tmpfs {
        assert!(grown >= 4096.0, "grew by {grown}");
    }
    assert!(!scrape(&TestServer::memory()).0.contains(NAME));
}
