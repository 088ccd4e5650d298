//! The strict reading of heads and chunked bodies.

use super::*;

fn head(raw: &str) -> Scan<Head> {
    scan_head(raw.as_bytes())
}

fn refused(raw: &str) -> bool {
    matches!(head(raw), Scan::Refused(_))
}

#[test]
fn a_plain_head_is_whole_at_its_empty_line() {
    let raw = "GET /plants HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer t\r\n\r\nNEXT";
    assert_eq!(
        head(raw),
        Scan::Done(Head {
            len: raw.len() - 4,
            framing: Framing::None,
            expect: None,
            last: false,
            repeated: None
        })
    );
    let post = "POST /plants HTTP/1.1\r\ncontent-length: 12\r\nExpect: 100-Continue\r\n\r\n";
    assert_eq!(
        head(post),
        Scan::Done(Head {
            len: post.len(),
            framing: Framing::Length(12),
            expect: Some(Expect::Continue),
            last: false,
            repeated: None
        })
    );
}

/// A declared length beyond `usize` (past 4 GiB on armv7, past 2^64 anywhere) is a body
/// too large, not bad framing: 413 on every target.
#[test]
fn a_length_beyond_usize_is_the_largest_length() {
    for digits in [
        "1000000000000000",
        "99999999999999999999999",
        "000000000000000000000012",
    ] {
        let post = format!("POST /plants HTTP/1.1\r\nContent-Length: {digits}\r\n\r\n");
        let Scan::Done(h) = head(&post) else {
            panic!("{digits}: {:?}", head(&post));
        };
        let expected = digits.parse::<u128>().unwrap();
        let expected = usize::try_from(expected).unwrap_or(usize::MAX);
        assert_eq!(h.framing, Framing::Length(expected), "{digits}");
    }
}

#[test]
fn a_partial_head_asks_for_more() {
    assert_eq!(head(""), Scan::More(1));
    assert_eq!(
        head("P"),
        Scan::More(2),
        "a strict prefix of the HTTP/2 preface"
    );
    assert_eq!(head("GET / HTTP/1.1\r"), Scan::More(16));
    assert_eq!(head("GET / HTTP/1.1\r\nHost: x\r\n"), Scan::More(26));
}

#[test]
fn lenient_heads_are_refused() {
    for raw in [
        "GET / HTTP/1.1\nHost: x\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: x\n\r\n",
        "GET / HTTP/1.1\r\nHost: x\rY\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: x\r\n folded\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: x\r\n\tfolded\r\n\r\n",
        "GET / HTTP/1.1\r\nHost : x\r\n\r\n",
        "GET / HTTP/1.1\r\nX.Forwarded-For: x\r\n\r\n",
        "GET / HTTP/1.1\r\n: x\r\n\r\n",
        "GET / HTTP/1.1\r\nNoColon\r\n\r\n",
        "GET / HTTP/1.1\r\nX: a\x01b\r\n\r\n",
        "GET  / HTTP/1.1\r\n\r\n",
        "GET / HTTP/1.1 \r\n\r\n",
        "GET /\r\n\r\n",
        "\r\nGET / HTTP/1.1\r\n\r\n",
        "G(T / HTTP/1.1\r\n\r\n",
        "GET / HTTX/1.1\r\n\r\n",
        "POST / HTTP/1.1\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\n",
        "POST / HTTP/1.1\r\nContent-Length: +2\r\n\r\n",
        "POST / HTTP/1.1\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n",
        "POST / HTTP/1.1\r\nTransfer-Encoding: Chunked\r\n\r\n",
        "POST / HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
        "POST / HTTP/1.1\r\nConnection: Upgrade\r\nContent-Length: 2\r\n\r\n",
    ] {
        assert!(refused(raw), "{raw:?}");
    }
    assert!(
        refused("G\x00"),
        "not a method, refused before the line ends"
    );
}

