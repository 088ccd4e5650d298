//! A build without the `test-control` feature (the device build, `scripts/build-static ARCH
//! --small`): stands in for `control.rs`, with its names. `--test-control`,
//! `--journal-size`, `--journal-bytes` and `--test-seed` (flag or variable, or the
//! builder's methods) are refused with exit status 2, naming the feature, and no server
//! has test control; `--seed` and `--allow-test-file` stay (they are not test control's).

use crate::config::serve::{ServeConfig, Words};

/// The options of the option table this build refuses (their values below): `--help`
/// lists none of them, nor test control's token variable.
pub const REFUSED: &[&str] = &[
    "--test-control",
    "--journal-size",
    "--journal-bytes",
    "--test-seed",
];

/// Each of test control's options is refused.
fn refused<T>(name: &str) -> Result<T, String> {
    Err(format!(
        "{name}: this build has no test control (it was built without the `test-control` cargo feature)"
    ))
}

pub fn on(_: &str, name: &str) -> Result<bool, String> {
    refused(name)
}
pub fn journal_size(_: &str, name: &str) -> Result<usize, String> {
    refused(name)
}
pub use journal_size as journal_bytes;
pub fn test_seed(_: &str, name: &str) -> Result<u64, String> {
    refused(name)
}

/// Nothing to check: no server has test control.
pub fn check(_: &ServeConfig, _: &Words) -> Result<(), String> {
    Ok(())
}
