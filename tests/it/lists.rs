//! GET /plants: the limit, order, pipelining, and long lists streamed in flat memory.

use crate::support::*;
use std::io::{Read, Write};

#[test]
fn limit_caps_the_list() {
    let s = TestServer::memory();
    for id in 1..=5 {
        assert_eq!(
            s.post(&format!(r#"{{"id":{id},"name":"p{id}"}}"#)).status,
            200
        );
    }
    let list = |q: &str| {
        let r = s.get(&format!("/plants{q}"));
        (r.status, r.text())
    };
    assert_eq!(list("?limit=0"), (200, "[]".into()));
    assert_eq!(names(&list("?limit=2").1), vec!["p1", "p2"]);
    assert_eq!(names(&list("?limit=2147483647").1).len(), 5);
    assert_eq!(names(&list("?limit=5").1).len(), 5);
    assert_eq!(names(&list("?").1).len(), 5);
    for bad in [
        "?limit=-1",
        "?limit=2147483648",
        "?limit=1&limit=1",
        "?limit=",
        "?limit",
        "?limit=1.5",
        "?limit=%31",
        "?limit=1&x",
        "?LIMIT=1",
    ] {
        let (status, body) = list(bad);
        assert_eq!(status, 400, "{bad}: {body}");
    }
}

/// HTTP/1.1 pipelining: requests sent back to back on one connection are applied in the
/// order sent and answered in that order, so a pipelined DELETE finds the plant the POST
/// before it created, and a pipelined GET sees both.
#[test]
fn pipelined_requests_on_one_connection_apply_in_order() {
    if native_only(EMULATED_TCP_INFO) {
        return;
    }
    let s = TestServer::memory();
    for id in 0..25 {
        let post = Req::create(&format!(r#"{{"id":{id},"name":"p{id}"}}"#)).keep_alive();
        let delete = Req::new("DELETE", &format!("/plants/{id}"))
            .token(TOKEN)
            .keep_alive();
        let get = Req::get("/plants").token(TOKEN);
        let mut conn = s.connect();
        conn.write_all(&[post.bytes(), delete.bytes(), post.bytes(), get.bytes()].concat())
            .unwrap();
        let mut all = String::new();
        conn.read_to_string(&mut all).unwrap();
        let statuses: Vec<&str> = all.split("HTTP/1.1 ").skip(1).map(|r| &r[..3]).collect();
        assert_eq!(statuses, ["200", "204", "200", "200"], "{all}");
        let listed = all.rsplit("\r\n\r\n").next().unwrap();
        let want: Vec<String> = (0..=id).map(|i| format!("p{i}")).collect();
        assert_eq!(names(listed), want, "{all}");
    }
}

#[test]
fn fifty_thousand_plants_stream_in_order_in_flat_memory() {
    if native_only(EMULATED_RSS) {
        return;
    }
    let dir = TempDir::new();
    // Seed the database directly (50,000 HTTP creates would take most of the test's
    // time); the schema comes from the server itself.
    TestServer::start(&dir.db()).stop();
    if on_postgres() {
        psql(
            &dir.db(),
            "INSERT INTO plants (principal, id, name, tag)
             SELECT 'default', g * 3 - 1000, convert_to('p' || g, 'UTF8'), convert_to(repeat('g', 200), 'UTF8')
             FROM generate_series(49999, 0, -1) AS g",
        );
    } else {
        let mut conn = rusqlite::Connection::open(dir.db()).unwrap();
        let tx = conn.transaction().unwrap();
        let mut st = tx
            .prepare("INSERT INTO plants (principal, id, name, tag) VALUES ('default', ?1, ?2, ?3)")
            .unwrap();
        for id in (0..50_000i64).rev() {
            st.execute(rusqlite::params![
                id * 3 - 1000,
                format!("p{id}"),
                "g".repeat(200)
            ])
            .unwrap();
        }
        drop(st);
        tx.commit().unwrap();
    }
    let s = TestServer::start(&dir.db());
    let before = s.proc_status("VmHWM");
    let r = s.get("/plants");
    assert_eq!(r.status, 200);
    assert_eq!(
        r.header("Transfer-Encoding"),
        Some("chunked"),
        "a long list is streamed"
    );
    let got = names(&r.text());
    assert_eq!(got.len(), 50_000);
    assert!(
        got.iter().enumerate().all(|(i, n)| *n == format!("p{i}")),
        "order by id"
    );
    // Over 11 MB of JSON went out a page at a time: the server's peak grew by far less.
    assert!(r.body.len() > 11_000_000, "{}", r.body.len());
    let grown = s.proc_status("VmHWM") - before;
    assert!(grown < 4096, "peak RSS grew by {grown} kB");
    let r = s.get("/plants?limit=49999");
    assert_eq!(names(&r.text()).len(), 49_999);
    // HTTP/1.0 (no chunked coding) and `TE: identity` stream too: a body that ends when
    // the connection closes, never buffered whole to count it.
    for (version, te) in [("1.0", ""), ("1.1", "TE: identity\r\n")] {
        let mut c = s.connect();
        write!(
            c,
            "GET /plants HTTP/{version}\r\nHost: t\r\n{te}Authorization: Bearer {TOKEN}\r\n\r\n"
        )
        .unwrap();
        let mut all = Vec::new();
        c.read_to_end(&mut all).unwrap();
        let text = String::from_utf8(all).unwrap();
        let (head, body) = text.split_once("\r\n\r\n").unwrap();
        assert!(
            head.starts_with(&format!("HTTP/{version} 200 OK\r\n")),
            "{head}"
        );
        assert!(head.contains("\r\nConnection: close"), "{head}");
        assert!(!head.contains("Content-Length"), "{head}");
        assert!(!head.contains("Transfer-Encoding"), "{head}");
        let got = names(body);
        assert_eq!(got.len(), 50_000, "HTTP/{version} {te}");
        assert!(got.iter().enumerate().all(|(i, n)| *n == format!("p{i}")));
    }
    let grown = s.proc_status("VmHWM") - before;
    assert!(grown < 4096, "peak RSS grew by {grown} kB");
}
