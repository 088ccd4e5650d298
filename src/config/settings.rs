//! What the options of a command set, before the command line or the builder makes a
//! `Command` or a server of it (`config::settings` fills it from the option table).

use crate::config::serve::ServeConfig;

/// Every value an option sets, before it is made into a `Command`.
pub(crate) struct Settings {
    pub(crate) serve: ServeConfig,
    /// `--rate-burst`, and what it was read from.
    pub(crate) rate_burst: Option<(u32, &'static str)>,
    pub(crate) read_only: bool,
    /// Seconds since the Unix epoch.
    pub(crate) expires_at: Option<i64>,
    pub(crate) force: bool,
    pub(crate) create: bool,
    /// The first option read that works only with `--test-control`, by the name it was
    /// read from; refused without it (`Settings::test_control_only`).
    pub(crate) test_control_only: Option<&'static str>,
}

impl Settings {
    /// Marks an option, by the name it was read from, as one that needs `--test-control`:
    /// the parse refuses it without test control, as `<name> needs --test-control`.
    pub(crate) fn test_control_only(&mut self, name: &'static str) {
        self.test_control_only.get_or_insert(name);
    }

    pub(crate) fn expiry(&mut self, at: i64) -> Result<(), String> {
        if self.expires_at.replace(at).is_some() {
            return Err("give --expires-in or --expires-at, not both".into());
        }
        Ok(())
    }
}
