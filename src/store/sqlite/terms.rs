//! A server's terms on SQLite (`store::terms`): checked, and the file marked and seeded,
//! inside the transaction that migrates it (`migrate`), so that a refusal rolls all of it
//! back and the file is as it was.

use crate::ops::clock::Clock;
use crate::ops::random::{Random, Stream};
use crate::store::seam::StoreError;
use crate::store::terms::{OpenError, Terms};
use rusqlite::{Connection, OptionalExtension};

/// The events the store has ever appended (its logs' last seqs, summed): mixed into a
/// seeded server's event ids (`Random::vary`), so that a reused file draws none it holds.
const EVENTS_MADE: &str = "SELECT coalesce(sum(last_seq), 0) FROM log_tails";

/// How many times a server with test control has opened the file (one row each).
const TEST_CONTROL_STARTS: &str = "SELECT count(*) FROM test_control";

/// Inside the migration's transaction, at this binary's schema: the terms checked (a
/// refusal names what and what to do), the file marked when test control is on, the
/// generators varied, the seed loaded.
pub(super) fn admit(
    conn: &Connection,
    shown: &str,
    terms: Terms,
    clock: &Clock,
    random: &Random,
) -> Result<(), OpenError> {
    let marked: Option<i64> = conn
        .query_row("SELECT min(first_at) FROM test_control", [], |r| r.get(0))
        .map_err(StoreError::from)?;
    match (terms.test_control, marked) {
        // Each start with test control adds its row: their count varies the event ids.
        (true, _) => {
            conn.execute(
                "INSERT INTO test_control (first_at) VALUES (?1)",
                [clock.unix_now_millis()],
            )
            .map_err(StoreError::from)?;
        }
        (false, Some(at)) if !terms.allow_test_file => {
            return Err(OpenError::Refused(format!(
                "{shown} was written by a server with test control (first at {}): tokens made there may be known from a --test-seed, and a server without test control refuses the file. Serve it with test control, or, if it is meant for production, start with {}",
                crate::ops::clock::utc(at.div_euclid(1000)),
                terms.named.allow_test_file
            )));
        }
        _ => {}
    }
    if let Some(hash) = &terms.control_token {
        let stored: Option<String> = conn
            .query_row(
                "SELECT public_id FROM tokens WHERE hash = ?1",
                [&hash[..]],
                |r| r.get(0),
            )
            .optional()
            .map_err(StoreError::from)?;
        if let Some(id) = stored {
            return Err(OpenError::Refused(format!(
                "{} is stored in {shown} as a principal's token (id {id}): the control token is no principal's. Choose another control token, or revoke that one (`plant-store token revoke {id}`)",
                terms.named.control_token
            )));
        }
    }
    let made: i64 = conn
        .query_row(EVENTS_MADE, [], |r| r.get(0))
        .map_err(StoreError::from)?;
    random.vary(Stream::Events, u64::try_from(made).unwrap_or(0));
    // A run whose last reset put the file back as it began leaves `made` as it was: the
    // starts with test control tell two such runs apart (a fresh file's first is 1, as
    // every run's on `:memory:`), so an event id never comes again within a file's life.
    let starts: i64 = conn
        .query_row(TEST_CONTROL_STARTS, [], |r| r.get(0))
        .map_err(StoreError::from)?;
    if starts > 1 {
        random.vary(Stream::Events, u64::try_from(starts).unwrap_or(0));
    }
    if let Some(seed) = &terms.seed {
        crate::store::sqlite::writer::load_seed(conn, seed, clock, random)
            .map_err(|e| OpenError::Seed(e.0))?;
    }
    Ok(())
}
