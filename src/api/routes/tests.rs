use super::*;
use crate::api::limits::MAX_LIMIT;
use std::io::Read;

#[test]
fn the_router_names_patterns_never_paths() {
    let of = |url| route(url).0;
    assert_eq!(of("/plants/42"), Route::Plant);
    assert_eq!(of("/plants/42?x=1"), Route::Plant);
    assert_eq!(of("/plants?limit=3"), Route::Plants);
    assert_eq!(of("/plants/4/2"), Route::Other);
    assert_eq!(of("/plants/"), Route::Other);
    assert_eq!(of("/secret-token"), Route::Other);
    assert_eq!(of("/metrics"), Route::Metrics);
    for (i, route) in Route::ALL.iter().enumerate() {
        assert_eq!(*route as usize, i);
    }
}

#[test]
fn path_ids_take_the_integer_forms_of_the_body() {
    assert_eq!(parse_id("7").unwrap(), 7);
    assert_eq!(parse_id("-9223372036854775808").unwrap(), i64::MIN);
    assert_eq!(parse_id("-38906355.0").unwrap(), -38_906_355);
    assert_eq!(parse_id("7e0").unwrap(), 7);
    for bad in [
        "",
        "+7",
        "1.5",
        "1.0e-9223372036854775808",
        "0x10",
        "9223372036854775808",
        "%37",
        " 7",
        "-",
    ] {
        assert!(parse_id(bad).is_err(), "{bad:?}");
    }
}

#[test]
fn limit_is_strict() {
    assert_eq!(parse_limit("").unwrap(), None);
    assert_eq!(parse_limit("limit=0").unwrap(), Some(0));
    assert_eq!(parse_limit("limit=2147483647").unwrap(), Some(MAX_LIMIT));
    for bad in [
        "limit=2147483648",
        "limit=-1",
        "limit=",
        "limit",
        "limit=+1",
        "limt=5",
        "limit=1&limit=1",
        "limit=1&x=2",
    ] {
        assert!(parse_limit(bad).is_err(), "{bad:?}");
    }
}

/// A request made of generated parts, for `generated_requests_never_panic_or_fail`.
struct Fake {
    method: String,
    url: String,
    headers: Vec<(String, String)>,
    declared: Option<usize>,
    body: std::io::Cursor<Vec<u8>>,
}

impl Incoming for Fake {
    fn method(&self) -> &str {
        &self.method
    }
    fn url(&self) -> &str {
        &self.url
    }
    fn header(&self, name: &str) -> Option<&str> {
        let h = self.headers.iter().find(|h| h.0.eq_ignore_ascii_case(name));
        h.map(|h| h.1.as_str())
    }
    fn repeated(&self, name: &str) -> bool {
        let named = self
            .headers
            .iter()
            .filter(|h| h.0.eq_ignore_ascii_case(name));
        named.count() > 1
    }
    fn body_length(&self) -> Option<usize> {
        self.declared
    }
    fn body(&mut self) -> &mut dyn Read {
        &mut self.body
    }
    fn sent_body(&self) -> &[u8] {
        self.body.get_ref()
    }
}

/// xorshift64*: a small, seedable generator for the inputs.
struct Gen(u64);

impl Gen {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn pick<'a>(&mut self, xs: &[&'a str]) -> &'a str {
        xs[self.below(xs.len())]
    }
    /// Glues 0..max pieces, some from `xs`, some random characters.
    fn text(&mut self, xs: &[&str], max: usize) -> String {
        let mut out = String::new();
        for _ in 0..self.below(max + 1) {
            if self.below(4) == 0 {
                out.push(char::from_u32(self.below(0x11_0000) as u32).unwrap_or('\u{fffd}'));
            } else {
                out.push_str(self.pick(xs));
            }
        }
        out
    }
}

