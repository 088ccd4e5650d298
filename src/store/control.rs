//! Sending whole-store operations (`admin.rs`) to the writer thread and waiting for them:
//! the copy at start (`Store`), and a worker's snapshots, restores and
//! tokens (`Db`).

use crate::store::admin::{Admin, AdminJob, Admitted, Image, NewToken};
use crate::store::seam::{Change, Job, StoreError, StoreResult};
use crate::store::{Db, Store};
use std::sync::Arc;
use std::sync::mpsc::{SyncSender, sync_channel};

/// Sends `op` to the writer thread and waits for its result.
fn run(jobs: &SyncSender<Job>, op: Admin) -> StoreResult<Admitted> {
    let stopped = || StoreError("the writer has stopped".into());
    let (reply, result) = sync_channel(1);
    let job = Job {
        change: Change::Admin(Box::new(AdminJob { op, reply })),
        done: Box::new(|_| {}),
    };
    jobs.send(job).map_err(|_| stopped())?;
    result.recv().map_err(|_| stopped())?.map_err(StoreError)
}

fn image(done: Admitted) -> StoreResult<Image> {
    match done {
        Admitted::Image(image) => Ok(image),
        Admitted::Done | Admitted::Taken => Err(StoreError("the writer made no copy".into())),
    }
}

impl Store {
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
        let restart = false;
        run(&self.jobs, Admin::Restore { image, restart }).map(|_| ())
    }

    /// A restore that also puts the seeded generators back where they were at start
    /// (`Random::restart`), with no write between the two (test control's reset).
    pub fn reset(&self, image: Arc<Image>) -> StoreResult<()> {
        let restart = true;
        run(&self.jobs, Admin::Restore { image, restart }).map(|_| ())
    }

    /// Stores a token made at run time; false, and nothing stored, when its hash or
    /// public id is already stored.
    pub fn add_token(&self, token: NewToken) -> StoreResult<bool> {
        run(&self.jobs, Admin::AddToken(token)).map(|done| !matches!(done, Admitted::Taken))
    }
}
