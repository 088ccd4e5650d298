//! Bearer authentication: who is calling and what they may do.
//!
//! A token is 32 random bytes from the OS (a test server's seeded generator with
//! `--test-seed`), shown once as 64 hex digits. Only its SHA-256
//! is kept, so a copy of the database does not give anyone a working token. A request's
//! token is hashed and looked up by hash (an index), so the time a look-up takes says
//! nothing about how close a guess was; the environment token is compared hash to hash in
//! constant time. No token or hash is ever logged or put in a message.

use crate::api::error::ApiError;
use crate::ops::random::Random;
use crate::ops::random::Stream;
use sha2::{Digest, Sha256};

/// Longest `Authorization` header value accepted before it is refused unread.
pub const MAX_AUTHORIZATION_BYTES: usize = 1024;
/// Longest principal name.
pub const MAX_PRINCIPAL_CHARS: usize = 64;
/// The principal of `PLANT_STORE_TOKEN`.
pub const DEFAULT_PRINCIPAL: &str = "default";

pub use crate::store::Scope;

/// The caller of a request, as its token says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    pub name: String,
    pub scope: Scope,
    /// The hash of a stored token (`None`: the environment token, which no one revokes),
    /// for an event stream to see it revoked.
    pub stored: Option<TokenHash>,
    /// When the token expires, in seconds since the Unix epoch; `None`: never.
    pub expires_at: Option<i64>,
}

impl Principal {
    /// Refuses a write with a `read` token.
    pub fn require_write(&self) -> Result<(), ApiError> {
        match self.scope {
            Scope::ReadWrite => Ok(()),
            Scope::Read => Err(ApiError::InsufficientScope),
        }
    }
}

pub type TokenHash = [u8; 32];

pub fn hash_token(token: &str) -> TokenHash {
    Sha256::digest(token.as_bytes()).into()
}

/// Compares two hashes in time that depends only on their length.
pub fn hashes_equal(a: &TokenHash, b: &TokenHash) -> bool {
    let diff = a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y));
    // black_box keeps the optimiser from turning the fold into an early-exit compare.
    std::hint::black_box(diff) == 0
}

/// The token of `Authorization: Bearer <token>`. The scheme is case-insensitive; exactly
/// one space follows it; the token is RFC 6750's token68 (letters, digits, `-._~+/`,
/// then optional `=` padding). Leading and trailing blanks of the whole value are not
/// part of it (RFC 9110, 5.5), and the HTTP layer strips them before this sees it.
pub fn bearer_token(header: Option<&str>) -> Result<&str, ApiError> {
    let value = header.ok_or(ApiError::MissingToken(
        "an Authorization: Bearer header is required",
    ))?;
    let malformed = || ApiError::MissingToken("the Authorization header must be `Bearer <token>`");
    if value.len() > MAX_AUTHORIZATION_BYTES {
        return Err(malformed());
    }
    let (scheme, token) = value.split_once(' ').ok_or_else(malformed)?;
    let body = token.trim_end_matches('=');
    let token68 = !body.is_empty()
        && body
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-._~+/".contains(&b));
    if !scheme.eq_ignore_ascii_case("bearer") || !token68 {
        return Err(malformed());
    }
    Ok(token)
}

/// A new token: 32 random bytes as 64 lowercase hex digits. The bytes are the operating
/// system's (`Random::default()`), or, on a server started with `--test-seed`, its
/// generator's: the same format either way.
pub fn new_token(random: &Random) -> Result<String, getrandom::Error> {
    random.hex::<32>(Stream::Tokens)
}

/// A short public identifier for a token: 8 hex digits, unrelated to the token.
pub fn new_public_id(random: &Random) -> Result<String, getrandom::Error> {
    random.hex::<4>(Stream::Tokens)
}

/// Checks a principal name: 1 to `MAX_PRINCIPAL_CHARS` of ASCII letters, digits, `.`,
/// `_` and `-`, starting with a letter or digit.
pub fn validate_principal(name: &str) -> Result<(), String> {
    let ok_start = name
        .bytes()
        .next()
        .is_some_and(|b| b.is_ascii_alphanumeric());
    let ok_chars = name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b));
    if ok_start && ok_chars && name.len() <= MAX_PRINCIPAL_CHARS {
        Ok(())
    } else {
        Err(format!(
            "a principal is 1 to {MAX_PRINCIPAL_CHARS} ASCII letters, digits, '.', '_' or '-', \
             starting with a letter or digit"
        ))
    }
}

