//! Whole-store operations for test control (what they mean is `api::control`'s): a copy
//! of the whole database (`Image`), the database made again what a copy holds, a token
//! added at run time. Each goes to the writer thread as a job of its own (`Change::Admin`,
//! sent by `store/control.rs`), run alone between two groups, so no group commit and no
//! read sees half of one. And what `--seed` loads (`Seed`: in the transaction that opens
//! the store, `store/terms.rs`). This module holds their types only.

use std::sync::Arc;
use std::sync::mpsc::SyncSender;

/// A copy of the whole database (plants, tokens, events and their logs, webhook
/// endpoints and their progress), held in memory by the backend that made it.
pub struct Image(pub Box<dyn std::any::Any + Send + Sync>);

/// A token to store (its hash, never the token).
pub struct NewToken {
    pub public_id: String,
    pub hash: [u8; 32],
    pub principal: String,
    /// `read` or `read-write`.
    pub scope: &'static str,
    /// Seconds since the Unix epoch.
    pub created_at: i64,
    pub expires_at: Option<i64>,
    /// Where a seed file declared it, for its error (`tokens[2]`).
    pub place: String,
}

/// A plant a seed creates, as a create would (with its `plant.created` event).
pub struct SeedPlant {
    pub principal: String,
    pub id: i64,
    pub name: String,
    pub tag: Option<String>,
    /// Where the seed file declared it (`plants.alice[3]`).
    pub place: String,
}

/// What a seed file holds, checked: applied whole or not at all.
#[derive(Default)]
pub struct Seed {
    pub tokens: Vec<NewToken>,
    pub plants: Vec<SeedPlant>,
}

/// An operation of the writer thread on the whole store.
pub enum Admin {
    /// Copies the whole database.
    Snapshot,
    /// Makes the database again what the image holds, in one transaction; `restart`: and
    /// the seeded generators go back to their states at start (a reset), between the
    /// same two groups.
    Restore { image: Arc<Image>, restart: bool },
    /// Stores a token.
    AddToken(NewToken),
}

/// What an operation gave.
pub enum Admitted {
    Image(Image),
    Done,
    /// A token not stored: its hash or public id is already (`AddToken`).
    Taken,
}

/// An operation and where its result (or the failure's message) goes.
pub struct AdminJob {
    pub op: Admin,
    pub reply: SyncSender<Result<Admitted, String>>,
}
