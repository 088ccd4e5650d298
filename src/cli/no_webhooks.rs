//! A build without the `webhooks` feature (the device build, `scripts/build-static ARCH
//! --small`): stands in for `webhook.rs`, with its names. The `webhook` commands are
//! refused with exit status 2, naming the feature (`config::webhook::available`, which
//! `options::parse` asks before anything is opened).

use crate::cli::failure::Failure;
use crate::config::webhook::available;
use crate::store::Location;

// The commands, which `options::parse` has refused before `cli::run` gets here.
pub fn add(_: &Location, _: &str, _: &str) -> Result<(), String> {
    available()
}
pub fn list(_: &Location) -> Result<(), String> {
    available()
}
pub fn remove(_: &Location, _: &str) -> Result<(), Failure> {
    available().map_err(Failure::Usage)
}
pub use remove as enable;
pub fn check_url(_: &str) -> Result<(), String> {
    available()
}
