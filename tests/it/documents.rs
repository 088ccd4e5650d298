//! What the service says of itself: the OpenAPI document and its validator, cache headers,
//! and `--help`.

use crate::support::*;

#[test]
fn openapi_document_parses_and_documents_every_observed_status() {
    let s = TestServer::memory();
    let r = s.send("GET", "/openapi.json", &[], None);
    assert_eq!(r.status, 200);
    let doc = r.json();
    assert_eq!(doc["openapi"], "3.1.0");
    assert_eq!(doc["info"]["version"], "1.0.0");
    // Every status the test suite observes, per operation.
    let observed: &[(&str, &str, &[u16])] = &[
        ("/plants", "get", &[200, 400, 401, 404, 405, 500, 503]),
        (
            "/plants",
            "post",
            &[200, 400, 401, 403, 405, 408, 409, 413, 415, 429, 500, 503],
        ),
        (
            "/plants/{id}",
            "delete",
            &[204, 400, 401, 403, 404, 405, 503],
        ),
        ("/healthz", "get", &[200, 400, 405, 503]),
        ("/openapi.json", "get", &[200, 304, 400, 405]),
        ("/metrics", "get", &[200, 400, 405]),
        ("/events", "get", &[200, 400, 401, 405, 410, 503]),
    ];
    // The feed's two representations, as `Accept` picks them.
    let feed = &doc["paths"]["/events"]["get"]["responses"]["200"]["content"];
    for media in ["application/json", "text/event-stream"] {
        assert!(feed.get(media).is_some(), "GET /events lacks {media}");
    }
    // What a webhook receiver gets: the event as the body, the three Standard Webhooks
    // headers, and the answers that deliver (2XX) and disable (410).
    let hook = &doc["webhooks"]["event"]["post"];
    assert_eq!(
        hook["requestBody"]["content"]["application/json"]["schema"]["$ref"],
        "#/components/schemas/Event"
    );
    let headers: Vec<&str> = hook["parameters"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        headers,
        ["webhook-id", "webhook-timestamp", "webhook-signature"]
    );
    for answer in ["2XX", "410", "default"] {
        assert!(
            hook["responses"].get(answer).is_some(),
            "webhook lacks {answer}"
        );
    }
    for (path, op, statuses) in observed {
        let responses = &doc["paths"][path][op]["responses"];
        assert!(responses.is_object(), "{op} {path} is not documented");
        for st in *statuses {
            assert!(
                responses.get(st.to_string()).is_some(),
                "{op} {path} lacks {st}"
            );
        }
        for (_, resp) in responses.as_object().unwrap() {
            if let Some(reference) = resp.get("$ref").and_then(|r| r.as_str()) {
                let name = reference.rsplit('/').next().unwrap();
                assert!(
                    doc["components"]["responses"].get(name).is_some(),
                    "dangling {reference}"
                );
            }
        }
    }
}

#[test]
fn help_lists_every_flag_and_bad_flags_exit_2() {
    let (code, out, _) = run_cli(&["--help"]);
    assert_eq!(code, 0);
    for flag in [
        "--addr",
        "--db",
        "--workers",
        "--max-connections",
        "--queue-timeout",
        "--read-timeout",
        "--body-timeout",
        "--rate-limit",
        "--rate-burst",
        "--log-format",
        "--drain-timeout",
        "--log-level",
        "PLANT_STORE_TOKEN",
        "token add",
        "token list",
        "token revoke",
        "backup",
    ] {
        assert!(out.contains(flag), "--help lacks {flag}");
    }
    let (code, _, err) = run_cli(&["serve", "--workers", "zero"]);
    assert_eq!(code, 2);
    assert!(err.contains("--workers must be a whole number"), "{err}");
    // A listen address is not looked up in DNS: a name other than localhost is refused.
    let (code, _, err) = run_cli(&["serve", "--addr", "example.com:80"]);
    assert_eq!(code, 2);
    assert!(
        err.contains("--addr must be an IP address and a port"),
        "{err}"
    );
    let s = Launch::memory().arg("--addr localhost:0").start();
    assert!(s.addr.starts_with("127.0.0.1:"), "{}", s.addr);
    assert_eq!(s.send("GET", "/healthz", &[], None).status, 200);
    // The old fixed queue length is gone: naming it is an error, not silently ignored.
    let (code, _, err) = run_cli(&["serve", "--queue", "256"]);
    assert_eq!(code, 2);
    assert!(err.contains("unknown option --queue"), "{err}");
}

/// Caches store no health check and no caller's plants; the OpenAPI document carries a
/// validator and is answered 304 while the client's copy is current.
#[test]
fn cache_headers_keep_health_and_plants_out_of_caches_and_validate_the_document() {
    let s = TestServer::memory();
    let no_store = Some("no-store");
    assert_eq!(
        s.send("GET", "/healthz", &[], None).header("Cache-Control"),
        no_store
    );
    assert_eq!(s.get("/plants").header("Cache-Control"), no_store);
    assert_eq!(
        s.post(r#"{"id":1,"name":"a"}"#).header("Cache-Control"),
        no_store
    );
    assert_eq!(s.delete("1").header("Cache-Control"), no_store);
    let unauthenticated = s.send("GET", "/plants", &[], None);
    assert_eq!(
        (
            unauthenticated.status,
            unauthenticated.header("Cache-Control")
        ),
        (401, no_store)
    );
    let doc = s.send("GET", "/openapi.json", &[], None);
    assert_eq!(doc.header("Cache-Control"), Some("no-cache"));
    let etag = doc.header("ETag").expect("an ETag").to_owned();
    assert!(
        etag.starts_with('"') && etag.ends_with('"') && etag.len() == 18,
        "{etag}"
    );
    for current in [
        etag.clone(),
        format!("W/{etag}"),
        format!("\"x\", {etag}"),
        "*".into(),
    ] {
        let r = s.send("GET", "/openapi.json", &[("If-None-Match", &current)], None);
        assert_eq!((r.status, r.body.len()), (304, 0), "{current}");
        assert_eq!(r.header("ETag"), Some(etag.as_str()));
    }
    let stale = s.send(
        "GET",
        "/openapi.json",
        &[("If-None-Match", "\"0000\"")],
        None,
    );
    assert_eq!((stale.status, stale.body), (200, doc.body));
}
