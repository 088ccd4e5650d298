//! The identifiers the store makes: event ids, 128 random bits each (a later seeded
//! generator for repeatable test runs goes here, one place).

use crate::store::seam::{Job, StoreError, StoreResult};

/// An identifier for the event of each change of a batch (the empty string for a change
/// that appends none): `evt_` and 128 random bits in hex, unique across every principal
/// and never reused. One draw from the operating system for the whole batch.
pub fn event_ids(batch: &[Job]) -> StoreResult<Vec<String>> {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut bytes = vec![0u8; 16 * batch.len()];
    getrandom::fill(&mut bytes).map_err(|e| StoreError(format!("no randomness: {e}")))?;
    Ok(batch
        .iter()
        .zip(bytes.chunks_exact(16))
        .map(|(job, random)| {
            let mut id = String::new();
            if job.change.owner().is_some() {
                id.reserve(36);
                id.push_str("evt_");
                for &b in random {
                    id.push(HEX[usize::from(b >> 4)] as char);
                    id.push(HEX[usize::from(b & 15)] as char);
                }
            }
            id
        })
        .collect())
}
