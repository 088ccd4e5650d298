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

/// How many characters an event id has: `evt_` and 32 hex digits.
pub const EVENT_ID_CHARS: usize = 36;

/// The text of an event id stored as its bytes (SQLite keeps the 16 bytes: plants.sql,
/// version 7), written into `out`: `evt_` and two lowercase hex digits per byte, of at
/// most 16 bytes (more are not shown).
pub fn event_id_text<'a>(bytes: &[u8], out: &'a mut [u8; EVENT_ID_CHARS]) -> &'a str {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out[..4].copy_from_slice(b"evt_");
    let bytes = &bytes[..bytes.len().min(16)];
    for (i, &b) in bytes.iter().enumerate() {
        out[4 + 2 * i] = HEX[usize::from(b >> 4)];
        out[5 + 2 * i] = HEX[usize::from(b & 15)];
    }
    std::str::from_utf8(&out[..4 + 2 * bytes.len()]).unwrap_or("evt_")
}

#[cfg(test)]
mod tests {
    #[test]
    fn an_event_id_is_evt_and_its_bytes_in_lowercase_hex() {
        let mut out = [0; super::EVENT_ID_CHARS];
        let bytes: Vec<u8> = (0..16).map(|i| i * 17).collect();
        assert_eq!(
            super::event_id_text(&bytes, &mut out),
            "evt_00112233445566778899aabbccddeeff"
        );
        assert_eq!(super::event_id_text(&[0xab], &mut out), "evt_ab");
    }
}
