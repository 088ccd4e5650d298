//! GET /events: the caller's change feed (docs/api.md, "Events"), as a JSON list of
//! events or, to `Accept: text/event-stream`, as a Server-Sent Events stream that the
//! HTTP layer keeps open (`http::feed`). An event's JSON is made here, from its row, the
//! same bytes every time: in the list, in a stream's `data:` line.

use crate::api::auth::{Principal, TokenHash};
use crate::api::error::ApiError;
use crate::api::plant::write_plant_json;
use crate::store::{Db, EventRow, LogBounds, StoreResult};
use std::io::Write;

/// Events a list holds when the request gives no `limit`.
pub const DEFAULT_EVENTS_LIMIT: u32 = 100;
/// Largest `limit` of GET /events.
pub const MAX_EVENTS_LIMIT: u32 = 1000;

/// What GET /events asks for: the events after `after`, at most `limit` of them (a list),
/// or all of them and those to come (a stream).
#[derive(Debug, PartialEq, Eq)]
pub struct FeedQuery {
    pub after: i64,
    /// `None`: a stream.
    pub limit: Option<u32>,
}

/// Whether the `Accept` header asks for a stream: one of its media ranges is
/// `text/event-stream` (parameters and case aside) with a non-zero weight.
pub fn wants_stream(accept: Option<&str>) -> bool {
    accept.is_some_and(|v| {
        v.split(',').any(|range| {
            let mut parts = range.split(';').map(str::trim);
            let media = parts.next().unwrap_or("");
            media.eq_ignore_ascii_case("text/event-stream")
                && !parts.any(|p| {
                    p.split_once('=').is_some_and(|(k, v)| {
                        k.trim().eq_ignore_ascii_case("q") && v.trim().parse::<f32>() == Ok(0.0)
                    })
                })
        })
    })
}

/// The header a stream resumes after.
pub const LAST_EVENT_ID: &str = "Last-Event-ID";

/// `Last-Event-ID` as a request gives it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LastEventId<'a> {
    /// Not given, or given empty (as clients do before they have seen an event).
    Absent,
    Given(&'a str),
    /// Given more than once: 400, as a repeated query parameter is.
    Repeated,
}

/// `Last-Event-ID` from its first value and whether it is given more than once.
pub fn last_event_id(first: Option<&str>, repeated: bool) -> LastEventId<'_> {
    match first.map(str::trim) {
        _ if repeated => LastEventId::Repeated,
        None | Some("") => LastEventId::Absent,
        Some(v) => LastEventId::Given(v),
    }
}

/// The query of GET /events (`after`, `limit`; unknown, repeated or malformed: 400) and,
/// for a stream, `Last-Event-ID`, which wins over `after` (repeated: 400, for a list
/// too).
pub fn parse_query(
    query: &str,
    stream: bool,
    last_event_id: LastEventId,
) -> Result<FeedQuery, ApiError> {
    let (mut after, mut limit) = (None, None);
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
        let slot = match name {
            "after" => &mut after,
            "limit" => &mut limit,
            _ => {
                return Err(ApiError::BadRequest(format!(
                    "unknown query parameter `{}`",
                    printable(name)
                )));
            }
        };
        if slot.replace(value).is_some() {
            return Err(ApiError::BadRequest(format!(
                "query parameter `{name}` is given twice"
            )));
        }
    }
    let after = after.map(|v| seq(v, "`after`")).transpose()?.unwrap_or(0);
    let limit = limit
        .map(|v| match seq(v, "`limit`") {
            Ok(n) if n <= i64::from(MAX_EVENTS_LIMIT) => Ok(n as u32),
            _ => Err(ApiError::BadRequest(format!(
                "`limit` must be an integer from 0 to {MAX_EVENTS_LIMIT}, not `{}`",
                printable(v)
            ))),
        })
        .transpose()?;
    if last_event_id == LastEventId::Repeated {
        return Err(ApiError::BadRequest(format!(
            "the header `{LAST_EVENT_ID}` is given twice"
        )));
    }
    if !stream {
        return Ok(FeedQuery {
            after,
            limit: Some(limit.unwrap_or(DEFAULT_EVENTS_LIMIT)),
        });
    }
    if limit.is_some() {
        return Err(ApiError::BadRequest(
            "`limit` applies to the JSON list, not to a stream".into(),
        ));
    }
    let after = match last_event_id {
        LastEventId::Given(v) => seq(v, "`Last-Event-ID`")?,
        LastEventId::Absent | LastEventId::Repeated => after,
    };
    Ok(FeedQuery { after, limit: None })
}

/// A sequence number as sent: decimal digits, 0 to 2^63 − 1.
fn seq(v: &str, what: &str) -> Result<i64, ApiError> {
    let ok = !v.is_empty() && v.len() <= 19 && v.bytes().all(|b| b.is_ascii_digit());
    match v.parse::<i64>() {
        Ok(n) if ok => Ok(n),
        _ => Err(ApiError::BadRequest(format!(
            "{what} must be an integer from 0 to {}, not `{}`",
            i64::MAX,
            printable(v)
        ))),
    }
}

