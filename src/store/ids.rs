//! The identifiers the store makes: event ids (and so `webhook-id`s), their random bits
//! from the server's `Random` (the operating system's, or `--test-seed`'s generators).

use crate::ops::random::{Random, Stream, hex};
use crate::store::seam::{Job, StoreError, StoreResult};

/// An identifier for the event of each change of a batch (the empty string for a change
/// that appends none): `evt_` and 128 random bits in hex, unique across every principal.
/// One draw for the whole batch, and none for a change without an event (a sweep, a
/// webhook claim), so that seeded ids depend only on the events made.
pub fn event_ids(random: &Random, batch: &[Job]) -> StoreResult<Vec<String>> {
    let owned = batch
        .iter()
        .filter(|job| job.change.owner().is_some())
        .count();
    let mut bytes = vec![0u8; 16 * owned];
    random
        .fill(Stream::Events, &mut bytes)
        .map_err(|e| StoreError(format!("no randomness: {e}")))?;
    let mut drawn = bytes.chunks_exact(16);
    Ok(batch
        .iter()
        .map(|job| match job.change.owner() {
            Some(_) => format!("evt_{}", hex(drawn.next().unwrap_or_default())),
            None => String::new(),
        })
        .collect())
}
