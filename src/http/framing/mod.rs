//! Framing: the strict reading of a request's bytes by RFC 9112's rules, as pure
//! functions over what has arrived so far (`scan_head`, `scan_chunked`). The gate
//! (`gate.rs`) feeds them what it peeked; tiny_http is lenient where a proxy in front
//! may be strict, and such disagreements about where a request ends are how a second
//! request is smuggled in:
//! - the request line is `METHOD SP TARGET SP HTTP/1.x` ended by CRLF; the target is a
//!   path (origin-form) or an absolute `http://` or `https://` URL (absolute-form, served
//!   as its path: `origin_form`), never `*` nor anything else;
//! - header lines end in CRLF, have a token for a name, no blank before the colon, and
//!   printable ASCII for a value; a line that starts with a blank (obs-fold) is refused;
//! - a body is framed by exactly one `Content-Length` of digits, or by
//!   `Transfer-Encoding: chunked` alone; chunk sizes are hex digits, chunk lines end in
//!   CRLF, and an extension holds no control character;
//! - the head is at most `MAX_HEAD_BYTES`;
//! - header names are as tiny_http takes them (`[A-Za-z0-9_-]`, within RFC 9110's tokens).

/// The largest request head (request line and header lines) accepted: past it, 431.
pub const MAX_HEAD_BYTES: usize = 32 * 1024;
/// The most chunk framing (size lines, extensions, CRLFs) a chunked body may carry
/// beside its `MAX_BODY_BYTES` of data.
pub const MAX_CHUNK_FRAMING_BYTES: usize = 4 * 1024;
/// A request (head and body) may arrive in at most this many pieces: each piece costs a
/// look (a peek) at what has arrived so far, so this bounds a trickling client's cost.
pub const MAX_PIECES: u32 = 1024;
/// The looks at one request may copy at most this much in all (about 160 looks at the
/// largest request; a 60 KB body in 300 chunks, each arriving alone, takes about 9 MB): a
/// client that trickles a large request costs a bounded amount of copying.
pub const MAX_LOOKED_BYTES: usize = 16 * 1024 * 1024;

/// How the request's body is delimited.
#[derive(Debug, PartialEq, Eq, Clone, Copy)]
pub enum Framing {
    /// No body.
    None,
    Length(usize),
    Chunked,
}

#[derive(Debug, PartialEq, Eq)]
pub enum Refusal {
    /// 400, with what was wrong.
    Malformed(String),
    /// 431: the head is over `MAX_HEAD_BYTES` (or more than the socket can hold).
    HeadTooLarge,
    /// 505: HTTP/2 or later (or 0.9).
    Version,
    /// 408: the body did not arrive whole within `--body-timeout`.
    Late,
}

/// What the gate found in the bytes before it.
#[derive(Debug, PartialEq, Eq)]
pub struct Head {
    /// Bytes of the request line and headers, final CRLF included.
    pub len: usize,
    pub framing: Framing,
    /// An `Expect` header: the client may send the body only after an interim answer.
    pub expect: Option<Expect>,
    /// No request follows this one on the connection (HTTP/1.0 without keep-alive, or
    /// `Connection: close`); the rule is tiny_http's, which reads no further either.
    pub last: bool,
    /// The first of `SINGLE_HEADERS` that the head gives more than once.
    pub repeated: Option<&'static str>,
}

/// Headers a handler refuses (400) when given more than once, rather than take the first
/// silently: tiny_http shows it the first only, so repeats are counted here.
pub const SINGLE_HEADERS: [&str; 1] = ["Last-Event-ID"];

/// A request's `Expect` header.
#[derive(Debug, PartialEq, Eq, Clone, Copy)]
pub enum Expect {
    /// `100-continue`: tiny_http sends the interim answer when the body is first read.
    Continue,
    /// Anything else: tiny_http answers 417 itself.
    Other,
}

