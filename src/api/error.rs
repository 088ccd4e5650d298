//! `ApiError`: every way a request can fail, one variant per row of the contract's error
//! table, and the one place where an error becomes a status, headers and a JSON body.

use std::borrow::Cow;
use std::fmt;

/// A failed request. `Display` gives the message a client sees; it never contains a
/// token, a hash or the internals of a failure.
#[derive(Debug)]
pub enum ApiError {
    /// 404: no route has this path, or the caller owns no plant with this id.
    NotFound(String),
    /// 405: the path exists but not with this method; `allow` lists the methods it has.
    MethodNotAllowed { allow: &'static str },
    /// 401: no `Authorization` header, or one that is not `Bearer <token>`.
    MissingToken(&'static str),
    /// 401: a well-formed token that is unknown or revoked.
    InvalidToken,
    /// 401: a stored token whose expiry has passed.
    ExpiredToken,
    /// 403: a `read` token on POST or DELETE.
    InsufficientScope,
    /// 415: POST without `Content-Type: application/json`.
    UnsupportedMediaType,
    /// 413: a body over `MAX_BODY_BYTES`.
    PayloadTooLarge,
    /// 400: malformed body, bad query, bad id in the path.
    BadRequest(String),
    /// 408: a request body that did not arrive whole within `--body-timeout`.
    RequestTimeout,
    /// 431: a request head over `limit` bytes (`framing::MAX_HEAD_BYTES`).
    HeadTooLarge { limit: usize },
    /// 505: a request line of HTTP/2 or later (or 0.9).
    VersionNotSupported,
    /// 503: a connection over `--max-connections`; answered and closed at once.
    TooManyConnections,
    /// 503: an event stream over `--max-streams`, or (`yours`) over
    /// `--max-streams-per-principal` for the caller.
    TooManyStreams { yours: bool },
    /// 503: an event stream asked of a server that serves none (`--max-streams 0` or
    /// `--max-streams-per-principal 0`, or half of `--max-connections` is 0). No
    /// `Retry-After`: retrying does not help.
    StreamsOff,
    /// 429: the token's request budget (`--rate-limit`) is spent; one request's worth is
    /// back after `retry_after` seconds.
    TooManyRequests { retry_after: u64 },
    /// 409: the caller already owns a plant with this id.
    Conflict(i64),
    /// 409: test control keeps no more of these (snapshots), or cannot act on the store
    /// now (a reset or restore while another server has its file open).
    Full(String),
    /// 409: a value test control is asked to store is taken (a chosen token).
    Taken(String),
    /// 410: the caller cannot read on after `after`: the retention removed events it had
    /// not read, or the log ends before it; it lists the plants again and reads on after
    /// `last`, the log's last seq.
    Gone { after: i64, last: i64 },
    /// 503: the request waited longer than `--queue-timeout` for a worker, or (on
    /// PostgreSQL) 5 s for a free connection of the pool; the client may retry after a
    /// second.
    Overloaded,
    /// 503: the server is stopping and takes no new work.
    ShuttingDown,
    /// 503: the database cannot be used now (GET /healthz). The cause goes to the log,
    /// when given: a cause repeated within `CAUSE_LOG_EVERY` is not.
    Unavailable(Option<String>),
    /// 500: the write's commit failed in a way that may have taken effect (PostgreSQL:
    /// its answer was lost and the database could not be asked again in time; SQLite: its
    /// sync failed and no later commit is durable). The client should read before it
    /// retries.
    OutcomeUnknown,
    /// 500: the database or the server failed. The cause goes to the log, not the client.
    Internal(String),
    /// A test-control fault's answer (`api::control::faults`).
    Injected(Box<Injected>),
}

/// A test-control fault's answer: its status, `Retry-After` when given, and its message
/// (a default when none); or a body of its own, sent as it is, with its content type
/// (JSON when none). A 204, 205 or 304 has no body (`no_content`).
#[derive(Debug, Default)]
pub struct Injected {
    pub status: u16,
    pub retry_after: Option<u64>,
    pub message: Option<String>,
    pub body: Option<String>,
    pub content_type: Option<String>,
}

/// A status whose answer has no body, nor its media type: 204 and 304 (which end at
/// their head, RFC 9112 §6.3), and 205 (RFC 9110 §15.3.6: no content, `Content-Length:
/// 0`).
pub fn no_content(status: u16) -> bool {
    matches!(status, 204 | 205 | 304)
}

impl From<crate::store::StoreError> for ApiError {
    fn from(e: crate::store::StoreError) -> Self {
        if e.is_busy() {
            // PostgreSQL: every pooled connection stayed in use; retrying later helps.
            return ApiError::Overloaded;
        }
        if e.is_outcome_unknown() {
            return ApiError::OutcomeUnknown;
        }
        ApiError::Internal(e.0)
    }
}

/// A failed health check (`Db::check`): 503, and its cause, when it is to be logged now.
impl From<(crate::store::StoreError, bool)> for ApiError {
    fn from((e, log): (crate::store::StoreError, bool)) -> Self {
        ApiError::Unavailable(log.then_some(e.0))
    }
}

impl ApiError {
    pub fn status(&self) -> u16 {
        match self {
            ApiError::NotFound(_) => 404,
            ApiError::MethodNotAllowed { .. } => 405,
            ApiError::MissingToken(_) | ApiError::InvalidToken | ApiError::ExpiredToken => 401,
            ApiError::InsufficientScope => 403,
            ApiError::UnsupportedMediaType => 415,
            ApiError::PayloadTooLarge => 413,
            ApiError::BadRequest(_) => 400,
            ApiError::RequestTimeout => 408,
            ApiError::HeadTooLarge { .. } => 431,
            ApiError::VersionNotSupported => 505,
            ApiError::Conflict(_) | ApiError::Full(_) | ApiError::Taken(_) => 409,
            ApiError::Gone { .. } => 410,
            ApiError::TooManyRequests { .. } => 429,
            ApiError::Overloaded
            | ApiError::ShuttingDown
            | ApiError::TooManyConnections
            | ApiError::TooManyStreams { .. }
            | ApiError::StreamsOff
            | ApiError::Unavailable(_) => 503,
            ApiError::Internal(_) | ApiError::OutcomeUnknown => 500,
            ApiError::Injected(i) => i.status,
        }
    }

    /// Headers that go with the status: `Allow`, `WWW-Authenticate`, `Retry-After`.
    /// Their values are constants: request data is never reflected into a header.
    pub fn headers(&self) -> Vec<(&'static str, Cow<'static, str>)> {
        let constant: Vec<(&'static str, &'static str)> = match self {
            ApiError::TooManyRequests { retry_after } => {
                return vec![("Retry-After", retry_after.to_string().into())];
            }
            ApiError::Injected(i) => {
                let after = i.retry_after.map(|r| ("Retry-After", r.to_string().into()));
                return after.into_iter().collect();
            }
            ApiError::MethodNotAllowed { allow } => vec![("Allow", allow)],
            ApiError::MissingToken(_) => {
                vec![("WWW-Authenticate", r#"Bearer realm="plant-store""#)]
            }
            ApiError::InvalidToken => vec![(
                "WWW-Authenticate",
                r#"Bearer realm="plant-store", error="invalid_token""#,
            )],
            ApiError::ExpiredToken => vec![(
                "WWW-Authenticate",
                r#"Bearer realm="plant-store", error="invalid_token", error_description="the token has expired""#,
            )],
            ApiError::InsufficientScope => vec![(
                "WWW-Authenticate",
                r#"Bearer realm="plant-store", error="insufficient_scope""#,
            )],
            ApiError::Overloaded
            | ApiError::ShuttingDown
            | ApiError::TooManyConnections
            | ApiError::TooManyStreams { .. } => vec![("Retry-After", "1")],
            _ => Vec::new(),
        };
        constant
            .into_iter()
            .map(|(k, v)| (k, Cow::Borrowed(v)))
            .collect()
    }

    /// The cause of a 5xx, for the log only.
    pub fn cause(&self) -> Option<&str> {
        match self {
            ApiError::Unavailable(Some(cause)) | ApiError::Internal(cause) => Some(cause),
            _ => None,
        }
    }

    /// The `{"error": status, "message": ...}` body (a fault's own, when it has one).
    pub fn body(&self) -> String {
        match self {
            ApiError::Injected(i) if no_content(i.status) => String::new(),
            ApiError::Injected(i) if i.body.is_some() => i.body.clone().unwrap_or_default(),
            _ => serde_json::json!({ "error": self.status(), "message": self.to_string() })
                .to_string(),
        }
    }

    /// The body's media type when it is not JSON (a fault's `content_type`).
    pub fn content_type(&self) -> Option<String> {
        match self {
            ApiError::Injected(i) => i.content_type.clone(),
            _ => None,
        }
    }
}

impl fmt::Display for ApiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ApiError::NotFound(what) | ApiError::Full(what) | ApiError::Taken(what) => {
                write!(f, "{what}")
            }
            ApiError::MethodNotAllowed { allow } => {
                write!(f, "method not allowed here; allowed: {allow}")
            }
            ApiError::MissingToken(why) => write!(f, "{why}"),
            ApiError::InvalidToken => write!(f, "the bearer token is unknown or revoked"),
            ApiError::ExpiredToken => write!(f, "the bearer token has expired"),
            ApiError::InsufficientScope => {
                write!(
                    f,
                    "this token may only read; writing needs a read-write token"
                )
            }
            ApiError::UnsupportedMediaType => {
                write!(f, "the body must be sent as Content-Type: application/json")
            }
            ApiError::PayloadTooLarge => write!(
                f,
                "the body is larger than {} bytes",
                crate::api::limits::MAX_BODY_BYTES
            ),
            ApiError::BadRequest(why) => write!(f, "{why}"),
            ApiError::RequestTimeout => write!(f, "the request body did not arrive in time"),
            ApiError::HeadTooLarge { limit } => {
                write!(f, "the request head is larger than {limit} bytes")
            }
            ApiError::VersionNotSupported => {
                write!(f, "this server speaks HTTP/1.0 and HTTP/1.1")
            }
            ApiError::TooManyConnections => {
                write!(f, "too many connections; retry in a second")
            }
            ApiError::TooManyStreams { yours: false } => {
                write!(f, "too many event streams are open; retry in a second")
            }
            ApiError::TooManyStreams { yours: true } => write!(
                f,
                "too many event streams are open for this principal; close one, then retry"
            ),
            ApiError::StreamsOff => write!(
                f,
                "event streams are turned off on this server; read the events as a JSON list instead"
            ),
            ApiError::Conflict(id) => write!(f, "a plant with id {id} already exists"),
            ApiError::Gone { after, last } if after > last => write!(
                f,
                "the log ends at {last}, before {after}; list the plants again, then read on after {last}"
            ),
            ApiError::Gone { after, last } => write!(
                f,
                "events after {after} were removed by the retention; list the plants again, then read on after {last}"
            ),
            ApiError::TooManyRequests { retry_after } => write!(
                f,
                "this token's request budget is spent; retry in {retry_after} s"
            ),
            ApiError::Overloaded => write!(f, "the server is busy; retry shortly"),
            ApiError::ShuttingDown => write!(f, "the server is shutting down"),
            ApiError::Unavailable(_) => write!(f, "the database is unavailable"),
            ApiError::Internal(_) => write!(f, "internal error; the server log has details"),
            ApiError::OutcomeUnknown => write!(
                f,
                "the database did not say whether this write took effect; read before retrying"
            ),
            ApiError::Injected(i) => match &i.message {
                Some(m) => write!(f, "{m}"),
                None => write!(f, "a fault of test control answered {}", i.status),
            },
        }
    }
}

/// Request text quoted in a message or a log line: at most `max` characters, control
/// characters (and quotes, backslashes) escaped, `…` where it was cut.
pub fn printable(s: &str, max: usize) -> String {
    // The common case, short and plain, needs no escaping: copied as it is.
    if s.len() <= max
        && s.bytes()
            .all(|b| (0x20..0x7f).contains(&b) && !matches!(b, b'"' | b'\'' | b'\\'))
    {
        return s.to_owned();
    }
    let mut chars = s.chars();
    let mut out: String = chars
        .by_ref()
        .take(max)
        .flat_map(char::escape_debug)
        .collect();
    if chars.next().is_some() {
        out.push('…');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn internal_errors_tell_the_client_nothing_of_the_cause() {
        let e = ApiError::Internal("disk I/O error at /secret/path".into());
        assert_eq!(
            e.body(),
            r#"{"error":500,"message":"internal error; the server log has details"}"#
        );
    }

    #[test]
    fn printable_escapes_and_truncates() {
        assert_eq!(printable("a\u{0}b\n", 64), "a\\0b\\n");
        assert_eq!(printable("G\tE\u{1b}T\u{7}", 64), "G\\tE\\u{1b}T\\u{7}");
        assert_eq!(printable(&"x".repeat(100), 64).chars().count(), 65);
        assert_eq!(printable("abc", 3), "abc");
        // The plain fast path and the escaping path agree.
        for text in [
            "/plants?limit=10",
            "a\"b",
            "it's",
            "back\\slash",
            "~!@#$%^&*()_+",
        ] {
            let escaped: String = text.chars().flat_map(char::escape_debug).collect();
            assert_eq!(printable(text, 64), escaped, "{text}");
        }
    }

    #[test]
    fn the_error_member_is_the_status() {
        for e in [
            ApiError::NotFound("x".into()),
            ApiError::InvalidToken,
            ApiError::PayloadTooLarge,
            ApiError::Conflict(7),
            ApiError::Overloaded,
        ] {
            let v: serde_json::Value = serde_json::from_str(&e.body()).unwrap();
            assert_eq!(v["error"], e.status());
        }
    }
}
