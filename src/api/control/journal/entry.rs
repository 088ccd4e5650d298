//! One journal entry: what a request sent (method, target, header fields with the
//! credentials of `Authorization` redacted, its bearer token's fingerprint, the body as
//! the route read it) and what became of it (principal, status, fault, times), with what
//! it costs toward `--journal-bytes`, and its JSON.

use base64::Engine;
use sha2::{Digest, Sha256};
use std::io::Write;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::Instant;

/// Bytes of a request body an entry keeps at most (`body_truncated` past them).
pub const MAX_JOURNAL_BODY: usize = 64 * 1024;
/// What an entry is counted to cost toward `--journal-bytes` besides its text and the
/// places where each part of it ends: its structure, its place in the journal and its
/// allocations (a small request's entry takes 430 to 630 bytes of the process's memory,
/// its text counted here at about 70 and the places of its parts at 64; one with a 4 KB
/// target about 4.7 KB: `benches/journal_memory.sh`).
pub const ENTRY_BYTES: usize = 640;
/// The longest `Authorization` scheme shown before ` [redacted]`; a longer first word
/// (or one with other characters) is redacted with the rest.
const MAX_SCHEME: usize = 20;
/// What the token's fingerprint hashes before the token: so that it matches no stored
/// token hash (SHA-256 of the token alone).
const FINGERPRINT_SALT: &[u8] = b"plant-store-journal:";

pub struct Entry {
    /// Its place: given at arrival, given again (from 1) when a reset clears the journal
    /// while it is in flight. Changed under the journal's lock only.
    pub(super) n: AtomicU64,
    /// Method, path, query, then each header field's name and value, one after another
    /// (one allocation: an entry is made for every request).
    text: String,
    /// Where each of them ends in `text`.
    ends: Vec<u32>,
    /// The first 4 bytes of the token's fingerprint (`fingerprint`).
    token: Option<[u8; 4]>,
    /// When it arrived, on the test clock (milliseconds since the epoch).
    at_ms: i64,
    pub(super) arrived: Instant,
    /// Bytes counted for it toward `--journal-bytes`; 0 once the journal no longer keeps
    /// it. Changed under the journal's lock only.
    pub(super) charged: AtomicUsize,
    /// Not answered yet. Changed under the journal's lock only.
    pub(super) open: AtomicBool,
    pub(super) late: Mutex<Late>,
}

/// What is learned of a request after its arrival.
#[derive(Default)]
pub(super) struct Late {
    pub principal: Option<String>,
    /// The body the route read (none read: `None`), at most `MAX_JOURNAL_BODY` bytes,
    /// and whether more was sent.
    pub body: Option<(Vec<u8>, bool)>,
    pub answer: Option<Answer>,
}

pub(super) struct Answer {
    /// `None`: the request ended with no answer.
    pub status: Option<u16>,
    pub fault: Option<String>,
    pub duration_ms: f64,
    /// Its place among the journal's answers (`Kept::answers`).
    pub seq: u64,
}

