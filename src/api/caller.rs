//! Who is calling: a request's token checks (401, 403) and budget (429), and what
//! handling learned of the caller for the answer and the log line.
//!
//! A write's stored token may instead be checked by the write's own commit (`by_token`,
//! when the backend `folds_tokens`): one round trip fewer on PostgreSQL. Only a token
//! found able to write by an earlier check (`Writers`), and with `--rate-limit` one that
//! has a budget, goes so; a made-up, read-only or expired one is checked first and never
//! reaches the writer. The answers stay those of checking it first (`refused`).

use crate::api::auth::{self, DEFAULT_PRINCIPAL, Principal, Scope, TokenHash};
use crate::api::error::ApiError;
use crate::api::ratelimit::{Limiter, Verdict};
use crate::store::{Db, Outcome, Refusal, StoreResult, writer_of};
use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// Most stored tokens `Writers` remembers. Past it, it forgets them all (each is then
/// checked before its next write once more), so made-up tokens cannot grow it: only a
/// token found valid is remembered.
pub const MAX_KNOWN_WRITERS: usize = 65_536;

/// The stored read-write tokens a check found valid, with their expiry (Unix seconds):
/// the tokens a write may be given by to its commit (`by_token`). Forgotten when the
/// commit refuses one (revoked since).
#[derive(Default)]
pub struct Writers(Mutex<HashMap<TokenHash, Known>>);

#[derive(Clone, Copy, PartialEq)]
struct Known {
    expires_at: Option<i64>,
    /// Its writes given to their commit and not yet answered.
    in_flight: u32,
}

impl Writers {
    fn remember(&self, hash: &TokenHash, expires_at: Option<i64>) {
        let mut known = self.0.lock().unwrap_or_else(|e| e.into_inner());
        match known.get_mut(hash) {
            Some(k) => k.expires_at = expires_at,
            None => {
                if known.len() >= MAX_KNOWN_WRITERS {
                    known.clear();
                }
                let k = Known {
                    expires_at,
                    in_flight: 0,
                };
                known.insert(*hash, k);
            }
        }
    }

    /// A token found valid, that has not expired at `now`.
    fn may_write(&self, hash: &TokenHash, now: i64) -> bool {
        let known = self.0.lock().unwrap_or_else(|e| e.into_inner());
        known
            .get(hash)
            .is_some_and(|k| k.expires_at.is_none_or(|t| t > now))
    }

    /// Counts a write given to its commit (`up`), or one answered.
    fn in_flight(&self, hash: &TokenHash, up: bool) {
        let mut known = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(k) = known.get_mut(hash) {
            k.in_flight = if up {
                k.in_flight + 1
            } else {
                k.in_flight.saturating_sub(1)
            };
        }
    }

    fn has_in_flight(&self, hash: &TokenHash) -> bool {
        let known = self.0.lock().unwrap_or_else(|e| e.into_inner());
        known.get(hash).is_some_and(|k| k.in_flight > 0)
    }

    /// Forgets every token (test control's restore: the tokens may be gone).
    pub fn clear(&self) {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clear();
    }

    fn forget(&self, hash: &TokenHash) {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(hash);
    }
}

/// A header for every answer to a request.
pub type Header = (&'static str, Cow<'static, str>);

/// A worker's handles: its store connection, the environment token's hash, the
/// per-token request budgets when `--rate-limit` is set, and the tokens found able to
/// write (shared by the workers), and the server's figures (`GET /metrics`).
pub struct Context {
    pub db: Db,
    pub metrics: Arc<crate::ops::metrics::Metrics>,
    pub env_token: Option<TokenHash>,
    pub limiter: Option<Arc<Limiter>>,
    pub writers: Arc<Writers>,
    /// Test control, when on (`--test-control`).
    pub control: Option<Arc<crate::api::control::Control>>,
}

/// What handling learned of the caller, for the answer and the log line.
#[derive(Default)]
pub struct Seen {
    /// The caller's principal, as soon as it is known.
    pub principal: Option<String>,
    /// `RateLimit-Policy` and `RateLimit`, when a limit is set and the caller is known;
    /// `Cache-Control` and `Vary` as the route sets them.
    pub headers: Vec<Header>,
    /// Test control's fault that took this request, if one did.
    pub fault: Option<crate::api::control::faults::Taken>,
}

