//! A server's settings: the option table (`table.rs`: every option of every command,
//! declared once), the parsers of their values (`values.rs`), `ServeConfig` and its
//! defaults (`serve.rs`), and the checks that take them together. Both the command line
//! (`cli::options`: flags and `PLANT_STORE_*` variables) and the library's builder
//! (`server::Builder`: its methods) set options through here, so an option is named,
//! checked and defaulted once; each says in `Words` how it names a setting in an error.

mod serve;
mod settings;
mod table;
pub(crate) mod values;
/// What `serve` has of webhooks: its `--webhook-*` options and the deliveries' start;
/// without the `webhooks` feature, a stand-in of the same names that refuses them.
#[cfg(feature = "webhooks")]
pub mod webhook;
#[cfg(not(feature = "webhooks"))]
#[path = "no_webhooks.rs"]
pub mod webhook;

use crate::store::Location;
pub use serve::ServeConfig;
#[cfg(test)]
pub(crate) use serve::{DEFAULT_DB, DEFAULT_QUEUE_TIMEOUT};
pub(crate) use settings::Settings;
pub(crate) use table::{Cmd, OPTIONS, Opt};

/// How the settings that errors name together are called where they were given: the
/// command line says its flags and variables, the builder its methods.
pub struct Words {
    /// The bearer token of principal `default`.
    pub token: &'static str,
    /// Test control's token.
    pub control_token: &'static str,
    pub test_control: &'static str,
    pub seed: &'static str,
    pub rate_limit: &'static str,
    /// What accepts a file test control has written.
    pub allow_test_file: &'static str,
}

impl Opt {
    /// A value of this option as it may be shown (the library's `Builder` in `Debug`):
    /// as given, but for the options of `OPTIONS` that can hold a secret, which show it
    /// without: `--db` (a PostgreSQL URL's password).
    pub(crate) fn shown(&self, value: &str) -> String {
        match self.flag {
            "--db" => Location::show(value),
            _ => value.to_owned(),
        }
    }
}

/// The settings of `cmd` from its options' values: `given(opt)` is the option's value and
/// what it was read from (named in its errors), or `None` for its default. Options are
/// set in the table's order, so the first error is the same whatever order they came in.
pub fn settings(
    cmd: Cmd,
    given: impl Fn(&'static Opt) -> Option<(String, &'static str)>,
) -> Result<Settings, String> {
    let mut settings = Settings {
        serve: ServeConfig::default(),
        rate_burst: None,
        read_only: false,
        expires_at: None,
        force: false,
        create: false,
        test_control_only: None,
    };
    for opt in OPTIONS.iter().filter(|o| o.commands.contains(&cmd)) {
        if let Some((value, name)) = given(opt) {
            (opt.set)(&mut settings, &value, name)?;
        }
    }
    Ok(settings)
}

impl Settings {
    /// `serve`'s settings, once its options and its tokens are set: what only their
    /// combination decides (the burst of the rate limit, the tokens, test control's
    /// conditions), errors named in `words`.
    pub fn serve(self, words: &Words) -> Result<ServeConfig, String> {
        let mut config = self.serve;
        match (&mut config.rate_limit, self.rate_burst) {
            (Some(limit), Some((burst, _))) => limit.burst = burst,
            (None, Some((_, name))) => {
                return Err(format!("{name} needs {}", words.rate_limit));
            }
            _ => {}
        }
        if let Some(token) = &config.token {
            // A token no request could carry; the message never shows it.
            usable(token.expose()).map_err(|_| {
                format!(
                    "{} is not a usable bearer token ({} characters): {}",
                    words.token,
                    token.expose().chars().count(),
                    token68()
                )
            })?;
        }
        test_control(&config, words)?;
        config.named = crate::store::terms::Named {
            allow_test_file: words.allow_test_file,
            control_token: words.control_token,
        };
        if let (Some(name), false) = (self.test_control_only, config.test_control) {
            return Err(format!("{name} needs {}", words.test_control));
        }
        Ok(config)
    }
}

/// What a token must be for a request to carry it (`Authorization: Bearer` and RFC 6750's
/// token68), said in errors that never show the token.
fn token68() -> String {
    format!(
        "it must be 1 to {} letters, digits and -._~+/, then optional = padding, as RFC 6750's token68",
        crate::api::auth::MAX_AUTHORIZATION_BYTES - "Bearer ".len()
    )
}

/// Whether a request could carry `token` as its bearer token.
fn usable(token: &str) -> Result<(), ()> {
    crate::api::auth::bearer_token(Some(&format!("Bearer {token}")))
        .map(|_| ())
        .map_err(|_| ())
}

/// Test control's and the seed's conditions: the control token with `--test-control`,
/// and SQLite.
fn test_control(config: &ServeConfig, words: &Words) -> Result<(), String> {
    use crate::api::control::MIN_CONTROL_TOKEN_BYTES;
    let Words {
        token: token_name,
        control_token: control_name,
        test_control: control_on,
        ..
    } = words;
    let postgres = matches!(config.db, Location::Postgres(_));
    if config.test_control {
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
        if postgres {
            return Err(format!(
                "{control_on} needs SQLite (a file or :memory:), not PostgreSQL"
            ));
        }
    }
    if config.seed.is_some() && postgres {
        return Err(format!(
            "{} needs SQLite (a file or :memory:), not PostgreSQL",
            words.seed
        ));
    }
    Ok(())
}
