//! `serve`'s test control options (docs/testing.md): the values of `--test-control`,
//! `--journal-size`, `--journal-bytes` and `--test-seed` (the option table marks all but
//! the first as working only with it), and the control token's conditions. Without the
//! `test-control` feature, `no_control.rs` stands in with these names and refuses them.

use crate::api::control::{MAX_JOURNAL_BYTES, MAX_JOURNAL_SIZE, MIN_CONTROL_TOKEN_BYTES};
use crate::config::serve::{ServeConfig, Words};
use crate::config::values::{number, switch, token68, usable};
use crate::store::Location;

/// The options of the option table this build refuses: none.
pub const REFUSED: &[&str] = &[];

/// `--test-control`: on or off.
pub fn on(v: &str, name: &str) -> Result<bool, String> {
    switch(v, name)
}

/// `--journal-size`: requests the journal keeps.
pub fn journal_size(v: &str, name: &str) -> Result<usize, String> {
    number(v, name, 0, MAX_JOURNAL_SIZE)
}

/// `--journal-bytes`: what the journal's entries may cost in all.
pub fn journal_bytes(v: &str, name: &str) -> Result<usize, String> {
    number(v, name, 0, MAX_JOURNAL_BYTES)
}

/// `--test-seed`: the seeded generators' seed.
pub fn test_seed(v: &str, name: &str) -> Result<u64, String> {
    v.parse().map_err(|_| {
        format!(
            "{name} must be a whole number from 0 to {}, not `{v}`",
            u64::MAX
        )
    })
}

/// Test control's conditions: the control token with `--test-control`, and SQLite.
pub fn check(config: &ServeConfig, words: &Words) -> Result<(), String> {
    let Words {
        token: token_name,
        control_token: control_name,
        test_control: control_on,
        ..
    } = words;
    if !config.test_control {
        return Ok(());
    }
    {
        match &config.control_token {
            None => {
                return Err(format!(
                    "{control_on} needs {control_name}, a token of at least {MIN_CONTROL_TOKEN_BYTES} bytes"
                ));
            }
            Some(t) if t.expose().len() < MIN_CONTROL_TOKEN_BYTES => {
                return Err(format!(
                    "{control_name} must be at least {MIN_CONTROL_TOKEN_BYTES} bytes long"
                ));
            }
            // A token no request could carry, or one that is also a principal's.
            Some(t) if usable(t.expose()).is_err() => {
                return Err(format!(
                    "{control_name} is not a usable bearer token ({} characters): {}",
                    t.expose().chars().count(),
                    token68()
                ));
            }
            Some(t) if config.token.as_ref() == Some(t) => {
                return Err(format!(
                    "{control_name} must differ from {token_name}: the control token is no principal's"
                ));
            }
            Some(_) => {}
        }
        if matches!(config.db, Location::Postgres(_)) {
            return Err(format!(
                "{control_on} needs SQLite (a file or :memory:), not PostgreSQL"
            ));
        }
    }
    Ok(())
}
