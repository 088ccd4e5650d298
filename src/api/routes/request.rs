//! A request's own checks, after the route and the token's: its body (415, 413, 400),
//! its query and its path id (400), each error naming what is wrong.

use crate::api::error::ApiError;
use crate::api::limits::{MAX_BODY_BYTES, MAX_LIMIT};
use std::io::Read;

/// What the handlers need of a request; `tiny_http::Request` in the server, a plain struct
/// in the generated-input test.
pub trait Incoming {
    fn method(&self) -> &str;
    /// Path and query, as sent.
    fn url(&self) -> &str;
    /// The first `name` header's value.
    fn header(&self, name: &str) -> Option<&str>;
    /// Whether the request gives `name` more than once (known for the server's
    /// `SINGLE_HEADERS`, such as `Last-Event-ID`).
    fn repeated(&self, name: &str) -> bool;
    /// The declared body length, when the request declared one.
    fn body_length(&self) -> Option<usize>;
    fn body(&mut self) -> &mut dyn Read;
    /// The body as received, whole, whatever `body` has read of it (a fault's
    /// `match.body` looks at it before the route reads it).
    fn sent_body(&self) -> &[u8];
}

/// What a request of test control's (`api::control::routes`) is answered, when it
/// succeeds; the router makes it its `Reply`.
pub enum Answer {
    /// 204.
    NoContent,
    /// 201 with a JSON body.
    Created(Vec<u8>),
    /// 200 with a JSON body.
    Json(Vec<u8>),
    /// 200 with the journal's listing, once its entries came or its wait is over.
    Wait(crate::api::control::journal::Query),
}

/// A path with one method: any other is 405 naming it in `Allow`.
pub(crate) fn only(method: &str, allow: &'static str) -> Result<(), ApiError> {
    if method == allow {
        Ok(())
    } else {
        Err(ApiError::MethodNotAllowed { allow })
    }
}

/// A JSON request body: 415 without `Content-Type: application/json`, 413 over
/// `MAX_BODY_BYTES`.
pub(crate) fn read_json(req: &mut dyn Incoming) -> Result<Vec<u8>, ApiError> {
    let content_type = req.header("Content-Type").unwrap_or("");
    let media_type = content_type.split(';').next().unwrap_or("").trim();
    if !media_type.eq_ignore_ascii_case("application/json") {
        return Err(ApiError::UnsupportedMediaType);
    }
    // Refuse by the declared length before touching the body (which would also send
    // `100 Continue`); a chunked body is capped while it is read.
    if req.body_length().is_some_and(|n| n > MAX_BODY_BYTES) {
        return Err(ApiError::PayloadTooLarge);
    }
    let mut body = Vec::with_capacity(req.body_length().unwrap_or(256));
    req.body()
        .take(MAX_BODY_BYTES as u64 + 1)
        .read_to_end(&mut body)
        .map_err(|e| ApiError::BadRequest(format!("could not read the request body: {e}")))?;
    if body.len() > MAX_BODY_BYTES {
        return Err(ApiError::PayloadTooLarge);
    }
    Ok(body)
}

/// A path id: the integer forms the body's `id` takes (`7`, `-7`, `7.0`, `7e0`; see
/// `plant::json_integer`), within the signed 64-bit range, since the served schema calls
/// both an int64 integer.
pub(super) fn parse_id(raw: &str) -> Result<i64, ApiError> {
    crate::api::plant::json_integer(raw).ok_or_else(|| {
        ApiError::BadRequest(format!(
            "the id in the path must be a signed 64-bit integer, not `{}`",
            printable(raw)
        ))
    })
}

/// The `limit` of GET /plants: absent, or once, a decimal integer 0 to `MAX_LIMIT`.
pub(super) fn parse_limit(query: &str) -> Result<Option<u32>, ApiError> {
    let mut limit = None;
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
        if name != "limit" {
            return Err(unknown_parameter(name));
        }
        if limit.is_some() {
            return Err(ApiError::BadRequest(
                "query parameter `limit` is given twice".into(),
            ));
        }
        let ok =
            !value.is_empty() && value.len() <= 10 && value.bytes().all(|b| b.is_ascii_digit());
        match value.parse::<u32>() {
            Ok(n) if ok && n <= MAX_LIMIT => limit = Some(n),
            _ => {
                return Err(ApiError::BadRequest(format!(
                    "`limit` must be an integer from 0 to {MAX_LIMIT}, not `{}`",
                    printable(value)
                )));
            }
        }
    }
    Ok(limit)
}

pub(crate) fn no_query(query: &str) -> Result<(), ApiError> {
    match query.split('&').find(|p| !p.is_empty()) {
        None => Ok(()),
        Some(pair) => Err(unknown_parameter(
            pair.split_once('=').map_or(pair, |p| p.0),
        )),
    }
}

pub(super) fn unknown_parameter(name: &str) -> ApiError {
    ApiError::BadRequest(format!("unknown query parameter `{}`", printable(name)))
}

/// Request text quoted in a message.
pub(super) fn printable(s: &str) -> String {
    crate::api::error::printable(s, 64)
}
