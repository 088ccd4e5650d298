//! A build without the `test-control` feature (the device build, `scripts/build-static ARCH
//! --small`): stands in for `control/`, with the names `serve.rs` and `running.rs` use.
//! No server has test control here (`config::control` refuses its options), so there
//! is no door, `Running::control` does not exist and `Running::control_token` is `None`.

use crate::api::caller::{Context, Writers};
use crate::api::control::Control;
use crate::api::ratelimit::Limiter;
use crate::config::ServeConfig;
use crate::http::delay::Delays;
use crate::ops::clock::Clock;
use crate::ops::random::Random;
use crate::store::Store;
use std::sync::Arc;

/// No test control to start.
pub(crate) fn start(
    _: &ServeConfig,
    _: &Store,
    _: Random,
    _: &Option<Arc<Limiter>>,
    _: &Arc<Writers>,
    _: &Arc<Clock>,
    _: &Arc<Delays>,
) -> Result<Option<Arc<Control>>, String> {
    Ok(None)
}

/// No door.
pub(crate) fn door(_: &ServeConfig, _: &Slot) -> Option<Door> {
    None
}

/// Where in-process control calls would run: nowhere.
#[derive(Clone, Default)]
pub(crate) struct Slot {
    _none: (),
}

impl Slot {
    pub fn new(_: Context) -> Slot {
        Slot::default()
    }

    pub fn close(&self) {}
}

/// A `Running`'s door to test control: none in this build.
pub(crate) enum Door {}

impl Door {
    pub fn token(&self) -> &str {
        match *self {}
    }
}

impl std::fmt::Debug for Door {
    fn fmt(&self, _: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {}
    }
}
