//! Test control (docs/testing.md): the one owner of its state and rules. A server started
//! with `--test-control` has one `Control`; every layer reaches it through one narrow
//! hook that is a branch on `None` when test control is off:
//!
//! - the router (`api::routes`, through `routes.rs`): `/_control/…` is routed here, else
//!   404; and `faulted`, after the token and rate-limit checks: the fault that takes a
//!   request (`faults.rs`; one atomic load while none is defined);
//! - the workers and the answer (`http::fault`, `http::delay`, `http::response`,
//!   `http::fault_bytes`): a fault's answer, delay, reset, close, truncation or trickle;
//!   the journal entry written before the answer's first byte (`journal.rs`);
//! - the webhook deliveries (`webhooks::faults`): faults on delivery attempts;
//! - the store (`store::admin`): snapshots, restores, tokens and the seed go to the
//!   writer thread as whole-store operations; a restore ends the event streams (the
//!   store's `Board` says the store was replaced).
//!
//! The clock is the server's `ops::clock::Clock`, which every reader of time is given;
//! `Control` holds it to move it (`clock.rs`) and clears it at a reset. Ids and minted
//! tokens draw from the server's `ops::random::Random` (`--test-seed`).

pub mod clock;
mod fault_body;
mod fault_match;
pub mod faults;
pub mod journal;
pub mod routes;

use crate::api::auth::{self, TokenHash};
use crate::api::error::ApiError;
use crate::ops::clock::Clock;
use crate::ops::random::Random;
use crate::ops::random::Stream;
use crate::store::Db;
use crate::store::admin::{Image, NewToken};
use journal::Journal;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock, RwLockReadGuard};

/// The shortest control token accepted (`PLANT_STORE_CONTROL_TOKEN`), in bytes.
pub const MIN_CONTROL_TOKEN_BYTES: usize = 16;
/// Snapshots kept at most (`POST /_control/snapshots`); one more is 409.
pub const MAX_SNAPSHOTS: usize = 16;
/// Tokens `POST /_control/tokens` draws at most while each is already stored.
pub const MINT_DRAWS: usize = 16;
/// The default of `--journal-size`: requests the journal keeps.
pub const DEFAULT_JOURNAL_SIZE: usize = 1000;
/// The most `--journal-size` accepts.
pub const MAX_JOURNAL_SIZE: usize = 1_000_000;
/// The default of `--journal-bytes`: what the journal's entries may cost in all (64 MiB).
pub const DEFAULT_JOURNAL_BYTES: usize = 64 << 20;
/// The most `--journal-bytes` accepts (1 GiB).
pub const MAX_JOURNAL_BYTES: usize = 1 << 30;

/// One server's test control.
pub struct Control {
    /// The control token's hash: compared in constant time, never stored elsewhere.
    token: TokenHash,
    pub journal: Arc<Journal>,
    /// The faults (`/_control/faults`), tried by the router after the token and
    /// rate-limit checks, and by the webhook deliveries.
    pub faults: faults::Faults,
    /// The store as it was when the server began listening (`POST /_control/reset`).
    start: OnceLock<Arc<Image>>,
    snapshots: Mutex<Vec<(String, Arc<Image>)>>,
    /// Where its ids and minted tokens come from (`--test-seed`), shared with the store's
    /// writer (event ids); restarted by a reset.
    random: Random,
    /// What a reset or a restore clears beside the store (the server's, given by
    /// `server::serve`): the rate-limit budgets, the tokens found able to write, the
    /// requests a fault's delay holds (answered 503, not carried out), and the pauses of
    /// trickles under way (`http::delay::Delays::cut`: the rest of their answers goes at
    /// once).
    forget: Box<dyn Fn() + Send + Sync>,
    /// The server's clock: `/_control/clock` moves it, a reset makes it real again.
    pub clock: Arc<Clock>,
    /// The barrier: every request but test control's own holds it (shared) from before
    /// its token is checked until its write is submitted or its read is done
    /// (`http::fault::gate`); a reset or a restore holds it alone while it runs.
    barrier: RwLock<()>,
    /// The resets and restores made so far: raised only under the barrier held alone, so
    /// steady while a request holds it.
    passed: AtomicU64,
}

