//! The stand-in for the PostgreSQL backend in a build without the `postgres` feature:
//! it refuses every URL (`store/mod.rs` picks one of the two).

use crate::store::seam::{Opened, StoreError, StoreResult, TokenAdmin, WebhookAdmin};

/// Whether this build opens PostgreSQL.
pub const AVAILABLE: bool = false;

fn unsupported<T>() -> StoreResult<T> {
    Err(StoreError(
        "this build has no PostgreSQL support (it was built without the `postgres` cargo feature)"
            .into(),
    ))
}

/// Whether a connection could be made with this URL's settings: never, here.
pub fn check(_url: &str) -> StoreResult<()> {
    unsupported()
}

pub fn open(
    _url: &str,
    _pool: usize,
    _board: std::sync::Arc<crate::store::feed::Board>,
) -> StoreResult<Opened> {
    unsupported()
}

pub fn tokens(_url: &str, _read_only: bool) -> StoreResult<Box<dyn TokenAdmin>> {
    unsupported()
}

pub fn webhooks(_url: &str, _read_only: bool) -> StoreResult<Box<dyn WebhookAdmin>> {
    unsupported()
}
