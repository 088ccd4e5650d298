//! What the binary under test was built with. `PLANT_STORE_BIN` may be a device build
//! (`scripts/build-static ARCH --small`: no `webhooks`, no `tls`) whatever features this
//! test crate has, so the binary itself is asked, once: `--version` names the features
//! built in (`plant-store 1.0.0 (schema 7; features: webhooks, tls)`).

use super::server::run_cli;
use std::sync::OnceLock;

/// The cargo features the suite asks about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Feature {
    /// Webhook deliveries, the `webhook` commands and `--webhook-*` options.
    Webhooks,
    /// https webhook endpoints (implies `Webhooks`).
    Tls,
}

impl Feature {
    /// The cargo feature's name, as `--version` says it.
    pub fn name(self) -> &'static str {
        match self {
            Feature::Webhooks => "webhooks",
            Feature::Tls => "tls",
        }
    }
}

/// The features that `--version` of the binary under test names.
pub fn built_in() -> &'static [String] {
    static ASKED: OnceLock<Vec<String>> = OnceLock::new();
    ASKED.get_or_init(|| {
        let (code, out, err) = run_cli(&["--version"]);
        assert_eq!(code, 0, "--version: {err}");
        let list = out
            .trim_end()
            .strip_suffix(')')
            .and_then(|o| o.split_once("; features: "))
            .unwrap_or_else(|| panic!("--version names no features: {out}"))
            .1;
        match list {
            "none" => Vec::new(),
            list => list.split(", ").map(str::to_owned).collect(),
        }
    })
}

/// True, after saying so, when the binary under test was built without `feature`: the
/// test, or the part of it that needs the feature, is skipped.
pub fn without(feature: Feature) -> bool {
    let has = built_in().iter().any(|f| f == feature.name());
    if !has {
        eprintln!("not in this build: the binary under test has no {feature:?} feature");
    }
    !has
}

/// Whether the binary under test has the command that `args` run (a filter for a table
/// of commands): the `webhook` commands only with the `webhooks` feature.
pub fn has_command(args: &&[&str]) -> bool {
    args.first() != Some(&"webhook") || !without(Feature::Webhooks)
}