fn printable(s: &str) -> String {
    crate::api::error::printable(s, 64)
}

/// Refuses (410) a read after `after` when the reader cannot go on from there: the
/// retention removed an event it has not seen, or the log ends before `after`.
pub fn check_retained(bounds: LogBounds, after: i64) -> Result<(), ApiError> {
    match bounds.missed(after) {
        true => Err(ApiError::Gone {
            after,
            last: bounds.last_seq,
        }),
        false => Ok(()),
    }
}

/// Whether rows read after `after` follow it with no gap: the first is `after + 1`, each
/// next one more. Seqs are written without gaps, so a gap is what the retention removed
/// (even between two reads): the reader is told 410, never given a list that skips.
#[derive(Debug)]
pub struct Contiguous {
    next: i64,
    pub whole: bool,
}

impl Contiguous {
    pub fn after(after: i64) -> Contiguous {
        Contiguous {
            next: after.saturating_add(1),
            whole: true,
        }
    }

    pub fn see(&mut self, seq: i64) {
        self.whole &= seq == self.next;
        self.next = seq.saturating_add(1);
    }
}

/// The JSON list of the caller's events after `after`, at most `limit`; 410 when it
/// would skip an event or the log ends before `after`.
pub fn list(db: &Db, principal: &str, after: i64, limit: u32) -> Result<Vec<u8>, ApiError> {
    let mut out = Vec::with_capacity(64 + 160 * limit.min(64) as usize);
    let mut seen = Contiguous::after(after);
    let mut rows = 0u32;
    out.push(b'[');
    db.events_page(principal, after, limit, |row| {
        if out.len() > 1 {
            out.push(b',');
        }
        seen.see(row.seq);
        rows += 1;
        write_event_json(row, &mut out);
    })?;
    out.push(b']');
    if rows > 0 && seen.whole {
        return Ok(out);
    }
    // Read after the page: removals only grow, so what it says covers the page.
    let bounds = db.log_bounds(principal)?;
    if !seen.whole {
        return Err(ApiError::Gone {
            after,
            last: bounds.last_seq,
        });
    }
    check_retained(bounds, after)?;
    Ok(out)
}

/// An event as the feed shows it:
/// `{"id":…,"seq":…,"type":…,"timestamp":…,"data":{"id":…,"name":…,"tag":…}}`.
pub fn write_event_json(row: &EventRow, out: &mut Vec<u8>) {
    // The id and kind are ours (`evt_` and hex; a type name): no escaping.
    let _ = write!(
        out,
        r#"{{"id":"{}","seq":{},"type":"{}","timestamp":"{}","data":{{"id":{}"#,
        row.id,
        row.seq,
        row.kind,
        crate::ops::clock::utc_millis(row.at_ms),
        row.plant
    );
    match row.name {
        Some(name) => {
            out.push(b',');
            let start = out.len();
            write_plant_json(name, row.tag, out);
            // The plant's object without its opening brace, after the id.
            out.remove(start);
        }
        None => out.push(b'}'),
    }
    out.push(b'}');
}

/// An event as one Server-Sent Events message: `id`, `event` and `data` lines (the JSON
/// has no line break: JSON escapes them in strings).
pub fn write_sse(row: &EventRow, out: &mut Vec<u8>) {
    let _ = write!(out, "id: {}\nevent: {}\ndata: ", row.seq, row.kind);
    write_event_json(row, out);
    out.extend_from_slice(b"\n\n");
}

/// A stream's first bytes: a comment, so the client sees the stream open at once.
pub const STREAM_OPENED: &[u8] = b": events\n\n";
/// A keep-alive comment.
pub const KEEP_ALIVE: &[u8] = b": keep-alive\n\n";

/// A stream the HTTP layer is to keep open: whose events, from where, and the token to
/// check again (`None`: the environment token, never revoked).
pub struct EventStream {
    pub principal: String,
    pub after: i64,
    pub token: Option<TokenHash>,
    /// Seconds since the Unix epoch; `None`: never.
    pub expires_at: Option<i64>,
    /// The store's generation when `after` was checked against it: a stream whose
    /// generation is no longer the store's (a restore came between) ends.
    pub generation: u64,
}

impl EventStream {
    /// A stream for the caller, after checking that nothing after `after` is lost.
    pub fn start(db: &Db, caller: Principal, after: i64) -> Result<EventStream, ApiError> {
        // Taken before the check: a restore that the check may have seen changes it.
        let generation = db.generation();
        check_retained(db.log_bounds(&caller.name)?, after)?;
        Ok(EventStream {
            principal: caller.name,
            after,
            token: caller.stored,
            expires_at: caller.expires_at,
            generation,
        })
    }
}

