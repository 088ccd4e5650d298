//! What the binary under test was built with. `PLANT_STORE_BIN` may be a device build
//! (`scripts/build-static ARCH --small`: no `webhooks`, no `tls`, no `test-control`)
//! whatever features this test crate has, so the binary itself is asked, once:
//! `--version` names the features built in (`plant-store 1.0.0 (schema 7; features:
//! webhooks, tls, test-control)`).

use super::cli::run_cli;
use std::sync::OnceLock;

/// The cargo features the suite asks about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Feature {
    /// Webhook deliveries, the `webhook` commands and `--webhook-*` options.
    Webhooks,
    /// https webhook endpoints (implies `Webhooks`).
    Tls,
    /// Test control: `--test-control`, `/_control/`, `--test-seed`, the journal.
    TestControl,
}

impl Feature {
    /// The cargo feature's name, as `--version` says it.
    pub fn name(self) -> &'static str {
        match self {
            Feature::Webhooks => "webhooks",
            Feature::Tls => "tls",
            Feature::TestControl => "test-control",
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
        // A device build ends the list with how it panics (`panics_abort`).
        let list = list.strip_suffix("; panic=abort").unwrap_or(list);
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

/// Whether the binary under test ends the process on a panic (a build with
/// `panic = "abort"`, as the device build is: its `--version` says so), so that a test of
/// a panic caught and answered 500 does not hold for it (and the other way round).
pub fn panics_abort() -> bool {
    static ASKED: OnceLock<bool> = OnceLock::new();
    *ASKED.get_or_init(|| {
        let (code, out, err) = run_cli(&["--version"]);
        assert_eq!(code, 0, "plant-store --version: {err}");
        out.trim_end().ends_with("; panic=abort)")
    })
}