/// The caller of a request, by its `Authorization` header: 401 for a missing, malformed,
/// unknown or expired token, 429 for a spent budget. The scope is the handler's to check.
/// `who` learns the principal of a stored token also when it is refused (expired, or
/// over its budget: then looked up only with test control, for the journal).
pub fn authenticate(
    cx: &Context,
    authorization: Option<&str>,
    who: &mut Seen,
) -> Result<Principal, ApiError> {
    who.principal = None;
    let token = auth::bearer_token(authorization)?;
    let hash = auth::hash_token(token);
    // A request carried out after a fault's delay was charged before it.
    let limiter = cx.limiter.as_ref().filter(|_| who.fault.is_none());
    let now = limiter.map(|_| cx.db.clock().monotonic_millis());
    // A spent budget is refused before the token is looked up: only a token found valid
    // ever has one, and such a request never reaches the database.
    if let Some(verdict) = limiter.zip(now).and_then(|(l, t)| l.spent(&hash, t)) {
        if cx.control.is_some() {
            who.principal = match &cx.env_token {
                Some(env) if auth::hashes_equal(env, &hash) => Some(DEFAULT_PRINCIPAL.into()),
                _ => cx.db.token_owner(&hash)?.map(|owner| owner.principal),
            };
        }
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
                    .is_some_and(|t| t <= cx.db.clock().unix_now()) =>
            {
                who.principal = Some(owner.principal);
                return Err(ApiError::ExpiredToken);
            }
            Some(owner) => {
                if owner.scope == Scope::ReadWrite && cx.db.folds_tokens() {
                    cx.writers.remember(&hash, owner.expires_at);
                }
                Principal {
                    name: owner.principal,
                    scope: owner.scope,
                    stored: Some(hash),
                    expires_at: owner.expires_at,
                }
            }
            None => return Err(ApiError::InvalidToken),
        },
    };
    who.principal = Some(principal.name.clone());
    if let (Some(limiter), Some(now)) = (limiter, now) {
        let verdict = limiter.take(&hash, now);
        if let Verdict::Limited { .. } = verdict {
            return Err(rate_limited(cx, verdict, who));
        }
        who.headers.extend(rate_headers(limiter, &verdict));
    }
    Ok(principal)
}

/// The stored token a write may be given by, for its commit to check (`Owner::Token`):
/// when the backend folds tokens, the header is well formed, and the token is one an
/// earlier check found able to write, unexpired at `now` (never the environment's, which
/// is not stored). `None`: check it first.
pub fn by_token(cx: &Context, authorization: Option<&str>, now: i64) -> Option<TokenHash> {
    if !cx.db.folds_tokens() {
        return None;
    }
    let hash = auth::hash_token(auth::bearer_token(authorization).ok()?);
    cx.writers.may_write(&hash, now).then_some(hash)
}

/// Charges a write given by its token (`by_token`, at `now`), once the request has passed
/// its own checks: its rate-limit headers (none without a limit), 429 for a spent budget,
/// or `None` when the token has no budget (any more): check it first. A spent budget
/// while the token's earlier writes are still at their commit may have been spent by
/// writes that commit will refuse (a token revoked meanwhile, never charged when checked
/// first): the token is checked before it is answered 429.
pub fn charge(
    cx: &Context,
    hash: &TokenHash,
    now: i64,
    who: &mut Seen,
) -> Result<Option<Vec<Header>>, ApiError> {
    let rate = match &cx.limiter {
        None => Vec::new(),
        Some(limiter) => match limiter.take_known(hash, cx.db.clock().monotonic_millis()) {
            None => return Ok(None),
            Some(verdict @ Verdict::Limited { .. }) => {
                if cx.writers.has_in_flight(hash)
                    && let Err(refusal) = writer_of(cx.db.token_owner(hash)?, now)
                {
                    return Err(refused(cx, hash, refusal, who));
                }
                return Err(rate_limited(cx, verdict, who));
            }
            Some(verdict) => rate_headers(limiter, &verdict).into(),
        },
    };
    cx.writers.in_flight(hash, true);
    Ok(Some(rate))
}

/// What a write given by its token (`by_token`, at `now`) came to, once its commit has
/// answered: the principal the token named, or why the token was refused; `None` when
/// that cannot be known. A commit that failed before it said has the token looked up
/// here, so that the answer (a 401 or 403, or the failure with the caller's principal)
/// is the one checking it first gives.
pub fn settled(
    cx: &Context,
    hash: &TokenHash,
    now: i64,
    outcome: &StoreResult<Outcome>,
) -> Option<Result<String, Refusal>> {
    match outcome {
        Ok(Outcome::Owned { principal, .. }) => Some(Ok(principal.clone())),
        Ok(Outcome::Refused(refusal)) => Some(Err(refusal.clone())),
        Ok(_) => None,
        Err(_) => cx
            .db
            .token_owner(hash)
            .ok()
            .map(|owner| writer_of(owner, now)),
    }
}

/// A write given by its token has been answered (after `refused`, if it was: a write
/// that finds the budget spent meanwhile still sees this one in flight, or the budget
/// gone).
pub fn answered(cx: &Context, hash: &TokenHash) {
    cx.writers.in_flight(hash, false);
}

/// The answer to a write whose token (`hash`) was refused, as checking the token first
/// answers it; a read token's principal is the caller's, as there. The token is
/// forgotten: it is checked before its next write again; an unknown or expired one loses
/// its budget too, so that it is never charged for a request.
pub fn refused(cx: &Context, hash: &TokenHash, refusal: Refusal, who: &mut Seen) -> ApiError {
    cx.writers.forget(hash);
    if let (Some(limiter), Refusal::Unknown | Refusal::Expired) = (&cx.limiter, &refusal) {
        limiter.forget(hash);
    }
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