#[test]
fn http2_and_later_are_505_and_long_heads_431() {
    assert_eq!(
        head("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"),
        Scan::Refused(Refusal::Version)
    );
    assert_eq!(
        head("GET / HTTP/3.0\r\n\r\n"),
        Scan::Refused(Refusal::Version)
    );
    let long = format!(
        "GET / HTTP/1.1\r\nX: {}\r\n\r\n",
        "a".repeat(MAX_HEAD_BYTES)
    );
    assert_eq!(head(&long), Scan::Refused(Refusal::HeadTooLarge));
    let unended = "a".repeat(MAX_HEAD_BYTES + 1);
    assert_eq!(head(&unended), Scan::Refused(Refusal::HeadTooLarge));
}

fn chunked(raw: &str) -> Scan<Chunked> {
    scan_chunked(raw.as_bytes(), 64, &mut Resume::default())
}

#[test]
fn strict_chunks_are_whole_at_the_last_chunk() {
    let raw = "2\r\nab\r\n1;name=value\r\nc\r\n0\r\n\r\nNEXT";
    assert_eq!(
        chunked(raw),
        Scan::Done(Chunked {
            len: raw.len() - 4,
            data: 3
        })
    );
    assert_eq!(chunked("2\r\nab"), Scan::More(7));
    assert_eq!(chunked("0\r\n"), Scan::More(5));
    assert_eq!(chunked("0\r\n\r"), Scan::More(5));
    assert_eq!(chunked("A"), Scan::More(2));
}

#[test]
fn lenient_chunks_are_refused() {
    for raw in [
        " 2\r\nab\r\n0\r\n\r\n",
        "+2\r\nab\r\n0\r\n\r\n",
        "2 \r\nab\r\n0\r\n\r\n",
        "2\nab\r\n0\r\n\r\n",
        "2\r\nab\n0\r\n\r\n",
        "2\r\nabc\r\n0\r\n\r\n",
        "0;ext\nx\r\n\r\n",
        "0;e\x01\r\n\r\n",
        "0\r\nTrailer: x\r\n\r\n",
        "0x2\r\nab\r\n0\r\n\r\n",
        "\r\n",
    ] {
        assert!(matches!(chunked(raw), Scan::Refused(_)), "{raw:?}");
    }
}

#[test]
fn too_much_chunk_framing_is_refused_not_cut() {
    let many = "1;xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\r\na\r\n".repeat(200);
    assert!(matches!(
        scan_chunked(many.as_bytes(), 1024, &mut Resume::default()),
        Scan::Refused(_)
    ));
}

#[test]
fn framing_is_bounded_on_its_own_whatever_the_data_allowance() {
    // 60 chunks of one byte, each with a 1,000-byte extension: 60 KB of framing for 60
    // bytes of data, under the 64 KiB allowed for data. Refused as framing (400), not
    // taken for a body too large.
    let ext = "x".repeat(1000);
    let many = format!("1;{ext}\r\na\r\n").repeat(60) + "0\r\n\r\n";
    let Scan::Refused(Refusal::Malformed(why)) =
        scan_chunked(many.as_bytes(), 65536, &mut Resume::default())
    else {
        panic!("not refused");
    };
    assert!(why.contains("too much framing"), "{why}");
    // Just under the bound, with the largest data allowed beside it, is a body.
    let ext = "x".repeat(1000);
    let framing = format!("1;{ext}\r\na\r\n").repeat(3);
    let raw = format!("{framing}{:x}\r\n{}\r\n0\r\n\r\n", 65533, "a".repeat(65533));
    assert!(matches!(
        scan_chunked(raw.as_bytes(), 65536, &mut Resume::default()),
        Scan::Done(Chunked { data: 65536, .. })
    ));
}

#[test]
fn a_chunked_body_over_the_limit_is_done_as_too_long() {
    let raw = format!("41\r\n{}\r\n0\r\n\r\n", "a".repeat(65));
    assert!(matches!(
        chunked(&raw),
        Scan::Done(Chunked { data: 65, .. })
    ));
}

