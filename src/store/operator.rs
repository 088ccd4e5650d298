//! What the operator's commands use (`token`, `webhook`, `backup`), beside no server or
//! while servers run: each call is one short transaction, or a consistent copy.

use crate::store::location::Location;
use crate::store::postgres;
use crate::store::seam::{self, EndpointRecord, StoreResult, TokenRecord};
use crate::store::sqlite;

/// Token administration, for the `token` subcommands. Safe while servers run on the
/// same database: each call is one short transaction.
pub struct Tokens(Box<dyn seam::TokenAdmin>);

impl Tokens {
    /// Opens (and migrates) the database; `read_only` (for `token list`): never migrated
    /// nor written, and refused unless at this binary's schema version.
    pub fn open(location: &Location, read_only: bool) -> StoreResult<Tokens> {
        Ok(Tokens(match location {
            Location::Postgres(url) => postgres::tokens(url, read_only)?,
            _ => sqlite::tokens(location, read_only)?,
        }))
    }

    pub fn add(&mut self, record: &TokenRecord, hash: &[u8; 32]) -> StoreResult<()> {
        self.0.add(record, hash)
    }

    /// Every token, oldest first (ties by identifier, byte order).
    pub fn list(&mut self) -> StoreResult<Vec<TokenRecord>> {
        self.0.list()
    }

    /// Removes a token; false when no token has this identifier.
    pub fn revoke(&mut self, public_id: &str) -> StoreResult<bool> {
        self.0.revoke(public_id)
    }
}

/// Webhook administration, for the `webhook` subcommands; like `Tokens`.
pub struct Webhooks(Box<dyn seam::WebhookAdmin>);

impl Webhooks {
    /// As `Tokens::open`.
    pub fn open(location: &Location, read_only: bool) -> StoreResult<Webhooks> {
        Ok(Webhooks(match location {
            Location::Postgres(url) => postgres::webhooks(url, read_only)?,
            _ => sqlite::webhooks(location, read_only)?,
        }))
    }

    /// Adds an active endpoint that gets the events committed from now on; returns the
    /// seq its deliveries start after.
    pub fn add(&mut self, record: &EndpointRecord, secret: &str) -> StoreResult<i64> {
        self.0.add(record, secret)
    }

    /// Every endpoint, oldest first (ties by identifier, byte order).
    pub fn list(&mut self) -> StoreResult<Vec<EndpointRecord>> {
        self.0.list()
    }

    /// Removes an endpoint; false when none has this identifier.
    pub fn remove(&mut self, id: &str) -> StoreResult<bool> {
        self.0.remove(id)
    }

    /// Resumes an endpoint with a fresh schedule; its cursor before and after (past the
    /// events retention removed while it was disabled); `None` when none has this
    /// identifier.
    pub fn enable(&mut self, id: &str) -> StoreResult<Option<(i64, i64)>> {
        self.0.enable(id)
    }
}

/// Writes a consistent copy of a SQLite database to `target` (an empty file); ends with
/// an error soon after `stop` is set.
pub fn backup_into(
    location: &Location,
    target: &std::path::Path,
    stop: &std::sync::atomic::AtomicBool,
) -> StoreResult<()> {
    sqlite::backup_into(location, target, stop)
}
