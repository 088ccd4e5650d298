use super::parse;

#[test]
fn each_error_names_its_member() {
    for (body, member) in [
        (
            r#"{"match":{"path":"plants"},"action":{"kind":"close"}}"#,
            "match.path",
        ),
        (
            r#"{"action":{"kind":"status","status":199}}"#,
            "action.status",
        ),
        (r#"{"action":{"kind":"status"}}"#, "action.status"),
        (r#"{"action":{"kind":"close"},"times":0}"#, "times"),
        (
            r#"{"action":{"kind":"close"},"probability":0}"#,
            "probability",
        ),
        (
            r#"{"action":{"kind":"close"},"probability":1.5}"#,
            "probability",
        ),
        (r#"{"action":{"kind":"delay","ms":60001}}"#, "action.ms"),
        (r#"{"action":{"kind":"truncate"},"when":"before"}"#, "when"),
        (r#"{"action":{"kind":"close"},"colour":1}"#, "colour"),
        (r#"{"action":{"kind":"close","ms":1}}"#, "action.ms"),
        (r#"{"action":{"kind":"explode"}}"#, "action.kind"),
        (r#"{"action":{"kind":"duplicate"}}"#, "action.kind"),
        (
            r#"{"match":{"webhook":"wh_1"},"action":{"kind":"reset"}}"#,
            "action.kind",
        ),
        (
            r#"{"match":{"method":"post"},"action":{"kind":"close"}}"#,
            "match.method",
        ),
        (
            r#"{"match":{"who":"x"},"action":{"kind":"close"}}"#,
            "match.who",
        ),
        (r#"{"action":{"kind":"close"},"seed":1}"#, "seed"),
        (
            r#"{"action":{"kind":"close"},"probability":0.5,"seed":9007199254740993}"#,
            "seed",
        ),
        (r#"{}"#, "action"),
    ] {
        let e = parse(body.as_bytes())
            .err()
            .unwrap_or_else(|| panic!("{body} passed"));
        assert!(e.starts_with(&format!("{member}:")), "{body}: {e}");
    }
}

/// Each new member and bound of an action, with its exact message.
#[test]
fn the_new_members_and_bounds_are_checked() {
    for (action, message) in [
        (
            r#"{"kind":"status","status":204,"body":"x"}"#,
            "action.body: a 204 answer has no body",
        ),
        (
            r#"{"kind":"status","status":304,"content_type":"text/plain"}"#,
            "action.content_type: a 304 answer has no body",
        ),
        (
            r#"{"kind":"status","status":200,"body":"x","message":"m"}"#,
            "action.message: not with `body` (the body is sent as it is)",
        ),
        (
            r#"{"kind":"status","status":200,"body":5}"#,
            "action.body: must be a string",
        ),
        (
            r#"{"kind":"status","status":200,"content_type":"text/\nhtml"}"#,
            "action.content_type: must be a media type of 1 to 256 visible ASCII \
             characters, such as \"text/html; charset=utf-8\"",
        ),
        (
            r#"{"kind":"status","status":600}"#,
            "action.status: must be an integer from 200 to 599",
        ),
        (
            r#"{"kind":"delay","ms":{"min":5}}"#,
            "action.ms.max: is required (from 0 to 60000)",
        ),
        (
            r#"{"kind":"delay","ms":{"min":5,"max":4}}"#,
            "action.ms.max: must be at least `min` (5)",
        ),
        (
            r#"{"kind":"delay","ms":{"min":0,"max":60001}}"#,
            "action.ms.max: must be an integer from 0 to 60000",
        ),
        (
            r#"{"kind":"delay","ms":{"min":0,"max":1,"mean":0}}"#,
            "action.ms.mean: unknown member (known: min, max)",
        ),
        (
            r#"{"kind":"delay","ms":"5"}"#,
            "action.ms: must be an integer from 0 to 60000, or {\"min\": A, \"max\": B}",
        ),
        (
            r#"{"kind":"truncate","bytes":16777217}"#,
            "action.bytes: must be an integer from 0 to 16777216",
        ),
        (
            r#"{"kind":"truncate","bytes":-1}"#,
            "action.bytes: must be an integer from 0 to 16777216",
        ),
        (
            r#"{"kind":"trickle","every_ms":10}"#,
            "action.bytes: is required (from 1 to 65536)",
        ),
        (
            r#"{"kind":"trickle","bytes":0,"every_ms":10}"#,
            "action.bytes: must be an integer from 1 to 65536",
        ),
        (
            r#"{"kind":"trickle","bytes":65537,"every_ms":10}"#,
            "action.bytes: must be an integer from 1 to 65536",
        ),
        (
            r#"{"kind":"trickle","bytes":1}"#,
            "action.every_ms: is required (from 1 to 10000)",
        ),
        (
            r#"{"kind":"trickle","bytes":1,"every_ms":10001}"#,
            "action.every_ms: must be an integer from 1 to 10000",
        ),
        (
            r#"{"kind":"trickle","bytes":1,"every_ms":0}"#,
            "action.every_ms: must be an integer from 1 to 10000",
        ),
        (
            r#"{"kind":"trickle","bytes":1,"every_ms":1,"ms":1}"#,
            "action.ms: unknown member (known: kind, bytes, every_ms)",
        ),
    ] {
        let body = format!(r#"{{"action":{action}}}"#);
        assert_eq!(
            parse(body.as_bytes()).err().as_deref(),
            Some(message),
            "{body}"
        );
    }
    let webhook =
        r#"{"match":{"webhook":"wh_1"},"action":{"kind":"status","status":500,"body":"x"}}"#;
    assert_eq!(
        parse(webhook.as_bytes()).err().as_deref(),
        Some("action.body: unknown member (known: kind, status, retry_after, message)")
    );
    let before = r#"{"action":{"kind":"trickle","bytes":1,"every_ms":1},"when":"before"}"#;
    assert_eq!(
        parse(before.as_bytes()).err().as_deref(),
        Some("when: `trickle` acts on an answer, so it is always \"after\"")
    );
    let seed = r#"{"action":{"kind":"delay","ms":5},"seed":1}"#;
    assert_eq!(
        parse(seed.as_bytes()).err().as_deref(),
        Some("seed: only with `probability` or a delay range (`ms` as {min, max})")
    );
    let ok = [
        r#"{"action":{"kind":"status","status":200,"body":"{not json","content_type":"application/json"}}"#,
        r#"{"action":{"kind":"status","status":204}}"#,
        r#"{"action":{"kind":"status","status":302,"retry_after":1}}"#,
        r#"{"action":{"kind":"delay","ms":{"min":0,"max":60000}},"seed":1}"#,
        r#"{"action":{"kind":"truncate","bytes":0}}"#,
        r#"{"action":{"kind":"trickle","bytes":65536,"every_ms":10000},"when":"after"}"#,
    ];
    for body in ok {
        assert!(parse(body.as_bytes()).is_ok(), "{body}");
    }
}