/// A scan of the bytes seen so far.
#[derive(Debug, PartialEq, Eq)]
pub enum Scan<T> {
    /// Not enough yet: at least this many bytes in all are needed.
    More(usize),
    Done(T),
    Refused(Refusal),
}

fn malformed<T>(why: impl Into<String>) -> Scan<T> {
    Scan::Refused(Refusal::Malformed(why.into()))
}

/// A token character (RFC 9110 `tchar`).
fn is_tchar(b: u8) -> bool {
    const TCHAR: [bool; 256] = {
        let mut table = [false; 256];
        let mut b = 0;
        while b < 256 {
            let c = b as u8;
            table[b] = c.is_ascii_alphanumeric()
                || matches!(
                    c,
                    b'!' | b'#'
                        | b'$'
                        | b'%'
                        | b'&'
                        | b'\''
                        | b'*'
                        | b'+'
                        | b'-'
                        | b'.'
                        | b'^'
                        | b'_'
                        | b'`'
                        | b'|'
                        | b'~'
                );
            b += 1;
        }
        table
    };
    TCHAR[b as usize]
}

/// Scans a request head at the start of `buf`. Each line is checked as soon as it is
/// whole (the request line first), so a bad line is refused without waiting for the rest.
pub fn scan_head(buf: &[u8]) -> Scan<Head> {
    let mut start = 0;
    let mut request_line: Option<&[u8]> = None;
    let mut lengths = Vec::new();
    let mut encodings = Vec::new();
    let mut expect = None;
    let mut connection: Option<Vec<u8>> = None;
    let mut singles = [0u8; SINGLE_HEADERS.len()];
    loop {
        let Some(at) = buf[start..].iter().position(|&b| b == b'\n' || b == b'\r') else {
            if buf.len() > MAX_HEAD_BYTES {
                return Scan::Refused(Refusal::HeadTooLarge);
            }
            if request_line.is_none() {
                // What cannot become a request line is refused at once; an HTTP/2
                // preface is judged once its line is whole.
                if let Err(r) = check_method_so_far(buf) {
                    return Scan::Refused(r);
                }
            }
            return Scan::More(buf.len() + 1);
        };
        let end = start + at;
        if buf[end] == b'\n' {
            return malformed("a line ends in a bare LF; lines end in CRLF");
        }
        match buf.get(end + 1) {
            None => return Scan::More(end + 2),
            Some(b'\n') => {}
            Some(_) => return malformed("a bare CR in the request head"),
        }
        if end + 2 > MAX_HEAD_BYTES {
            return Scan::Refused(Refusal::HeadTooLarge);
        }
        let line = &buf[start..end];
        start = end + 2;
        if request_line.is_none() {
            if line.is_empty() {
                return malformed("an empty line where the request line belongs");
            }
            if let Err(r) = check_request_line(line) {
                return Scan::Refused(r);
            }
            request_line = Some(line);
            continue;
        }
        if line.is_empty() {
            break;
        }
        let (name, value) = match header(line) {
            Ok(h) => h,
            Err(why) => return malformed(why),
        };
        if let Some(i) = SINGLE_HEADERS
            .iter()
            .position(|h| name.eq_ignore_ascii_case(h.as_bytes()))
        {
            singles[i] = singles[i].saturating_add(1);
        }
        if name.eq_ignore_ascii_case(b"content-length") {
            lengths.push(value);
        } else if name.eq_ignore_ascii_case(b"transfer-encoding") {
            encodings.push(value);
        } else if name.eq_ignore_ascii_case(b"expect") && expect.is_none() {
            // tiny_http looks at the first one only.
            expect = Some(match value.eq_ignore_ascii_case(b"100-continue") {
                true => Expect::Continue,
                false => Expect::Other,
            });
        } else if name.eq_ignore_ascii_case(b"connection") && connection.is_none() {
            connection = Some(value.to_ascii_lowercase());
        }
    }
    let request_line = request_line.unwrap_or_default();
    let framing = match framing(&lengths, &encodings) {
        Ok(f) => f,
        Err(why) => return malformed(why),
    };
    let has = |word: &[u8]| {
        connection
            .as_deref()
            .is_some_and(|c| c.windows(word.len()).any(|w| w == word))
    };
    let http10 = request_line.ends_with(b"HTTP/1.0");
    let last = has(b"close") || has(b"upgrade") || (http10 && !has(b"keep-alive"));
    if has(b"upgrade") && framing != Framing::None {
        // tiny_http hands such a request the whole rest of the stream as its body.
        return malformed("a request with a body cannot ask for a protocol upgrade");
    }
    Scan::Done(Head {
        len: start,
        framing,
        expect,
        last,
        repeated: SINGLE_HEADERS
            .iter()
            .zip(singles)
            .find_map(|(h, n)| (n > 1).then_some(*h)),
    })
}

