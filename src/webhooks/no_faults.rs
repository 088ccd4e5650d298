//! A build without the `test-control` feature: stands in for `faults.rs`, with its names.
//! No fault takes an attempt: `api::control`'s stand-in has no `Control` and no `Taken`.

use crate::api::control::Control;
use crate::api::control::faults::Taken;
use crate::store::Endpoint;
use crate::webhooks::client::{Answer, Client, Message};
use std::sync::atomic::AtomicBool;
use std::time::Duration;

pub(super) fn take(control: &Control, _: &Endpoint) -> Option<Taken> {
    match *control {}
}

pub(super) fn lease_extra(taken: &Taken, _: Duration) -> Duration {
    match *taken {}
}

pub(super) fn wait(_: &AtomicBool, control: &Control, _: &Taken) -> bool {
    match *control {}
}

pub(super) fn post(_: &Client, _: &Endpoint, _: &[u8], _: &Message, taken: &Taken) -> Answer {
    match *taken {}
}
