//! Whole-store operations for test control and `--seed`: a copy of the whole database
//! (`Image`), the database made again what a copy holds, a token added at run time, and a
//! seed loaded in one transaction. Each goes to the writer thread as a job of its own
//! (`Change::Admin`), run between two groups, so no group commit and no read sees half of
//! one. What they mean (snapshots, reset, the seed file's shape) is `api::control`'s.

use crate::store::seam::{Change, Job, StoreError, StoreResult, TokenRecord};
use crate::store::{Db, Store};
use std::sync::Arc;
use std::sync::mpsc::{SyncSender, sync_channel};

/// A copy of the whole database (plants, tokens, events and their logs, webhook
/// endpoints and their progress), held in memory by the backend that made it.
pub struct Image(pub(crate) Box<dyn std::any::Any + Send + Sync>);

/// A token to store: its record and its hash.
pub struct NewToken {
    pub record: TokenRecord,
    pub hash: [u8; 32],
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
    /// Makes the database again what the image holds, in one transaction.
    Restore(Arc<Image>),
    /// Stores a token.
    AddToken(NewToken),
    /// Loads a seed in one transaction; its error names the place that failed.
    Seed(Seed),
}

/// What an operation gave.
pub enum Admitted {
    Image(Image),
    Done,
}

/// An operation and where its result goes.
pub struct AdminJob {
    pub op: Admin,
    pub reply: SyncSender<StoreResult<Admitted>>,
}

/// Sends `op` to the writer thread and waits for its result.
fn run(jobs: &SyncSender<Job>, op: Admin) -> StoreResult<Admitted> {
    let (reply, result) = sync_channel(1);
    let job = Job {
        change: Change::Admin(Box::new(AdminJob { op, reply })),
        done: Box::new(|_| {}),
    };
    jobs.send(job)
        .map_err(|_| StoreError("the writer has stopped".into()))?;
    result
        .recv()
        .map_err(|_| StoreError("the writer has stopped".into()))?
}

fn image(done: Admitted) -> StoreResult<Image> {
    match done {
        Admitted::Image(image) => Ok(image),
        Admitted::Done => Err(StoreError("the writer made no copy".into())),
    }
}

impl Store {
    /// Loads a seed before the server serves (applied whole, or nothing of it).
    pub fn seed(&self, seed: Seed) -> StoreResult<()> {
        run(&self.jobs, Admin::Seed(seed)).map(|_| ())
    }

    /// A copy of the whole database as it is now.
    pub fn snapshot(&self) -> StoreResult<Image> {
        image(run(&self.jobs, Admin::Snapshot)?)
    }
}

impl Db {
    /// A copy of the whole database as it is between two groups.
    pub fn snapshot(&self) -> StoreResult<Image> {
        image(run(&self.jobs, Admin::Snapshot)?)
    }

    /// Makes the whole database what `image` holds, in one transaction.
    pub fn restore(&self, image: Arc<Image>) -> StoreResult<()> {
        run(&self.jobs, Admin::Restore(image)).map(|_| ())
    }

    /// Stores a token made at run time.
    pub fn add_token(&self, token: NewToken) -> StoreResult<()> {
        run(&self.jobs, Admin::AddToken(token)).map(|_| ())
    }
}