/// The method, the target and the header fields (in order, names as written, values
/// without the blanks around them) of a head that `scan_head` accepted: so it is only
/// split here, not checked again.
pub fn fields(head: &[u8]) -> Option<(&str, &str, impl Iterator<Item = (&str, &str)>)> {
    let text = std::str::from_utf8(head).ok()?;
    let mut lines = text.split('\n').map(|l| l.strip_suffix('\r').unwrap_or(l));
    let mut request = lines.next()?.split(' ');
    let (method, target) = (request.next()?, request.next()?);
    let fields = lines.take_while(|l| !l.is_empty()).filter_map(|l| {
        let (name, value) = l.split_once(':')?;
        Some((name, value.trim_matches([' ', '\t'])))
    });
    Some((method, target, fields))
}

/// While the request line is still arriving: refuse at once what cannot become one.
fn check_method_so_far(partial: &[u8]) -> Result<(), Refusal> {
    let method = partial.split(|&b| b == b' ').next().unwrap_or(partial);
    if method.iter().all(|&b| is_tchar(b)) {
        Ok(())
    } else {
        Err(Refusal::Malformed("the request line is malformed".into()))
    }
}

/// `METHOD SP TARGET SP HTTP/1.0|1.1`.
fn check_request_line(line: &[u8]) -> Result<(), Refusal> {
    let bad = || Refusal::Malformed("the request line is malformed".into());
    let mut parts = line.split(|&b| b == b' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(bad());
    };
    if method.is_empty() || !method.iter().all(|&b| is_tchar(b)) {
        return Err(bad());
    }
    if target.is_empty() || !target.iter().all(|&b| (0x21..0x7f).contains(&b)) {
        return Err(bad());
    }
    // The version first: an HTTP/2 preface (`PRI * HTTP/2.0`) is 505 whatever its target.
    match version {
        b"HTTP/1.0" | b"HTTP/1.1" => {}
        [b'H', b'T', b'T', b'P', b'/', major, b'.', minor]
            if major.is_ascii_digit() && minor.is_ascii_digit() =>
        {
            return Err(Refusal::Version);
        }
        _ => return Err(bad()),
    }
    // RFC 9112's forms a server serves: a path (origin-form), or an absolute URL
    // (absolute-form, served as its path). `*` (asterisk-form) asks about the server as a
    // whole, which no route answers; authority-form is for proxies; `GET plants` is none.
    if target == b"*" {
        return Err(Refusal::Malformed(
            "the request target `*` is not served: send a path that starts with /".into(),
        ));
    }
    if target[0] != b'/' && absolute_path(target).is_none() {
        return Err(Refusal::Malformed(
            "the request target must be a path that starts with /, or an absolute http URL".into(),
        ));
    }
    Ok(())
}