/// Whether the token behind a stream still stands: it exists, names the same principal,
/// and has not expired; `None` when the database could not answer.
pub fn still_valid(
    owner: StoreResult<Option<crate::store::TokenOwner>>,
    principal: &str,
    now: i64,
) -> Option<bool> {
    match owner {
        Ok(Some(o)) => Some(o.principal == principal && o.expires_at.is_none_or(|t| t > now)),
        Ok(None) => Some(false),
        Err(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row<'a>(name: Option<&'a str>, tag: Option<&'a str>) -> EventRow<'a> {
        EventRow {
            seq: 7,
            id: "evt_00ff",
            kind: if name.is_some() {
                "plant.created"
            } else {
                "plant.deleted"
            },
            at_ms: 1_700_000_000_123,
            plant: -5,
            name,
            tag,
        }
    }

    #[test]
    fn events_are_written_as_the_contract_shows_them() {
        let mut out = Vec::new();
        write_event_json(&row(Some("Mon\"stera"), Some("t")), &mut out);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            r#"{"id":"evt_00ff","seq":7,"type":"plant.created","timestamp":"2023-11-14T22:13:20.123Z","data":{"id":-5,"name":"Mon\"stera","tag":"t"}}"#
        );
        let mut out = Vec::new();
        write_event_json(&row(Some("x\ny"), None), &mut out);
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["data"], serde_json::json!({"id": -5, "name": "x\ny"}));
        let mut out = Vec::new();
        write_sse(&row(None, None), &mut out);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "id: 7\nevent: plant.deleted\ndata: {\"id\":\"evt_00ff\",\"seq\":7,\"type\":\"plant.deleted\",\"timestamp\":\"2023-11-14T22:13:20.123Z\",\"data\":{\"id\":-5}}\n\n"
        );
    }

    #[test]
    fn queries_follow_the_plants_rules() {
        let q = |s, stream, last: Option<&'static str>| {
            parse_query(s, stream, last_event_id(last, false))
        };
        assert_eq!(
            q("", false, None).unwrap(),
            FeedQuery {
                after: 0,
                limit: Some(DEFAULT_EVENTS_LIMIT)
            }
        );
        assert_eq!(
            q("after=5&limit=0", false, None).unwrap(),
            FeedQuery {
                after: 5,
                limit: Some(0)
            }
        );
        assert_eq!(
            q("after=5", true, Some("9")).unwrap(),
            FeedQuery {
                after: 9,
                limit: None
            }
        );
        assert_eq!(
            q("after=5", true, None).unwrap(),
            FeedQuery {
                after: 5,
                limit: None
            }
        );
        for bad in [
            "after=-1",
            "after=",
            "after=1&after=2",
            "limit=1001",
            "limt=5",
            "after=1.0",
            "after=99999999999999999999",
        ] {
            assert!(q(bad, false, None).is_err(), "{bad}");
        }
        assert!(q("limit=5", true, None).is_err());
        assert!(q("", true, Some("x")).is_err());
        // Empty is absent: `after` applies.
        assert_eq!(q("after=5", true, Some(" ")).unwrap().after, 5);
        for stream in [false, true] {
            let twice = parse_query("after=5", stream, last_event_id(Some("9"), true));
            assert_eq!(
                twice.unwrap_err().to_string(),
                "the header `Last-Event-ID` is given twice"
            );
        }
    }

    #[test]
    fn a_stream_is_asked_for_by_its_media_range() {
        assert!(wants_stream(Some("text/event-stream")));
        assert!(wants_stream(Some(
            "application/json, Text/Event-Stream;q=0.5"
        )));
        assert!(!wants_stream(Some("text/event-stream;q=0")));
        assert!(!wants_stream(Some("application/json")));
        assert!(!wants_stream(None));
    }

    #[test]
    fn a_read_past_what_retention_removed_is_gone() {
        let b = |last_seq, oldest_kept| LogBounds {
            last_seq,
            oldest_kept,
        };
        assert!(check_retained(LogBounds::default(), 0).is_ok());
        assert!(
            check_retained(LogBounds::default(), 1).is_err(),
            "past the end"
        );
        assert!(check_retained(b(10, Some(1)), 0).is_ok());
        assert!(check_retained(b(10, Some(4)), 3).is_ok());
        assert!(check_retained(b(10, Some(4)), 2).is_err());
        assert!(check_retained(b(10, None), 9).is_err());
        assert!(check_retained(b(10, None), 10).is_ok());
        assert!(check_retained(b(10, Some(4)), 11).is_err(), "past the end");
        assert!(check_retained(b(10, None), 12).is_err(), "past the end");
        let mut c = Contiguous::after(3);
        c.see(4);
        c.see(5);
        assert!(c.whole);
        c.see(7);
        assert!(!c.whole, "a hole in the middle");
        let mut c = Contiguous::after(3);
        c.see(5);
        assert!(!c.whole, "a hole at the start");
    }
}