impl Control {
    pub fn new(
        token: &str,
        journal: (usize, usize),
        random: Random,
        forget: Box<dyn Fn() + Send + Sync>,
        clock: Arc<Clock>,
    ) -> Control {
        Control {
            random,
            token: auth::hash_token(token),
            journal: Arc::new(Journal::new(journal.0, journal.1, clock.clone())),
            clock,
            faults: faults::Faults::default(),
            start: OnceLock::new(),
            snapshots: Mutex::new(Vec::new()),
            forget,
            barrier: RwLock::new(()),
            passed: AtomicU64::new(0),
        }
    }

    /// The store as the server begins to listen: what a reset goes back to, with the
    /// seeded generators' states (`--test-seed`).
    pub fn started(&self, image: Image) {
        let _ = self.start.set(Arc::new(image));
        self.random.mark_start();
    }

    /// A request whose head was just read: its journal entry, if the journal keeps it
    /// (`Journal::arrived`).
    pub fn arrived<'h>(
        &self,
        method: &str,
        target: &str,
        fields: impl IntoIterator<Item = (&'h str, &'h str)>,
        head_len: usize,
    ) -> Option<journal::Ticket> {
        self.journal.arrived(method, target, fields, head_len)
    }

    /// The door: 401 unless the request carries the control token.
    pub fn check(&self, authorization: Option<&str>) -> Result<(), ApiError> {
        let token = auth::bearer_token(authorization)?;
        if auth::hashes_equal(&auth::hash_token(token), &self.token) {
            Ok(())
        } else {
            Err(ApiError::InvalidToken)
        }
    }

    /// The barrier, held: no reset or restore begins until the guard is dropped. Taken
    /// by a request before anything of it reads the store (never inside a read
    /// transaction: on `:memory:` a restore waits for every reader's lock), and never
    /// twice by one thread (a waiting reset would block the second).
    pub fn gate(&self) -> RwLockReadGuard<'_, ()> {
        self.barrier.read().unwrap_or_else(|e| e.into_inner())
    }

    /// The resets and restores made so far: what a fault that takes a request or a
    /// webhook attempt notes (`Taken::resets`), so that a delay that a reset or a restore
    /// came through does not carry it out.
    pub fn passed(&self) -> u64 {
        self.passed.load(Ordering::Acquire)
    }

    /// Runs a reset's or a restore's `step` alone, under the barrier, so that every
    /// request is wholly before it or wholly after it: counted first, then `step`, then
    /// what it clears beside the store (`forget`: the budgets, and the requests held by a
    /// delay, answered 503), before any request that waited for it goes on.
    fn barrier(&self, step: impl FnOnce() -> Result<(), ApiError>) -> Result<(), ApiError> {
        let _alone = self.barrier.write().unwrap_or_else(|e| e.into_inner());
        self.passed.fetch_add(1, Ordering::AcqRel);
        let done = step();
        (self.forget)();
        done
    }

    /// `POST /_control/reset`: the store as at start, and snapshots, the journal, the
    /// rate-limit budgets and the test clock (with its ticks) cleared; the seeded
    /// generators back where they were at start (event ids excepted: they never repeat).
    /// A barrier (`barrier`); the faults and the clock go before the store is restored,
    /// so that no write committed between the steps (a webhook's) is faulted or stamped
    /// by the test before, and the generators restart in the writer's restore step itself
    /// (`Db::reset`).
    pub fn reset(&self, db: &Db) -> Result<(), ApiError> {
        alone(db)?;
        let start = self
            .start
            .get()
            .ok_or_else(|| ApiError::Internal("no state at start was kept".into()))?;
        self.barrier(|| {
            self.faults.clear();
            self.clock.reset();
            db.reset(start.clone())?;
            self.snapshots
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clear();
            self.journal.clear();
            Ok(())
        })
    }

    /// `POST /_control/faults`: the fault as stored, its id `flt_…`.
    pub fn add_fault(&self, body: &[u8]) -> Result<Vec<u8>, ApiError> {
        let id = format!("flt_{}", self.random()?);
        self.faults.add(body, id, || {
            u64::from_str_radix(&self.random()?, 16)
                .map_err(|e| ApiError::Internal(format!("a seed: {e}")))
        })
    }

    /// `POST /_control/snapshots`: its id. Under the barrier (`gate`), from the copy to
    /// its keeping, so that a reset finds it wholly before (and clears it) or wholly after
    /// (a copy of the reset store).
    pub fn snapshot(&self, db: &Db) -> Result<String, ApiError> {
        let _gate = self.gate();
        if self
            .snapshots
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .len()
            >= MAX_SNAPSHOTS
        {
            return Err(full());
        }
        let image = Arc::new(db.snapshot()?);
        let id = format!("snap_{}", self.random()?);
        let mut snapshots = self.snapshots.lock().unwrap_or_else(|e| e.into_inner());
        if snapshots.len() >= MAX_SNAPSHOTS {
            return Err(full());
        }
        snapshots.push((id.clone(), image));
        Ok(id)
    }

    /// `POST /_control/snapshots/{id}/restore`.
    pub fn restore(&self, db: &Db, id: &str) -> Result<(), ApiError> {
        alone(db)?;
        let image = self
            .snapshots
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .find(|(i, _)| i == id)
            .map(|(_, image)| image.clone())
            .ok_or_else(|| no_snapshot(id))?;
        self.barrier(|| Ok(db.restore(image)?))
    }

    /// `DELETE /_control/snapshots/{id}`.
    pub fn remove(&self, id: &str) -> Result<(), ApiError> {
        let mut snapshots = self.snapshots.lock().unwrap_or_else(|e| e.into_inner());
        let at = snapshots
            .iter()
            .position(|(i, _)| i == id)
            .ok_or_else(|| no_snapshot(id))?;
        snapshots.remove(at);
        Ok(())
    }

    /// `POST /_control/tokens`: a token stored for `principal`, and its JSON with the
    /// token's public id. A token (or public id) drawn that the store already holds is
    /// drawn again: with `--test-seed` on a file that kept an earlier run's tokens, the
    /// same draws come. A chosen token is 409 when it is stored already, the control
    /// token, or `env`'s (`PLANT_STORE_TOKEN`, by its hash).
    pub fn mint(&self, db: &Db, body: &[u8], env: Option<&TokenHash>) -> Result<Vec<u8>, ApiError> {
        let asked = crate::api::seed::token_request(body)?;
        let now_ms = self.clock.unix_now_millis();
        let now = now_ms.div_euclid(1000);
        let expires_at = match asked.expires_in {
            Some(secs) => Some(expires_in(now_ms, secs)?),
            None => asked.expires_at,
        };
        let chosen = asked.token.as_deref().map(|t| (t, auth::hash_token(t)));
        if let Some((_, hash)) = &chosen {
            let taken =
                |whose: &str| ApiError::Taken(format!("token: that is {whose}; choose another"));
            if auth::hashes_equal(hash, &self.token) {
                return Err(taken("the control token"));
            }
            if env.is_some_and(|env| auth::hashes_equal(hash, env)) {
                return Err(taken("PLANT_STORE_TOKEN's token"));
            }
        }
        for _ in 0..MINT_DRAWS {
            let (token, hash) = match &chosen {
                Some((token, hash)) => {
                    if db.token_owner(hash)?.is_some() {
                        return Err(ApiError::Taken(
                            "token: this token is already stored".into(),
                        ));
                    }
                    (token.to_string(), *hash)
                }
                None => {
                    let token = auth::new_token(&self.random).map_err(no_randomness)?;
                    let hash = auth::hash_token(&token);
                    (token, hash)
                }
            };
            let public_id = auth::new_public_id(&self.random).map_err(no_randomness)?;
            let stored = db.add_token(NewToken {
                public_id: public_id.clone(),
                hash,
                principal: asked.principal.clone(),
                scope: asked.scope.as_str(),
                created_at: now,
                expires_at,
                place: String::new(),
            })?;
            if stored {
                let body = serde_json::json!({
                    "token": token,
                    "id": public_id,
                    "principal": asked.principal,
                    "scope": asked.scope.as_str(),
                    "expires_at": expires_at.map(crate::ops::clock::utc),
                });
                return Ok(body.to_string().into_bytes());
            }
        }
        Err(ApiError::Internal(format!(
            "{MINT_DRAWS} tokens drawn in a row were already stored"
        )))
    }
}