#[test]
fn a_body_scanned_piece_by_piece_is_scanned_once_and_ends_as_scanned_whole() {
    let bodies = [
        "2\r\nab\r\n1;name=value\r\nc\r\n0\r\n\r\nNEXT".to_owned(),
        "1\r\n \r\n".repeat(300) + "0\r\n\r\n",
        "41\r\n".to_owned() + &"a".repeat(65) + "\r\n0\r\n\r\n",
        "2\r\nab\r\n1\r\nc\n0\r\n\r\n".to_owned(),
    ];
    for body in &bodies {
        let whole = scan_chunked(body.as_bytes(), 64, &mut Resume::default());
        // Every split into a first piece and the rest, as the gate sees it grow.
        for cut in 0..body.len() {
            let mut resume = Resume::default();
            let first = scan_chunked(&body.as_bytes()[..cut], 64, &mut resume);
            if !matches!(first, Scan::More(_)) {
                assert_eq!(first, whole, "{body:?} cut at {cut}");
                continue;
            }
            assert_eq!(
                scan_chunked(body.as_bytes(), 64, &mut resume),
                whole,
                "{body:?} cut at {cut}"
            );
        }
    }
    // Byte by byte, the scan moves on: the work is the body's length, not its square.
    let body = "1\r\n \r\n".repeat(300) + "0\r\n\r\n";
    let mut resume = Resume::default();
    for end in 1..body.len() {
        let before = resume;
        assert!(matches!(
            scan_chunked(&body.as_bytes()[..end], 1024, &mut resume),
            Scan::More(_)
        ));
        assert!(resume.at >= before.at);
        assert!(end - resume.at <= 6, "resumes within the chunk in progress");
    }
}

#[test]
fn token_characters_are_rfc_9110_s() {
    for b in 0..=255u8 {
        let tchar = b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b);
        assert_eq!(is_tchar(b), tchar, "{b}");
    }
}

#[test]
fn a_once_only_header_given_twice_is_refused_naming_it() {
    for (raw, name) in [
        (
            "GET / HTTP/1.1\r\nAuthorization: Bearer a\r\nauthorization: Bearer b\r\n\r\n",
            "Authorization",
        ),
        (
            "GET / HTTP/1.1\r\nAuthorization: Bearer a\r\nAuthorization: Bearer a\r\n\r\n",
            "Authorization",
        ),
        (
            "GET / HTTP/1.1\r\nHost: a\r\nX: 1\r\nHOST: b\r\n\r\n",
            "Host",
        ),
    ] {
        match head(raw) {
            Scan::Refused(Refusal::Malformed(why)) => {
                assert_eq!(why, format!("the {name} header is given more than once"))
            }
            other => panic!("{raw:?}: {other:?}"),
        }
    }
    let once =
        "GET / HTTP/1.1\r\nHost: a\r\nAuthorization: Bearer a\r\nProxy-Authorization: b\r\n\r\n";
    assert!(matches!(head(once), Scan::Done(_)));
}

#[test]
fn a_single_header_given_twice_is_named() {
    let twice = "GET /events HTTP/1.1\r\nLast-Event-ID: 1\r\nlast-event-id: 2\r\n\r\n";
    let once = "GET /events HTTP/1.1\r\nLast-Event-ID:\r\nAccept: a\r\nAccept: b\r\n\r\n";
    let repeated = |raw: &str| match head(raw) {
        Scan::Done(h) => h.repeated,
        other => panic!("{other:?}"),
    };
    assert_eq!(repeated(twice), Some("Last-Event-ID"));
    assert_eq!(repeated(once), None);
}