impl Entry {
    /// A request as it arrives: its method, its target, its header fields in order, at
    /// `at_ms` on the test clock; `room`, about how long its text is (the head's length).
    pub(super) fn new<'h>(
        method: &str,
        target: &str,
        fields: impl IntoIterator<Item = (&'h str, &'h str)>,
        at_ms: i64,
        room: usize,
    ) -> Entry {
        let credentials = |name: &str| {
            name.eq_ignore_ascii_case("Authorization")
                || name.eq_ignore_ascii_case("Proxy-Authorization")
        };
        let (path, query) = target.split_once('?').unwrap_or((target, ""));
        let mut text = String::with_capacity(room);
        let mut ends = Vec::with_capacity(16);
        let mut end = |text: &String| ends.push(text.len() as u32);
        for part in [method, path, query] {
            text.push_str(part);
            end(&text);
        }
        let mut token = None;
        for (name, value) in fields {
            text.push_str(name);
            end(&text);
            if credentials(name) {
                if token.is_none() && name.eq_ignore_ascii_case("Authorization") {
                    token = Some(fingerprint(value));
                }
                redact(&mut text, value);
            } else {
                text.push_str(value);
            }
            end(&text);
        }
        Entry {
            n: AtomicU64::new(0),
            text,
            ends,
            token: token.flatten(),
            at_ms,
            arrived: Instant::now(),
            charged: AtomicUsize::new(0),
            open: AtomicBool::new(true),
            late: Mutex::new(Late::default()),
        }
    }

    pub(super) fn n(&self) -> u64 {
        self.n.load(Ordering::Relaxed)
    }

    pub(super) fn late(&self) -> std::sync::MutexGuard<'_, Late> {
        self.late.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The `i`th of its texts (method, path, query, then names and values).
    fn part(&self, i: usize) -> &str {
        let start = i.checked_sub(1).map_or(0, |p| self.ends[p] as usize);
        &self.text[start..self.ends[i] as usize]
    }

    pub(super) fn method(&self) -> &str {
        self.part(0)
    }

    pub(super) fn path(&self) -> &str {
        self.part(1)
    }

    /// Its header fields, in order.
    fn headers(&self) -> impl Iterator<Item = (&str, &str)> {
        (3..self.ends.len())
            .step_by(2)
            .map(|i| (self.part(i), self.part(i + 1)))
    }

    /// What it costs toward `--journal-bytes` as it arrives.
    pub(super) fn cost(&self) -> usize {
        ENTRY_BYTES + self.text.capacity() + 4 * self.ends.capacity()
    }

    /// What it costs more once answered: its body, principal and fault.
    pub(super) fn late_cost(late: &Late) -> usize {
        late.body.as_ref().map_or(0, |(b, _)| b.len())
            + late.principal.as_ref().map_or(0, String::len)
            + late
                .answer
                .as_ref()
                .and_then(|a| a.fault.as_ref())
                .map_or(0, String::len)
    }

    /// Its JSON object, appended to `out`.
    pub(super) fn write_json(&self, out: &mut Vec<u8>) {
        let late = self.late();
        let string = |out: &mut Vec<u8>, s: Option<&str>| {
            serde_json::to_writer(out, &s).expect("a string serializes")
        };
        let _ = write!(out, "{{\"n\":{},\"method\":", self.n());
        string(out, Some(self.method()));
        out.extend_from_slice(b",\"path\":");
        string(out, Some(self.path()));
        out.extend_from_slice(b",\"query\":");
        string(out, Some(self.part(2)));
        out.extend_from_slice(b",\"headers\":[");
        for (i, (name, value)) in self.headers().enumerate() {
            out.extend_from_slice(if i == 0 { b"[" } else { b",[" });
            string(out, Some(name));
            out.push(b',');
            string(out, Some(value));
            out.push(b']');
        }
        out.extend_from_slice(b"],\"token\":");
        let token = self.token.map(shown);
        string(out, token.as_deref());
        let (body, truncated) = match &late.body {
            Some((bytes, truncated)) => (Some(bytes.as_slice()), *truncated),
            None => (None, false),
        };
        let text = body.map(std::str::from_utf8);
        out.extend_from_slice(b",\"body\":");
        string(out, text.and_then(Result::ok));
        out.extend_from_slice(b",\"body_base64\":");
        let base64 = match (body, text) {
            (Some(bytes), Some(Err(_))) => {
                Some(base64::engine::general_purpose::STANDARD.encode(bytes))
            }
            _ => None,
        };
        string(out, base64.as_deref());
        let _ = write!(out, ",\"body_truncated\":{truncated},\"principal\":");
        string(out, late.principal.as_deref());
        let answer = late.answer.as_ref();
        out.extend_from_slice(b",\"status\":");
        match answer.and_then(|a| a.status) {
            Some(status) => {
                let _ = write!(out, "{status}");
            }
            None => out.extend_from_slice(b"null"),
        }
        let _ = write!(out, ",\"answered\":{},\"fault\":", answer.is_some());
        string(out, answer.and_then(|a| a.fault.as_deref()));
        out.extend_from_slice(b",\"at\":");
        string(out, Some(&crate::ops::clock::utc_millis(self.at_ms)));
        out.extend_from_slice(b",\"duration_ms\":");
        match answer {
            Some(a) => serde_json::to_writer(&mut *out, &a.duration_ms).expect("a number"),
            None => out.extend_from_slice(b"null"),
        }
        out.push(b'}');
    }
}

