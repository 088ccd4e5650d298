//! How a request's body is framed, checked strictly before anything reads it: exactly one
//! `Content-Length` of digits only, or `Transfer-Encoding: chunked` alone, never both.
//! Anything else is 400 and the connection is closed after the answer, so no byte after a
//! bad frame is ever read as a request (request smuggling behind a proxy that frames
//! differently).
//!
//! tiny_http parses `Content-Length` with `usize::from_str` (so `+5` is 5) and takes an
//! unparsable one for no body at all, and its `Headers::get` sees only the first of
//! repeated headers. Its `Headers` is `Clone` and offers `get_header_mut`, so repeated
//! headers are counted on a copy by renaming each match once found: exact, through the
//! public API, and done only for requests that carry one of the two headers.

use tiny_http::{HeaderField, Headers};

/// How the request's body is delimited.
#[derive(Debug, PartialEq, Eq)]
pub enum Framing {
    /// No body.
    None,
    Length(usize),
    Chunked,
}

/// The framing of a request with these headers, or why it is refused (a 400 message).
pub fn framing(headers: &Headers) -> Result<Framing, String> {
    let has_length = headers.get("Content-Length").is_some();
    let has_encoding = headers.get("Transfer-Encoding").is_some();
    if !has_length && !has_encoding {
        return Ok(Framing::None);
    }
    let lengths = all_values(headers, "Content-Length");
    let encodings = all_values(headers, "Transfer-Encoding");
    match (lengths.as_slice(), encodings.as_slice()) {
        ([_, ..], [_, ..]) => Err("Content-Length and Transfer-Encoding together".into()),
        ([length], []) => parse_length(length).map(Framing::Length),
        ([_, _, ..], []) => Err("Content-Length is given more than once".into()),
        ([], [encoding]) if encoding.trim().eq_ignore_ascii_case("chunked") => Ok(Framing::Chunked),
        ([], [_]) => Err("Transfer-Encoding must be `chunked`".into()),
        ([], _) => Err("Transfer-Encoding is given more than once".into()),
    }
}

/// Every value of the header `name`, in order.
fn all_values(headers: &Headers, name: &str) -> Vec<String> {
    let seen: HeaderField = "X-Plant-Store-Seen".parse().expect("valid header name");
    let mut copy = headers.clone();
    let mut values = Vec::new();
    while let Some(h) = copy.get_header_mut(name) {
        values.push(h.value.as_str().to_owned());
        h.field = seen.clone();
    }
    values
}

/// A `Content-Length` value: decimal digits only (blanks around them allowed, as around
/// any header value), within `usize`.
fn parse_length(raw: &str) -> Result<usize, String> {
    let digits = raw.trim_matches([' ', '\t']);
    if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
        if let Ok(n) = digits.parse() {
            return Ok(n);
        }
    }
    Err(format!(
        "Content-Length must be decimal digits, not `{}`",
        raw.chars()
            .take(32)
            .flat_map(char::escape_debug)
            .collect::<String>()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(list: &[(&str, &str)]) -> Headers {
        Headers::try_from(list.to_vec()).unwrap()
    }

    #[test]
    fn one_length_of_digits_or_chunked_alone() {
        assert_eq!(framing(&headers(&[("Host", "x")])), Ok(Framing::None));
        assert_eq!(
            framing(&headers(&[("content-length", "12")])),
            Ok(Framing::Length(12))
        );
        assert_eq!(
            framing(&headers(&[("Content-Length", "007")])),
            Ok(Framing::Length(7))
        );
        assert_eq!(
            framing(&headers(&[("Transfer-Encoding", "Chunked")])),
            Ok(Framing::Chunked)
        );
    }

    #[test]
    fn everything_else_is_refused() {
        for bad in [
            "abc",
            "+5",
            "0x10",
            "5, 5",
            "-1",
            "",
            "1 2",
            "99999999999999999999999",
        ] {
            assert!(
                framing(&headers(&[("Content-Length", bad)])).is_err(),
                "Content-Length: {bad:?}"
            );
        }
        for bad in [
            &[("Content-Length", "0"), ("Content-Length", "5")][..],
            &[("Content-Length", "5"), ("content-length", "5")],
            &[("Content-Length", "5"), ("Transfer-Encoding", "chunked")],
            &[("Transfer-Encoding", "chunked"), ("Content-Length", "abc")],
            &[("Transfer-Encoding", "gzip, chunked")],
            &[("Transfer-Encoding", "identity")],
            &[
                ("Transfer-Encoding", "chunked"),
                ("Transfer-Encoding", "chunked"),
            ],
        ] {
            assert!(framing(&headers(bad)).is_err(), "{bad:?}");
        }
    }
}
