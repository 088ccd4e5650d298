//! The PostgreSQL backend (the `postgres` feature): the only module that holds the
//! `postgres` crate's types.
//!
//! One instance holds at most `--db-pool` connections: the writer thread's own, and the
//! rest in a `Pool` that workers and list streams borrow from for one request or one page.
//! Connections open when first needed. One that breaks (the server restarted or went
//! away) is dropped with every idle one, and a read is tried once more on a new
//! connection. A group of writes is one round trip (`group_sql`) and is never sent twice;
//! the write connection is checked before a group when it has been idle. Each connection
//! runs with `synchronous_commit=on`.
//!
//! The `postgres` client drives tokio-postgres on a current-thread tokio runtime inside
//! each connection: no threads of its own (docs/postgres.md).

mod conn;
mod group;
mod listen;
mod lost;
mod pool;
mod tls;
mod tokens;
mod webhooks;
mod writer;

use crate::store::feed::Board;
use crate::store::seam::{Opened, StoreError, StoreResult, TokenAdmin, WebhookAdmin};
use std::sync::Arc;

/// Whether this build opens PostgreSQL.
pub const AVAILABLE: bool = true;

/// Whether a connection could be made with this URL's settings (its syntax, its TLS
/// parameters, a root certificate it names), checked without connecting.
pub fn check(url: &str) -> StoreResult<()> {
    conn::target(url).map(|_| ())
}

/// Connects once, migrates, and opens the pool and the writer on it, and the listener
/// that tells the board of other instances' events.
pub fn open(url: &str, pool: usize, board: Arc<Board>) -> StoreResult<Opened> {
    let pool = Arc::new(pool::Pool::open(url, pool)?);
    let for_listener = pool.clone();
    std::thread::Builder::new()
        .name("listen".into())
        .stack_size(256 * 1024)
        .spawn(move || listen::run(&for_listener, &board))
        .map_err(|e| StoreError(format!("cannot start the event listener: {e}")))?;
    Ok(Opened {
        backend: Box::new(pool.clone()),
        streams: pool.clone(),
        writer: Box::new(writer::PgWriter::new(pool)),
    })
}

/// Token administration: one connection, each call its own transaction.
pub fn tokens(url: &str, read_only: bool) -> StoreResult<Box<dyn TokenAdmin>> {
    Ok(Box::new(tokens::Tokens::open(url, read_only)?))
}

#[cfg(test)]
mod tests;

/// Webhook administration: one connection, each call its own transaction.
pub fn webhooks(url: &str, read_only: bool) -> StoreResult<Box<dyn WebhookAdmin>> {
    Ok(Box::new(webhooks::Webhooks::open(url, read_only)?))
}
