//! Who is calling: a request's token checks (401, 403) and budget (429), and what
//! handling learned of the caller for the answer and the log line.
//!
//! A write's stored token may instead be checked by the write's own commit (`by_token`,
//! when the backend `folds_tokens`): one round trip fewer on PostgreSQL. The answers stay
//! those of checking it first (`refused`), and a token gets a budget only once it has been
//! found valid, so a write whose token has none yet is checked first.

use crate::api::auth::{self, DEFAULT_PRINCIPAL, Principal, Scope, TokenHash};
use crate::api::error::ApiError;
use crate::api::ratelimit::{Limiter, Verdict};
use crate::store::{Db, Refusal};
use std::borrow::Cow;
use std::time::Instant;

/// A header for every answer to a request.
pub type Header = (&'static str, Cow<'static, str>);

/// A worker's handles: its store connection, the environment token's hash, and the
/// per-token request budgets when `--rate-limit` is set.
pub struct Context {
    pub db: Db,
    pub env_token: Option<TokenHash>,
    pub limiter: Option<std::sync::Arc<Limiter>>,
}

/// What handling learned of the caller, for the answer and the log line.
#[derive(Default)]
pub struct Seen {
    /// The caller's principal, as soon as it is known.
    pub principal: Option<String>,
    /// `RateLimit-Policy` and `RateLimit`, when a limit is set and the caller is known;
    /// `Cache-Control` and `Vary` as the route sets them.
    pub headers: Vec<Header>,
}

/// The caller of a request, by its `Authorization` header: 401 for a missing, malformed,
/// unknown or expired token, 429 for a spent budget. The scope is the handler's to check.
pub fn authenticate(
    cx: &Context,
    authorization: Option<&str>,
    who: &mut Seen,
) -> Result<Principal, ApiError> {
    let token = auth::bearer_token(authorization)?;
    let hash = auth::hash_token(token);
    let now = cx.limiter.as_ref().map(|_| Instant::now());
    // A spent budget is refused before the token is looked up: only a token found valid
    // ever has one, and such a request never reaches the database.
    if let Some(verdict) = cx
        .limiter
        .as_ref()
        .zip(now)
        .and_then(|(l, t)| l.spent(&hash, t))
    {
        return Err(rate_limited(cx, verdict, who));
    }
    let principal = match &cx.env_token {
        Some(env) if auth::hashes_equal(env, &hash) => Principal {
            name: DEFAULT_PRINCIPAL.to_owned(),
            scope: Scope::ReadWrite,
            stored: None,
            expires_at: None,
        },
        _ => match cx.db.token_owner(&hash)? {
            Some(owner)
                if owner
                    .expires_at
                    .is_some_and(|t| t <= crate::ops::clock::unix_now()) =>
            {
                return Err(ApiError::ExpiredToken);
            }
            Some(owner) => Principal {
                name: owner.principal,
                scope: owner.scope,
                stored: Some(hash),
                expires_at: owner.expires_at,
            },
            None => return Err(ApiError::InvalidToken),
        },
    };
    who.principal = Some(principal.name.clone());
    if let (Some(limiter), Some(now)) = (&cx.limiter, now) {
        let verdict = limiter.take(&hash, now);
        if let Verdict::Limited { .. } = verdict {
            return Err(rate_limited(cx, verdict, who));
        }
        who.headers.extend(rate_headers(limiter, &verdict));
    }
    Ok(principal)
}

/// The stored token a write may be given by, for its commit to check (`Owner::Token`):
/// when the backend folds tokens, the header is well formed, and the token is not the
/// environment's. `None`: check it first.
pub fn by_token(cx: &Context, authorization: Option<&str>) -> Option<TokenHash> {
    if !cx.db.folds_tokens() {
        return None;
    }
    let hash = auth::hash_token(auth::bearer_token(authorization).ok()?);
    let env = cx.env_token.as_ref();
    (!env.is_some_and(|env| auth::hashes_equal(env, &hash))).then_some(hash)
}

/// Charges a write given by its token (`by_token`), once the request has passed its own
/// checks: its rate-limit headers (none without a limit), 429 for a spent budget, or
/// `None` when the token has no budget (any more): check it first.
pub fn charge(
    cx: &Context,
    hash: &TokenHash,
    who: &mut Seen,
) -> Result<Option<Vec<Header>>, ApiError> {
    let Some(limiter) = &cx.limiter else {
        return Ok(Some(Vec::new()));
    };
    match limiter.take_known(hash, Instant::now()) {
        None => Ok(None),
        Some(verdict @ Verdict::Limited { .. }) => Err(rate_limited(cx, verdict, who)),
        Some(verdict) => Ok(Some(rate_headers(limiter, &verdict).into())),
    }
}

/// The answer to a write whose commit refused its token, as checking the token first
/// answers it; a read token's principal is the caller's, as there.
pub fn refused(refusal: Refusal, who: &mut Seen) -> ApiError {
    match refusal {
        Refusal::Unknown => ApiError::InvalidToken,
        Refusal::Expired => ApiError::ExpiredToken,
        Refusal::ReadOnly(principal) => {
            who.principal = Some(principal);
            ApiError::InsufficientScope
        }
    }
}

/// `RateLimit-Policy` and `RateLimit` (IETF httpapi draft) for a caller's verdict.
fn rate_headers(limiter: &Limiter, verdict: &Verdict) -> [Header; 2] {
    [
        ("RateLimit-Policy", limiter.limit().policy().into()),
        ("RateLimit", verdict.header().into()),
    ]
}

/// The 429 for a spent budget, with its rate-limit headers.
fn rate_limited(cx: &Context, verdict: Verdict, who: &mut Seen) -> ApiError {
    if let Some(limiter) = &cx.limiter {
        who.headers.extend(rate_headers(limiter, &verdict));
    }
    match verdict {
        Verdict::Limited { retry_after } => ApiError::TooManyRequests { retry_after },
        Verdict::Allowed { .. } => ApiError::TooManyRequests { retry_after: 1 },
    }
}
