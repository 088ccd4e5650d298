//! A group whose COMMIT was sent and whose answer was lost: its jobs wait on a thread of
//! their own until the database says whether it took effect.

use crate::store::postgres::group::{Marker, outcomes};
use crate::store::postgres::pool::Pool;
use crate::store::seam::{Job, OUTCOME_UNKNOWN, StoreError, StoreResult};
use std::time::{Duration, Instant};

/// How long a writer whose answer to a COMMIT was lost keeps trying to learn the outcome
/// (reconnecting, as the database may be restarting) before it answers 500 "unknown".
const SETTLE_WITHIN: Duration = Duration::from_secs(30);
/// The pause between two such tries.
const SETTLE_RETRY: Duration = Duration::from_millis(250);

/// A group whose COMMIT was sent and whose answer was lost, with the jobs waiting for it.
pub struct Lost {
    pub pool: std::sync::Arc<Pool>,
    /// The server session that sent it: its process id and start time.
    pub session: Option<(i32, i64)>,
    pub marker: Marker,
    pub order: Vec<usize>,
    /// The error that broke the connection: the answer when the group did not commit.
    pub error: StoreError,
    pub jobs: Vec<Job>,
}

impl Lost {
    /// Waits until the session that sent the group has ended (ending it if it still
    /// runs, so that nothing it does comes later), then looks the group's marker up, and
    /// answers every job: by its outcome when the group committed, with the error when
    /// it did not, "unknown" when the database cannot be asked within `SETTLE_WITHIN`.
    pub fn settle(self) {
        let deadline = Instant::now() + SETTLE_WITHIN;
        let found = loop {
            match self.look_up(deadline) {
                Ok(found) => break Ok(found),
                Err(e) if Instant::now() + SETTLE_RETRY < deadline => {
                    log::debug!(
                        "cannot learn yet whether a group of writes committed ({e}); retrying"
                    );
                    std::thread::sleep(SETTLE_RETRY);
                }
                Err(e) => {
                    log::error!("cannot learn whether a group of writes committed: {e}");
                    break Err(StoreError(OUTCOME_UNKNOWN.into()));
                }
            }
        };
        let outcomes = match found {
            Ok(Some(digits)) => {
                log::info!("the group of {} writes had committed", self.jobs.len());
                outcomes(&self.jobs, &self.order, &digits)
            }
            Ok(None) => {
                log::info!("the group of {} writes had not committed", self.jobs.len());
                Err(self.error)
            }
            Err(e) => Err(e),
        };
        match outcomes {
            Ok(outcomes) => {
                for (job, outcome) in self.jobs.into_iter().zip(outcomes) {
                    (job.done)(Ok(outcome));
                }
            }
            Err(e) => {
                for job in self.jobs {
                    (job.done)(Err(StoreError(e.0.clone())));
                }
            }
        }
    }

    fn look_up(&self, deadline: Instant) -> StoreResult<Option<String>> {
        let mut conn = self.pool.connect()?;
        if let Some((pid, started)) = &self.session {
            let this = "FROM pg_stat_activity WHERE pid = $1 \
                AND (extract(epoch FROM backend_start) * 1000000)::bigint = $2";
            let alive = format!("SELECT count(*) {this}");
            let end = format!("SELECT pg_terminate_backend(pid) {this}");
            conn.client.execute(&end, &[pid, started])?;
            while conn
                .client
                .query_one(&alive, &[pid, started])?
                .get::<_, i64>(0)
                > 0
            {
                if Instant::now() > deadline {
                    return Err(StoreError(
                        "the session that sent the group is still there".into(),
                    ));
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        let row = conn.client.query_opt(
            "SELECT outcomes FROM plant_store_groups WHERE at = $1 AND nonce = $2",
            &[&self.marker.at, &&self.marker.nonce[..]],
        )?;
        Ok(row.map(|r| r.get(0)))
    }
}