/// A token's expiry as given (a minted or seeded token's `expires_at`, `token add
/// --expires-at`): an RFC 3339 time within the times a clock reads (`ops::clock`'s
/// `EARLIEST_MS` to `LATEST_MS`), in seconds since the Unix epoch; else what is wrong with
/// it, for the caller to name its member or flag.
pub fn parse_expiry(v: &str) -> Result<i64, String> {
    use crate::ops::clock::{EARLIEST_MS, LATEST_MS, parse_rfc3339, utc};
    let at = parse_rfc3339(v).ok_or("must be an RFC 3339 time such as 2027-01-31T12:00:00Z")?;
    let (earliest, latest) = (EARLIEST_MS.div_euclid(1000), LATEST_MS.div_euclid(1000));
    if !(earliest..=latest).contains(&at) {
        return Err(format!(
            "must be from {} to {} (the times a clock reads)",
            utc(earliest),
            utc(latest)
        ));
    }
    Ok(at)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_expiry_is_a_time_a_clock_reads() {
        let latest = crate::ops::clock::LATEST_MS.div_euclid(1000);
        assert_eq!(parse_expiry("9999-12-31T23:59:59.999Z"), Ok(latest));
        assert_eq!(parse_expiry("0000-01-01T00:00:00Z"), Ok(-62_167_219_200));
        for past in [
            "9999-12-31T23:59:60Z",
            "9999-12-31T23:59:59-01:00",
            "0000-01-01T00:00:00+00:01",
        ] {
            let e = parse_expiry(past).unwrap_err();
            assert_eq!(
                e,
                "must be from 0000-01-01T00:00:00Z to 9999-12-31T23:59:59Z (the times a clock reads)",
                "{past}"
            );
        }
        assert!(
            parse_expiry("tomorrow")
                .unwrap_err()
                .starts_with("must be an RFC 3339")
        );
    }

    #[test]
    fn hash_is_sha256() {
        let h = hash_token("abc");
        let hex: String = h.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(
            hex,
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    #[test]
    fn hashes_equal_compares_every_byte() {
        let a = hash_token("one");
        let mut b = a;
        assert!(hashes_equal(&a, &b));
        b[31] ^= 1;
        assert!(!hashes_equal(&a, &b));
        b = a;
        b[0] ^= 0x80;
        assert!(!hashes_equal(&a, &b));
    }

    #[test]
    fn bearer_token_accepts_only_the_one_form() {
        assert_eq!(bearer_token(Some("Bearer abc")).unwrap(), "abc");
        assert_eq!(
            bearer_token(Some("bEaReR a-b.c~d+e/f==")).unwrap(),
            "a-b.c~d+e/f=="
        );
        for bad in [
            "",
            "abc",
            "Basic abc",
            "Bearer",
            "Bearer ",
            "Bearer  abc",
            "Bearer a b",
            "Bearer ==",
            "Bearer é",
        ] {
            assert!(bearer_token(Some(bad)).is_err(), "{bad:?} was accepted");
        }
        assert!(bearer_token(None).is_err());
        let long = format!("Bearer {}", "a".repeat(MAX_AUTHORIZATION_BYTES));
        assert!(bearer_token(Some(&long)).is_err());
    }

    #[test]
    fn new_tokens_are_long_and_distinct() {
        let os = Random::default();
        let (a, b) = (new_token(&os).unwrap(), new_token(&os).unwrap());
        assert_eq!(a.len(), 64);
        assert_ne!(a, b);
        assert!(bearer_token(Some(&format!("Bearer {a}"))).is_ok());
        assert_eq!(new_public_id(&os).unwrap().len(), 8);
        // Seeded: the same format, the same tokens for the same seed.
        let seeded = || Random::new(Some(42));
        let t = new_token(&seeded()).unwrap();
        assert_eq!(t, new_token(&seeded()).unwrap());
        assert_eq!(t.len(), 64);
        assert!(
            t.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        );
        assert!(bearer_token(Some(&format!("Bearer {t}"))).is_ok());
        assert_eq!(new_public_id(&seeded()).unwrap().len(), 8);
    }

    #[test]
    fn principal_names_are_restricted() {
        for ok in ["default", "alice", "team-7.ops_x", &"a".repeat(64)] {
            assert!(validate_principal(ok).is_ok(), "{ok}");
        }
        for bad in ["", "-x", "a b", "é", "a/b", &"a".repeat(65)] {
            assert!(validate_principal(bad).is_err(), "{bad}");
        }
    }
}
