//! Test control's start (docs/testing.md): its state, made by `serve::launch` when the
//! server has test control on, before it listens, and its owner's door to it
//! (`Running::control`). Without the `test-control` feature, `server/no_control.rs`
//! stands in, and no server has it.

use crate::api::caller::Writers;
use crate::api::control::Control;
use crate::api::ratelimit::Limiter;
use crate::config::ServeConfig;
use crate::http::delay::Delays;
use crate::ops::clock::Clock;
use crate::server::control::door::{Door, Slot};
use crate::store::Store;
use std::sync::Arc;

/// Test control, when on: its state, with the store as it is before the server listens
/// (what a reset goes back to).
pub(crate) fn start(
    config: &ServeConfig,
    store: &Store,
    random: crate::ops::random::Random,
    limiter: &Option<Arc<Limiter>>,
    writers: &Arc<Writers>,
    clock: &Arc<Clock>,
    delays: &Arc<Delays>,
) -> Result<Option<Arc<Control>>, String> {
    let (true, Some(token)) = (config.test_control, &config.control_token) else {
        return Ok(None);
    };
    let (limiter, writers, delays) = (limiter.clone(), writers.clone(), delays.clone());
    // What a reset or a restore clears beside the store; the requests a delay holds are
    // answered 503, not carried out.
    let forget = move || {
        if let Some(limiter) = &limiter {
            limiter.clear();
        }
        writers.clear();
        delays.release();
        // The trickles of answers made before it send the rest at once.
        delays.cut();
    };
    if random.seeded() {
        log::warn!("--test-seed: ids and tokens made at run time are predictable from the seed");
    }
    let control = Control::new(
        token.expose(),
        (config.journal_size, config.journal_bytes),
        random,
        Box::new(forget),
        clock.clone(),
    );
    control.started(
        store
            .snapshot()
            .map_err(|e| format!("cannot copy the store for test control: {e}"))?,
    );
    log::warn!(
        "test control is on: /_control/ can reset the store, make tokens and read the journal; never in production"
    );
    Ok(Some(Arc::new(control)))
}

/// The door of a `Running` with test control on: the control token, and where its calls
/// in this process run (the control token is never logged).
pub(crate) fn door(config: &ServeConfig, slot: &Slot) -> Option<Door> {
    match (config.test_control, &config.control_token) {
        (true, Some(token)) => Some(Door::new(token.clone(), slot.clone())),
        _ => None,
    }
}
