use super::*;

fn matching(m: &str) -> Result<Matching, String> {
    let value: Value = serde_json::from_str(m).unwrap();
    let exact = Exact::read(m.as_bytes()).unwrap().members().unwrap();
    parse(value.as_object().unwrap(), exact.get("body").cloned())
}

/// A request: its query, headers and body.
struct Sent {
    method: &'static str,
    path: &'static str,
    query: &'static str,
    headers: Vec<(&'static str, &'static str)>,
    body: &'static str,
}

fn post(body: &'static str) -> Sent {
    Sent {
        method: "POST",
        path: "/plants",
        query: "",
        headers: vec![("Content-Type", "application/json")],
        body,
    }
}

fn matches(m: &str, sent: &Sent) -> bool {
    let header = |name: &str| {
        let found = sent.headers.iter().find(|h| h.0.eq_ignore_ascii_case(name));
        found.map(|h| h.1)
    };
    let request = Request {
        method: sent.method,
        path: sent.path,
        query: sent.query,
        header: &header,
        body: sent.body.as_bytes(),
        principal: Some("alice"),
    };
    let read = Exact::read(sent.body.as_bytes())
        .ok()
        .and_then(Exact::members);
    matching(m).unwrap().request(&request, read.as_ref())
}

#[test]
fn query_parameters_match_by_their_decoded_values() {
    let get = |query| Sent {
        method: "GET",
        path: "/events",
        query,
        headers: Vec::new(),
        body: "",
    };
    let m = r#"{"query":{"after":"evt 1","limit":"5"}}"#;
    assert!(matches(m, &get("limit=5&after=evt+1")));
    assert!(matches(m, &get("after=evt%201&x=y&limit=5")));
    assert!(
        matches(m, &get("limit=4&after=evt+1&limit=5")),
        "any of its values"
    );
    assert!(!matches(m, &get("after=evt+1")), "each parameter");
    assert!(!matches(m, &get("after=evt+1&limit=50")), "exactly");
    assert!(!matches(m, &get("")));
    assert!(matches(r#"{"query":{"flag":""}}"#, &get("flag")));
    assert!(matches(r#"{"query":{}}"#, &get("")));
}

#[test]
fn headers_match_in_any_case_exactly_or_by_prefix() {
    let mut sent = post("{}");
    sent.headers.push(("user-agent", "my-client/1.2 (linux)"));
    sent.headers.push(("X-Attempt", "2"));
    assert!(matches(
        r#"{"headers":{"User-Agent":"my-client/*"}}"#,
        &sent
    ));
    assert!(matches(
        r#"{"headers":{"x-attempt":"2","content-type":"application/json"}}"#,
        &sent
    ));
    assert!(
        matches(r#"{"headers":{"X-Attempt":"*"}}"#, &sent),
        "present"
    );
    assert!(!matches(r#"{"headers":{"X-Attempt":"3"}}"#, &sent));
    assert!(!matches(
        r#"{"headers":{"User-Agent":"my-client/"}}"#,
        &sent
    ));
    assert!(!matches(r#"{"headers":{"X-Missing":"*"}}"#, &sent));
}

#[test]
fn the_body_holds_each_member_with_an_equal_value() {
    let m = r#"{"body":{"id":7,"meta":{"by":"me"},"tags":[1,{"a":true}]}}"#;
    let sent = |body| post(body);
    assert!(matches(
        m,
        &sent(r#"{"name":"x","id":7.0,"meta":{"by":"me","at":1},"tags":[1,{"a":true,"b":0}]}"#)
    ));
    assert!(!matches(
        m,
        &sent(r#"{"id":7,"meta":{"by":"you"},"tags":[1,{"a":true}]}"#)
    ));
    assert!(!matches(
        m,
        &sent(r#"{"id":7,"meta":{"by":"me"},"tags":[1]}"#)
    ));
    assert!(!matches(
        m,
        &sent(r#"{"id":"7","meta":{"by":"me"},"tags":[1,{"a":true}]}"#)
    ));
    assert!(!matches(
        m,
        &sent(r#"{"meta":{"by":"me"},"tags":[1,{"a":true}]}"#)
    ));
    assert!(!matches(m, &sent("not json")));
    assert!(!matches(m, &sent("[7]")), "an object");
    assert!(matches(
        r#"{"body":{"tag":null}}"#,
        &sent(r#"{"tag":null}"#)
    ));
    assert!(!matches(r#"{"body":{"tag":null}}"#, &sent("{}")), "present");
    assert!(matches(r#"{"body":{}}"#, &sent("{}")));
    assert!(!matches(r#"{"body":{}}"#, &sent("")), "a JSON body");
    let big = r#"{"body":{"n":18446744073709551615}}"#;
    assert!(matches(big, &sent(r#"{"n":18446744073709551615}"#)));
    assert!(!matches(big, &sent(r#"{"n":-1}"#)));
}

#[test]
fn numbers_are_compared_exactly_never_through_a_float() {
    let sent = |body| post(body);
    // 2^53 is a double; 2^53 + 1 is not, and rounds to it.
    let two_53 = r#"{"body":{"id":9007199254740992.0}}"#;
    assert!(matches(two_53, &sent(r#"{"id":9007199254740992}"#)));
    assert!(!matches(two_53, &sent(r#"{"id":9007199254740993}"#)));
    let two_53_1 = r#"{"body":{"id":9007199254740993}}"#;
    assert!(matches(two_53_1, &sent(r#"{"id":9007199254740993.0}"#)));
    assert!(matches(two_53_1, &sent(r#"{"id":90071992547409930e-1}"#)));
    assert!(!matches(two_53_1, &sent(r#"{"id":9007199254740992.0}"#)));
    assert!(!matches(two_53_1, &sent(r#"{"id":9007199254740993.5}"#)));
    let big = r#"{"body":{"ids":[-9223372036854775808,9223372036854775807]}}"#;
    assert!(matches(
        big,
        &sent(r#"{"ids":[-9223372036854775808,9223372036854775807.0]}"#)
    ));
    assert!(!matches(
        big,
        &sent(r#"{"ids":[-9223372036854775808,9223372036854775806]}"#)
    ));
    // Other numbers as doubles.
    assert!(matches(r#"{"body":{"x":0.5}}"#, &sent(r#"{"x":5e-1}"#)));
    assert!(!matches(r#"{"body":{"x":0.5}}"#, &sent(r#"{"x":0.25}"#)));
    // A body that gives a member twice is no JSON object to match.
    assert!(!matches(
        r#"{"body":{"id":1}}"#,
        &sent(r#"{"id":1,"id":1}"#)
    ));
}

#[test]
fn a_deeply_nested_body_is_no_json_to_match() {
    let deep = format!("{}1{}", r#"{"a":"#.repeat(200), "}".repeat(200));
    assert!(Exact::read(deep.as_bytes()).is_err());
    let fits = format!("{}1{}", r#"{"a":"#.repeat(100), "}".repeat(100));
    assert!(Exact::read(fits.as_bytes()).is_ok());
}

#[test]
fn paths_that_are_never_faulted_are_refused() {
    for path in [
        "/plants",
        "/plants/7",
        "/plants/*",
        "/plants/1*",
        "/plants*",
        "/events",
        "/healthz",
        "/openapi.json",
        "/*",
        "/p*",
        "/h*",
        "/events*",
    ] {
        assert!(faulted(path), "{path}");
    }
    for path in [
        "/metrics",
        "/metrics*",
        "/_control/faults",
        "/_control/*",
        "/_c*",
        "/plants/",
        "/plants/1/x",
        "/plants/1/*",
        "/nothing",
        "/healthz/",
        "/healthzz*",
        "/eventsx",
    ] {
        assert!(!faulted(path), "{path}");
        let m = format!(r#"{{"path":"{path}"}}"#);
        let e = matching(&m).err().unwrap();
        assert_eq!(
            e,
            format!(
                "match.path: `{path}` is never faulted (faults take /plants, /plants/{{id}}, \
                 /events, /healthz, /openapi.json)"
            )
        );
    }
}

#[test]
fn each_error_names_its_member() {
    for (m, message) in [
        (
            r#"{"query":[1]}"#,
            "match.query: must be an object of parameters and their values",
        ),
        (
            r#"{"query":{"limit":5}}"#,
            "match.query.limit: must be a string (the value as decoded)",
        ),
        (
            r#"{"query":{"":"x"}}"#,
            "match.query: a parameter has a name",
        ),
        (
            r#"{"headers":"x"}"#,
            "match.headers: must be an object of header names and their values",
        ),
        (
            r#"{"headers":{"Authorization":"Bearer *"}}"#,
            "match.headers.Authorization: a fault never matches credentials (it would keep a \
             token); match the principal instead",
        ),
        (
            r#"{"headers":{"AUTHORIZATION":"*"}}"#,
            "match.headers.AUTHORIZATION: a fault never matches credentials (it would keep a \
             token); match the principal instead",
        ),
        (
            r#"{"headers":{"X Bad":"1"}}"#,
            "match.headers.X Bad: must be a header name",
        ),
        (
            r#"{"headers":{"X-A":"1","x-a":"2"}}"#,
            "match.headers.x-a: the same header is given twice",
        ),
        (
            r#"{"headers":{"X-A":"é"}}"#,
            "match.headers.X-A: must be a string of visible ASCII, exact or ending in `*`",
        ),
        (
            r#"{"headers":{"X-A":1}}"#,
            "match.headers.X-A: must be a string of visible ASCII, exact or ending in `*`",
        ),
        (
            r#"{"body":[1]}"#,
            "match.body: must be a JSON object (members the body holds)",
        ),
        (
            r#"{"webhook":"wh_1","body":{}}"#,
            "match.body: a webhook delivery has none",
        ),
        (
            r#"{"target":"webhook","headers":{"X-A":"1"}}"#,
            "match.headers: a webhook delivery has none",
        ),
        (
            r#"{"target":"webhook","query":{"a":"1"}}"#,
            "match.query: a webhook delivery has none",
        ),
    ] {
        assert_eq!(matching(m).err().as_deref(), Some(message), "{m}");
    }
}