/// The expiry (seconds since the epoch) of a token minted at `now_ms` to last `secs`: no
/// later than the latest time a clock reads (a test clock near 9999-12-31), and 400 when
/// that would leave it expired already (the clock in its last second: expiry is kept to
/// the second, and a token is expired from its expiry on).
fn expires_in(now_ms: i64, secs: i64) -> Result<i64, ApiError> {
    let now = now_ms.div_euclid(1000);
    let latest = crate::ops::clock::LATEST_MS.div_euclid(1000);
    let at = (now + secs).min(latest);
    if at > now {
        return Ok(at);
    }
    Err(ApiError::BadRequest(format!(
        "expires_in: a token minted now would be expired at once: the clock reads {}, and no \
         token expires after {}",
        crate::ops::clock::utc_millis(now_ms),
        crate::ops::clock::utc(latest)
    )))
}

/// A reset or a restore rewinds the store under whoever else has its file open (their
/// event streams would skip what follows): 409 while anyone does (docs/testing.md, "A file
/// of its own").
fn alone(db: &Db) -> Result<(), ApiError> {
    match db.others() {
        None => Ok(()),
        Some(holder) => Err(ApiError::Full(format!(
            "the database file is not this server's alone ({holder}): a reset or restore would rewind it under them; try again once it is"
        ))),
    }
}