/// What stands for credentials.
const REDACTED: &str = "[redacted]";

/// An `Authorization` value without its credentials, onto `text`: the scheme and
/// ` [redacted]` (`Bearer [redacted]`), or `[redacted]` alone when the first word is no
/// scheme.
fn redact(text: &mut String, value: &str) {
    if let Some((scheme, _)) = value.split_once(' ')
        && !scheme.is_empty()
        && scheme.len() <= MAX_SCHEME
        && scheme
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-')
    {
        text.push_str(scheme);
        text.push(' ');
    }
    text.push_str(REDACTED);
}

/// Which bearer token a request sent, without the token: the first 4 bytes of
/// SHA-256(`plant-store-journal:` + token), shown as `sha256:` and 8 hex digits; `None`
/// for no bearer token.
fn fingerprint(authorization: &str) -> Option<[u8; 4]> {
    let token = crate::api::auth::bearer_token(Some(authorization)).ok()?;
    Some(digest(token))
}

fn digest(token: &str) -> [u8; 4] {
    let hash = Sha256::new()
        .chain_update(FINGERPRINT_SALT)
        .chain_update(token.as_bytes())
        .finalize();
    [hash[0], hash[1], hash[2], hash[3]]
}

/// A fingerprint as an entry's `token` shows it: `sha256:` and 8 hex digits.
fn shown(fingerprint: [u8; 4]) -> String {
    format!("sha256:{}", crate::ops::random::hex(&fingerprint))
}

/// What an entry's `token` shows of a request that sent bearer `token` (the library's
/// `Minted::fingerprint`).
pub fn token_fingerprint(token: &str) -> String {
    shown(digest(token))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_are_redacted_and_the_token_is_a_fingerprint() {
        let e = Entry::new(
            "POST",
            "/plants?x=1",
            [
                ("host", "h"),
                ("Authorization", "Bearer s3cret-token-0123456789"),
                ("Proxy-Authorization", "Basic dXNlcjpwYXNz"),
                ("authorization", "s3cret-token-0123456789"),
            ],
            0,
            64,
        );
        let mut out = Vec::new();
        e.write_json(&mut out);
        let text = String::from_utf8(out).unwrap();
        assert!(!text.contains("s3cret") && !text.contains("dXNl"), "{text}");
        let j: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(
            j["headers"],
            serde_json::json!([
                ["host", "h"],
                ["Authorization", "Bearer [redacted]"],
                ["Proxy-Authorization", "Basic [redacted]"],
                ["authorization", "[redacted]"]
            ])
        );
        // SHA-256("plant-store-journal:s3cret-token-0123456789"), its first 4 bytes.
        let hash = Sha256::digest(b"plant-store-journal:s3cret-token-0123456789");
        let want = format!("sha256:{}", crate::ops::random::hex(&hash[..4]));
        assert_eq!(j["token"], want.as_str());
        assert_eq!(
            (&j["path"], &j["query"]),
            (&"/plants".into(), &"x=1".into())
        );
        assert_eq!(j["answered"], false);
        assert_eq!(j["at"], "1970-01-01T00:00:00.000Z");
        assert_eq!(fingerprint("Basic abc"), None);
        assert_eq!(e.cost(), ENTRY_BYTES + e.text.capacity() + 4 * 16);
        let redacted = |v: &str| {
            let mut text = String::new();
            redact(&mut text, v);
            text
        };
        assert_eq!(
            redacted("AWS4-HMAC-SHA256 Credential=x"),
            "AWS4-HMAC-SHA256 [redacted]"
        );
        assert_eq!(redacted("Bearer"), "[redacted]");
        assert_eq!(redacted("a.b c"), "[redacted]");
    }
}
