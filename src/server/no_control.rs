//! A build without the `test-control` feature (the device build, `scripts/build-static ARCH
//! --small`): stands in for `control.rs`, with its names. No server has test control
//! here (`config::control` refuses its options).

use crate::api::caller::Writers;
use crate::api::control::Control;
use crate::api::ratelimit::Limiter;
use crate::config::ServeConfig;
use crate::http::delay::Delays;
use crate::ops::clock::Clock;
use crate::ops::random::Random;
use crate::store::Store;
use std::sync::Arc;

/// None.
pub(super) fn start(
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