/// A header line's name and value (blanks around the value removed).
fn header(line: &[u8]) -> Result<(&[u8], &[u8]), String> {
    if line[0] == b' ' || line[0] == b'\t' {
        return Err("a header line starts with a blank (obsolete line folding)".into());
    }
    let Some(colon) = line.iter().position(|&b| b == b':') else {
        return Err("a header line has no colon".into());
    };
    let name = &line[..colon];
    // tiny_http takes only these of RFC 9110's token characters in a name.
    if name.is_empty()
        || !name
            .iter()
            .all(|&b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    {
        return Err("a header name may hold only letters, digits, `-` and `_`".into());
    }
    // Blanks around the value (RFC 9110's OWS: spaces and tabs) are not part of it.
    let blank = |b: &u8| *b == b' ' || *b == b'\t';
    let start = line[colon + 1..].iter().position(|b| !blank(b));
    let value = match start {
        Some(start) => {
            let value = &line[colon + 1 + start..];
            &value[..value
                .iter()
                .rposition(|b| !blank(b))
                .map_or(0, |end| end + 1)]
        }
        None => &[],
    };
    if value.contains(&b'\t')
        && value
            .iter()
            .all(|&b| b == b'\t' || (0x20..0x7f).contains(&b))
    {
        // RFC 9110 allows it; tiny_http, which parses what the gate lets through, does not.
        return Err("a header value holds a tab inside it, which this server's HTTP parser does not accept; send a space".into());
    }
    if !value.iter().all(|&b| (0x20..0x7f).contains(&b)) {
        return Err("a header value holds a control or non-ASCII character".into());
    }
    Ok((name, value))
}

/// Exactly one `Content-Length` of digits, or `Transfer-Encoding: chunked` alone, or
/// neither.
fn framing(lengths: &[&[u8]], encodings: &[&[u8]]) -> Result<Framing, String> {
    match (lengths, encodings) {
        ([], []) => Ok(Framing::None),
        ([_, ..], [_, ..]) => Err("Content-Length and Transfer-Encoding together".into()),
        ([length], []) => parse_length(length).map(Framing::Length),
        ([_, _, ..], []) => Err("Content-Length is given more than once".into()),
        ([], [b"chunked"]) => Ok(Framing::Chunked),
        ([], [coding]) if coding.eq_ignore_ascii_case(b"chunked") => Err(
            "Transfer-Encoding must be written `chunked`, in lower case (the only spelling this server's HTTP parser takes)".into(),
        ),
        ([], [_]) => Err("Transfer-Encoding must be `chunked`".into()),
        ([], _) => Err("Transfer-Encoding is given more than once".into()),
    }
}

/// A `Content-Length` value: decimal digits only. A value beyond `usize` (4 GiB on a
/// 32-bit target) is `usize::MAX`: too large a body (413), as it is on every target, not
/// bad framing.
fn parse_length(raw: &[u8]) -> Result<usize, String> {
    if !raw.is_empty() && raw.iter().all(u8::is_ascii_digit) {
        return Ok(raw.iter().fold(0usize, |n, d| {
            n.saturating_mul(10).saturating_add(usize::from(d - b'0'))
        }));
    }
    Err(format!(
        "Content-Length must be decimal digits, not `{}`",
        crate::api::error::printable(&String::from_utf8_lossy(raw), 32)
    ))
}

/// A chunked body, scanned.
#[derive(Debug, PartialEq, Eq)]
pub struct Chunked {
    /// Raw bytes of the body, last chunk and final CRLF included.
    pub len: usize,
    /// Bytes of data in it.
    pub data: usize,
}

/// Where a scan of a chunked body resumes: the start of the first chunk not yet whole,
/// and the data before it. A later scan of more of the same bytes starts there, so a body
/// that arrives in many pieces is scanned once in all, not once per piece.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Resume {
    at: usize,
    data: usize,
}