fn full() -> ApiError {
    ApiError::Full(format!(
        "at most {MAX_SNAPSHOTS} snapshots are kept; delete one first"
    ))
}

fn no_snapshot(id: &str) -> ApiError {
    ApiError::NotFound(format!(
        "no snapshot {}",
        crate::api::error::printable(id, 64)
    ))
}

impl Control {
    /// 64 random bits in hex for a control object's id (a snapshot's, a fault's): from
    /// the seeded generator with `--test-seed`, else the operating system.
    fn random(&self) -> Result<String, ApiError> {
        self.random.hex::<8>(Stream::Control).map_err(no_randomness)
    }
}

fn no_randomness(e: getrandom::Error) -> ApiError {
    ApiError::Internal(format!("no randomness: {e}"))
}

#[cfg(test)]
mod tests {
    use super::expires_in;
    use crate::ops::clock::LATEST_MS;

    #[test]
    fn a_token_that_would_expire_at_once_is_refused() {
        let latest = LATEST_MS.div_euclid(1000);
        assert_eq!(expires_in(0, 60).unwrap(), 60);
        assert_eq!(expires_in(1_999, 1).unwrap(), 2);
        // A second before the last: it lives until the clock's last second.
        assert_eq!(expires_in(LATEST_MS - 1000, 3600).unwrap(), latest);
        for now_ms in [LATEST_MS, latest * 1000] {
            let e = expires_in(now_ms, 3600).unwrap_err().to_string();
            assert!(e.starts_with("expires_in: "), "{e}");
        }
    }
}
