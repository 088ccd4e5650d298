//! The listener: while any event stream is open, one connection outside the pool
//! LISTENs on the channel every group notifies at its commit (`group.rs`), and names
//! on the board the principals that other instances (and this one) appended to.

use crate::store::feed::Board;
use crate::store::postgres::group::EVENTS_CHANNEL;
use crate::store::postgres::pool::Pool;
use crate::store::seam::StoreResult;
use postgres::fallible_iterator::FallibleIterator;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long the listener waits for a notification before it looks whether streams are
/// still open and the server still runs.
const LISTEN_TICK: Duration = Duration::from_millis(250);
/// The pause after the listening connection failed, before another is opened.
const LISTEN_RETRY: Duration = Duration::from_secs(1);
/// How long the connection stays after the last stream closed: streams that come and go
/// do not open and close a connection each time.
const LISTEN_LINGER: Duration = Duration::from_secs(30);
/// Notifications announced together at most.
const MAX_NAMED_AT_ONCE: usize = 256;

/// Runs until the board stops.
pub fn run(pool: &Arc<Pool>, board: &Board) {
    while !board.stopped() {
        if !board.listening() {
            std::thread::sleep(LISTEN_TICK);
            continue;
        }
        if let Err(e) = listen(pool, board) {
            log::warn!("the PostgreSQL event listener failed ({e}); reconnecting");
            std::thread::sleep(LISTEN_RETRY);
        }
    }
}

/// One listening connection, until it fails, no stream has been open for
/// `LISTEN_LINGER`, or the board stops. Whatever was committed while nobody listened is found by the streams' reads:
/// once listening, every stream is told to look.
fn listen(pool: &Pool, board: &Board) -> StoreResult<()> {
    let mut conn = pool.connect()?;
    conn.client
        .batch_execute(&format!("LISTEN {EVENTS_CHANNEL}"))?;
    board.announce_all();
    let mut heard_for = Instant::now();
    while !board.stopped() {
        if board.listening() {
            heard_for = Instant::now();
        } else if heard_for.elapsed() >= LISTEN_LINGER {
            break;
        }
        // One wait for the first notification, then only what has already arrived: each
        // is announced as soon as it is heard.
        let mut notifications = conn.client.notifications();
        let Some(first) = notifications.timeout_iter(LISTEN_TICK).next()? else {
            continue;
        };
        let mut named = Vec::new();
        let mut heard = Some(first);
        let mut arrived = notifications.iter();
        while let Some(n) = heard {
            if n.payload().is_empty() {
                board.announce_all();
            } else {
                named.push(n.payload().to_owned());
            }
            if named.len() >= MAX_NAMED_AT_ONCE {
                break;
            }
            heard = arrived.next()?;
        }
        board.announce(named.iter().map(String::as_str));
    }
    Ok(())
}
