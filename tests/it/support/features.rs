//! What the binary under test was built with. `PLANT_STORE_BIN` may be a device build
//! (`scripts/build-static ARCH --small`: no `webhooks`, no `tls`) whatever features this
//! test crate has, so the binary itself is asked, once: `webhook add` of an https URL on
//! a database that is not there is refused before anything is opened, and how says what
//! the build has.

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

/// (webhooks, tls) of the binary under test.
fn built_with() -> (bool, bool) {
    static ASKED: OnceLock<(bool, bool)> = OnceLock::new();
    *ASKED.get_or_init(|| {
        let db = std::env::temp_dir().join("plant-store-features-probe/none/plants.db");
        let (code, _, err) = run_cli(&[
            "webhook",
            "add",
            "probe",
            "https://127.0.0.1:9/h",
            "--db",
            db.to_str().unwrap(),
        ]);
        assert_eq!(code, 2, "the probe of the binary's features: {err}");
        let webhooks = !err.contains("without the `webhooks` cargo feature");
        let tls = webhooks && !err.contains("need a build with the tls feature");
        (webhooks, tls)
    })
}

/// True, after saying so, when the binary under test was built without `feature`: the
/// test, or the part of it that needs the feature, is skipped.
pub fn without(feature: Feature) -> bool {
    let (webhooks, tls) = built_with();
    let has = match feature {
        Feature::Webhooks => webhooks,
        Feature::Tls => tls,
    };
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
        out.contains(", panic=abort)")
    })
}
