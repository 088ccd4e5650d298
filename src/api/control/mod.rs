//! Test control (docs/testing.md): the one owner of its state and rules. A server started
//! with `--test-control` has one `Control`; every layer reaches it through one narrow
//! hook that is a branch on `None` when test control is off:
//!
//! - the router (`api::routes::control`): `/_control/…` is routed here, else 404;
//! - the answer (`http::response::write`): `Control::answered` journals the request
//!   before its first byte goes out (`journal.rs`);
//! - the store (`store::admin`): snapshots, restores, tokens and the seed go to the
//!   writer thread as whole-store operations; a restore ends the event streams (the
//!   store's `Board` says the store was replaced).
//!
//! Part 2 of issue 30 (faults, the clock, `--test-seed`) adds its state here and its
//! hooks beside these: `Control::fault_for` at the router after the token and rate-limit
//! checks, the clock in `ops/clock.rs` read through `Control`.

mod fault_body;
pub mod faults;
pub mod journal;
pub mod seed;

use crate::api::auth::{self, TokenHash};
use crate::api::error::ApiError;
use crate::store::Db;
use crate::store::admin::{Image, NewToken};
use journal::Journal;
use std::sync::{Arc, Mutex, OnceLock};

/// The shortest control token accepted (`PLANT_STORE_CONTROL_TOKEN`), in bytes.
pub const MIN_CONTROL_TOKEN_BYTES: usize = 16;
/// Snapshots kept at most (`POST /_control/snapshots`); one more is 409.
pub const MAX_SNAPSHOTS: usize = 16;
/// The default of `--journal-size`: requests the journal keeps.
pub const DEFAULT_JOURNAL_SIZE: usize = 1000;
/// The most `--journal-size` accepts.
pub const MAX_JOURNAL_SIZE: usize = 1_000_000;

/// What a control request is answered, when it succeeds.
pub enum Answer {
    /// 204.
    NoContent,
    /// 201 with a JSON body.
    Created(Vec<u8>),
    /// 200 with a JSON body.
    Json(Vec<u8>),
}

/// One server's test control.
pub struct Control {
    /// The control token's hash: compared in constant time, never stored elsewhere.
    token: TokenHash,
    pub journal: Journal,
    /// The faults (`/_control/faults`), tried by the router after the token and
    /// rate-limit checks, and by the webhook deliveries.
    pub faults: faults::Faults,
    /// The store as it was when the server began listening (`POST /_control/reset`).
    start: OnceLock<Arc<Image>>,
    snapshots: Mutex<Vec<(String, Arc<Image>)>>,
    /// What a restore clears beside the store: the rate-limit budgets, and the tokens
    /// found able to write (the server's, given by `cli::serve`).
    forget: Box<dyn Fn() + Send + Sync>,
}

impl Control {
    pub fn new(token: &str, journal_size: usize, forget: Box<dyn Fn() + Send + Sync>) -> Control {
        Control {
            token: auth::hash_token(token),
            journal: Journal::new(journal_size),
            faults: faults::Faults::default(),
            start: OnceLock::new(),
            snapshots: Mutex::new(Vec::new()),
            forget,
        }
    }

    /// The store as the server begins to listen: what a reset goes back to.
    pub fn started(&self, image: Image) {
        let _ = self.start.set(Arc::new(image));
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

    /// `POST /_control/reset`: the store as at start, and snapshots, the journal and the
    /// rate-limit budgets cleared.
    pub fn reset(&self, db: &Db) -> Result<(), ApiError> {
        let start = self
            .start
            .get()
            .ok_or_else(|| ApiError::Internal("no state at start was kept".into()))?;
        db.restore(start.clone())?;
        self.snapshots
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
        self.journal.clear();
        self.faults.clear();
        (self.forget)();
        Ok(())
    }

    /// `POST /_control/faults`: the fault as stored, its id `flt_…`.
    pub fn add_fault(&self, body: &[u8]) -> Result<Vec<u8>, ApiError> {
        let id = format!("flt_{}", random()?);
        self.faults.add(body, id, || {
            u64::from_str_radix(&random()?, 16)
                .map_err(|e| ApiError::Internal(format!("a seed: {e}")))
        })
    }

    /// `POST /_control/snapshots`: its id.
    pub fn snapshot(&self, db: &Db) -> Result<String, ApiError> {
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
        let id = format!("snap_{}", random()?);
        let mut snapshots = self.snapshots.lock().unwrap_or_else(|e| e.into_inner());
        if snapshots.len() >= MAX_SNAPSHOTS {
            return Err(full());
        }
        snapshots.push((id.clone(), image));
        Ok(id)
    }

    /// `POST /_control/snapshots/{id}/restore`.
    pub fn restore(&self, db: &Db, id: &str) -> Result<(), ApiError> {
        let image = self
            .snapshots
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .find(|(i, _)| i == id)
            .map(|(_, image)| image.clone())
            .ok_or_else(|| no_snapshot(id))?;
        db.restore(image)?;
        (self.forget)();
        Ok(())
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

    /// `POST /_control/tokens`: a token stored for `principal`, and its JSON.
    pub fn mint(&self, db: &Db, body: &[u8]) -> Result<Vec<u8>, ApiError> {
        let asked = seed::token_request(body)?;
        let token = auth::new_token().map_err(|e| ApiError::Internal(e.to_string()))?;
        let now = crate::ops::clock::unix_now();
        let expires_at = asked.expires_in.map(|secs| now + secs);
        let token_hash = auth::hash_token(&token);
        let body = serde_json::json!({
            "token": token,
            "principal": asked.principal,
            "scope": asked.scope.as_str(),
            "expires_at": expires_at.map(crate::ops::clock::utc),
        });
        db.add_token(NewToken {
            public_id: random_public_id()?,
            hash: token_hash,
            principal: asked.principal,
            scope: asked.scope.as_str(),
            created_at: now,
            expires_at,
            place: String::new(),
        })?;
        Ok(body.to_string().into_bytes())
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

fn random() -> Result<String, ApiError> {
    auth::random_hex::<8>().map_err(|e| ApiError::Internal(format!("no randomness: {e}")))
}

fn random_public_id() -> Result<String, ApiError> {
    auth::new_public_id().map_err(|e| ApiError::Internal(format!("no randomness: {e}")))
}