/// Scans a chunked body at the start of `buf`, from where `resume` says an earlier scan
/// of the same bytes stopped (and records where this one stops). More than `max_data`
/// bytes of data is `Done` with `data` over `max_data`: the body is too long (413; the
/// rest is never read as a request). More than `MAX_CHUNK_FRAMING_BYTES` of framing is
/// refused.
pub fn scan_chunked(buf: &[u8], max_data: usize, resume: &mut Resume) -> Scan<Chunked> {
    let Resume { mut at, mut data } = *resume;
    loop {
        *resume = Resume { at, data };
        if data > max_data {
            return Scan::Done(Chunked { len: at, data });
        }
        // Everything scanned so far that is not data is framing; it is bounded on its
        // own, whatever the data, so a small body cannot carry the data's allowance in
        // framing (and the whole body always fits the gate's view).
        if at - data > MAX_CHUNK_FRAMING_BYTES {
            return malformed("a chunked body carries too much framing (chunk lines)");
        }
        let line_end = match line(&buf[at..]) {
            Scan::More(n) => return Scan::More(at + n),
            Scan::Refused(r) => return Scan::Refused(r),
            Scan::Done(n) => at + n,
        };
        let line = &buf[at..line_end - 2];
        let (size, ext) = match line.iter().position(|&b| b == b';') {
            Some(semi) => (&line[..semi], &line[semi..]),
            None => (line, &line[line.len()..]),
        };
        if size.is_empty() || size.len() > 16 || !size.iter().all(u8::is_ascii_hexdigit) {
            return malformed("a chunk size must be hex digits");
        }
        if !ext.iter().all(|&b| b == b'\t' || (0x20..0x7f).contains(&b)) {
            return malformed("a chunk extension holds a control character");
        }
        // At most 16 hex digits: within u64, and past any limit where usize is smaller.
        let size = std::str::from_utf8(size)
            .ok()
            .and_then(|s| usize::from_str_radix(s, 16).ok())
            .unwrap_or(usize::MAX);
        at = line_end;
        if size == 0 {
            // No trailer fields: the body ends with an empty line.
            return match buf.get(at..at + 2) {
                None if buf.len() <= at + 1 && buf[at..].iter().all(|&b| b == b'\r') => {
                    Scan::More(at + 2)
                }
                Some(b"\r\n") => Scan::Done(Chunked { len: at + 2, data }),
                _ => malformed("trailer fields are not accepted after the last chunk"),
            };
        }
        data = data.saturating_add(size);
        if data > max_data {
            return Scan::Done(Chunked { len: at, data });
        }
        let end = at + size;
        match buf.get(end..end + 2) {
            None if buf.len() < end + 2 => {
                if buf.len() == end + 1 && buf[end] != b'\r' {
                    return malformed("chunk data must be followed by CRLF");
                }
                return Scan::More(end + 2);
            }
            Some(b"\r\n") => at = end + 2,
            _ => return malformed("chunk data must be followed by CRLF"),
        }
    }
}

/// The longest chunk line (size, extension and CRLF).
pub const MAX_CHUNK_LINE_BYTES: usize = 1024;

/// The length of the line at the start of `buf`, its CRLF included: at most
/// `MAX_CHUNK_LINE_BYTES`, no bare CR or LF. The same answer however the bytes arrive: a
/// line is too long once its CRLF cannot end within the bound, whether its end has come.
fn line(buf: &[u8]) -> Scan<usize> {
    // The last place a line's CR may be.
    const LAST_CR: usize = MAX_CHUNK_LINE_BYTES - 2;
    match buf.iter().position(|&b| b == b'\r' || b == b'\n') {
        Some(i) if i > LAST_CR => malformed("a chunk line is too long"),
        None if buf.len() > LAST_CR => malformed("a chunk line is too long"),
        None => Scan::More(buf.len() + 1),
        Some(i) if buf[i] == b'\n' => malformed("a chunk line ends in a bare LF"),
        Some(i) => match buf.get(i + 1) {
            None => Scan::More(i + 2),
            Some(b'\n') => Scan::Done(i + 2),
            Some(_) => malformed("a bare CR in a chunk line"),
        },
    }
}

mod target;

use target::absolute_path;
pub use target::origin_form;

#[cfg(test)]
mod tests;