#[test]
fn a_chunk_line_s_bound_does_not_depend_on_how_it_arrives() {
    // A line (size, extension, CRLF) of `len` bytes, then its data and the last chunk.
    let body = |len: usize| format!("1;{}\r\nx\r\n0\r\n\r\n", "e".repeat(len - 4));
    let answer = |raw: &str, cut: usize| {
        let mut resume = Resume::default();
        match scan_chunked(&raw.as_bytes()[..cut], 64, &mut resume) {
            Scan::More(_) => scan_chunked(raw.as_bytes(), 64, &mut resume),
            early => early,
        }
    };
    for (len, whole) in [
        (MAX_CHUNK_LINE_BYTES, true),
        (MAX_CHUNK_LINE_BYTES + 1, false),
        (1105, false),
    ] {
        let raw = body(len);
        assert_eq!(raw.find('\n'), Some(len - 1));
        for cut in 1..=raw.len() {
            let got = answer(&raw, cut);
            if whole {
                assert_eq!(
                    got,
                    Scan::Done(Chunked {
                        len: raw.len(),
                        data: 1
                    }),
                    "{len} cut at {cut}"
                );
            } else {
                assert_eq!(
                    got,
                    malformed("a chunk line is too long"),
                    "{len} cut at {cut}"
                );
            }
        }
    }
}

#[test]
fn blanks_around_a_header_value_are_spaces_and_tabs_only() {
    assert_eq!(header(b"A: \t v w \t"), Ok((&b"A"[..], &b"v w"[..])));
    assert_eq!(header(b"A:"), Ok((&b"A"[..], &b""[..])));
    assert_eq!(header(b"A: \t"), Ok((&b"A"[..], &b""[..])));
    let tab = header(b"A: v\tw").unwrap_err();
    assert!(tab.contains("a tab inside it"), "{tab}");
    for bad in [&b"A: v\x0c"[..], b"A: \x0bv", b"A: v\x01w", b"A: v\xc3\xa9"] {
        assert_eq!(
            header(bad),
            Err("a header value holds a control or non-ASCII character".into()),
            "{bad:?}"
        );
    }
}

#[test]
fn a_request_target_is_a_path_or_an_absolute_http_url_never_a_star() {
    for ok in [
        "/plants",
        "http://h/plants",
        "HTTPS://127.0.0.1:8080/plants?limit=1",
        "http://h",
        "http://[::1]:80?x=1",
    ] {
        let raw = format!("GET {ok} HTTP/1.1\r\nHost: h\r\n\r\n");
        assert!(matches!(head(&raw), Scan::Done(_)), "{ok}");
    }
    let star = "OPTIONS * HTTP/1.1\r\nHost: h\r\n\r\n";
    assert_eq!(
        head(star),
        malformed("the request target `*` is not served: send a path that starts with /")
    );
    for bad in [
        "plants",
        "plants/1",
        "?x=1",
        "ftp://h/plants",
        "http:///plants",
        "http://u@h/plants",
        "http:/h/plants",
        "http://h#top",
        "h:8080",
        "urn:plants",
    ] {
        let raw = format!("GET {bad} HTTP/1.1\r\nHost: h\r\n\r\n");
        assert_eq!(
            head(&raw),
            malformed(
                "the request target must be a path that starts with /, or an absolute http URL"
            ),
            "{bad}"
        );
    }
}

#[test]
fn an_absolute_target_is_served_as_its_path_and_query() {
    for (target, served) in [
        ("/plants?limit=1", None),
        ("http://h/plants", Some("/plants")),
        (
            "HTTP://127.0.0.1:8080/plants?limit=1",
            Some("/plants?limit=1"),
        ),
        ("https://h:1/_control/reset", Some("/_control/reset")),
        ("http://h", Some("/")),
        ("http://h?x=1", Some("/?x=1")),
        ("http://h/a/../b", Some("/a/../b")),
    ] {
        assert_eq!(origin_form(target).as_deref(), served, "{target}");
    }
}

#[test]
fn an_accepted_head_splits_into_its_fields_as_written() {
    let raw = "POST /plants?x=1 HTTP/1.1\r\nHost: h\r\nx-Trace:  a b\t\r\nEmpty:\r\n\r\nbody";
    let Scan::Done(h) = head(raw) else {
        panic!("refused")
    };
    let (method, target, found) = fields(&raw.as_bytes()[..h.len]).unwrap();
    assert_eq!((method, target), ("POST", "/plants?x=1"));
    let found: Vec<_> = found.collect();
    assert_eq!(found, [("Host", "h"), ("x-Trace", "a b"), ("Empty", "")]);
}