/// Arbitrary method, path, query, headers and body through `handle`: it never
/// panics, never answers 500 on a healthy store, and every list it streams is JSON.
/// PLANT_STORE_FUZZ_ITERS (default 20000) and PLANT_STORE_FUZZ_SEED run it longer or
/// replay a failure.
#[test]
fn generated_requests_never_panic_or_fail() {
    let iters: u64 = std::env::var("PLANT_STORE_FUZZ_ITERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20_000);
    let seed: u64 = std::env::var("PLANT_STORE_FUZZ_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
                | 1
        });
    let store = crate::store::Store::open(
        &crate::store::Location::parse(":memory:"),
        1,
        std::time::Duration::from_secs(60),
        Default::default(),
        Default::default(),
    )
    .unwrap();
    let cx = Context {
        db: store.connect().unwrap(),
        metrics: store.metrics(),
        env_token: Some(auth::hash_token("tok")),
        limiter: None,
        writers: Default::default(),
        control: None,
    };
    let mut g = Gen(seed);
    let mut seen = std::collections::BTreeMap::new();
    let url_parts = [
        "/",
        "plants",
        "/plants",
        "/plants/",
        "healthz",
        "openapi.json",
        "?",
        "&",
        "=",
        "limit",
        "limit=",
        "7",
        "-",
        "0",
        "%",
        "%2F",
        "9223372036854775808",
        "..",
        " ",
    ];
    let tokens = [
        "Bearer tok",
        "Bearer tok",
        "Bearer tok",
        "bearer tok",
        "Bearer  tok",
        "Bearer",
        "Basic tok",
        "Bearer tok ",
        "tok",
        "Bearer t\u{fffd}k",
        "",
    ];
    let content_types = [
        "application/json",
        "application/json",
        "application/json; charset=utf-8",
        "text/plain",
        "",
        ";",
        "APPLICATION/JSON",
    ];
    let body_parts = [
        "{",
        "}",
        "\"id\"",
        "\"name\"",
        "\"tag\"",
        ":",
        ",",
        "1",
        "-9223372036854775808",
        "1.5",
        "\"x\"",
        "null",
        "[",
        "]",
        "\"",
        "\\u0000",
        "true",
        " ",
    ];
    for i in 0..iters {
        let method = g
            .pick(&[
                "GET", "POST", "DELETE", "PUT", "HEAD", "PATCH", "get", "", "X-Y",
            ])
            .to_owned();
        let url = match g.below(4) {
            0 => g.text(&url_parts, 8),
            _ => {
                let id = g.below(50) as i64 - 25;
                let path = match g.below(5) {
                    0 => format!("/plants/{id}"),
                    1 => format!("/plants/{}", g.text(&url_parts, 2)),
                    2 => g.pick(&["/healthz", "/openapi.json"]).to_owned(),
                    _ => "/plants".to_owned(),
                };
                let query = match g.below(4) {
                    0 => format!("?limit={}", g.below(30)),
                    1 => format!("?{}", g.text(&url_parts, 4)),
                    _ => String::new(),
                };
                path + &query
            }
        };
        let mut headers = Vec::new();
        for (name, choices) in [
            ("Authorization", &tokens[..]),
            ("Content-Type", &content_types[..]),
        ] {
            // Present 7 times in 8.
            if g.below(8) > 0 {
                headers.push((name.to_owned(), g.pick(choices).to_owned()));
            }
        }
        let body = if g.below(3) > 0 {
            format!(
                r#"{{"id":{},"name":"n{}"}}"#,
                g.below(50) as i64 - 25,
                g.next()
            )
        } else {
            g.text(&body_parts, 24)
        }
        .into_bytes();
        let declared = match g.below(8) {
            0 => None,
            1 => Some(g.below(1 << 20)),
            _ => Some(body.len()),
        };
        let mut req = Fake {
            method,
            url,
            headers,
            declared,
            body: std::io::Cursor::new(body),
        };
        let case = format!(
            "seed {seed} case {i}: {} {:?} {:?}",
            req.method, req.url, req.headers
        );
        let mut who = Seen::default();
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let reply = match handle(&cx, &mut req, &mut who) {
                Ok(Handled::Write(change, pending)) => {
                    settle(&cx, pending, cx.db.write(change), &mut who)
                }
                Ok(Handled::Reply(reply)) => Ok(reply),
                Ok(Handled::Wait(_)) => panic!("{case}: a journal listing without test control"),
                Err(e) => Err(e),
            };
            match reply {
                Ok(Reply::List(mut list)) => {
                    let mut out = Vec::new();
                    list.read_to_end(&mut out).unwrap();
                    assert!(
                        serde_json::from_slice::<serde_json::Value>(&out)
                            .unwrap()
                            .is_array()
                    );
                    200
                }
                Ok(Reply::NoContent) => 204,
                Ok(_) => 200,
                Err(e) => e.status(),
            }
        }));
        let status = outcome.unwrap_or_else(|_| panic!("panicked: {case}"));
        assert!(
            [200, 204, 400, 401, 403, 404, 405, 409, 413, 415].contains(&status),
            "{status}: {case}"
        );
        *seen.entry(status).or_insert(0u64) += 1;
    }
    if iters >= 20_000 {
        for status in [200, 204, 400, 401, 404, 405, 409, 413, 415] {
            assert!(
                seen.contains_key(&status),
                "the inputs never reached {status}: {seen:?}"
            );
        }
    }
}
