//! A build without a feature (the device build has neither `webhooks` nor
//! `test-control`): what it refuses, naming the feature, and what `--help` leaves out.

use super::*;

/// A build without the `webhooks` feature refuses the `webhook` commands and the
/// `--webhook-*` options of `serve`, flag or variable, naming the feature; `--webhook-hold`
/// (the retention's) is taken.
#[cfg(not(feature = "webhooks"))]
#[test]
fn without_webhooks_their_commands_and_options_are_refused() {
    let none = |_: &str| None;
    let feature = "(it was built without the `webhooks` cargo feature)";
    for a in [
        "webhook list",
        "webhook add ann http://127.0.0.1:9/h --create",
        "webhook remove wh_0",
        "webhook enable wh_0",
    ] {
        let e = parse(&args(a), none).unwrap_err();
        assert_eq!(
            e,
            format!("the webhook command: this build has no webhooks {feature}"),
            "{a}"
        );
    }
    for a in [
        "--webhook-threads 2",
        "--webhook-timeout 5s",
        "--webhook-schedule 5s",
        "--webhook-ca ca.pem",
    ] {
        let e = parse(&args(a), none).unwrap_err();
        let flag = a.split(' ').next().unwrap();
        assert_eq!(e, format!("{flag}: this build has no webhooks {feature}"));
    }
    let env = |k: &str| (k == "PLANT_STORE_WEBHOOK_THREADS").then(|| "2".to_owned());
    let e = parse(&[], env).unwrap_err();
    assert!(
        e.starts_with("PLANT_STORE_WEBHOOK_THREADS: this build"),
        "{e}"
    );
    let Ok(Command::Serve(c)) = parse(&args("--webhook-hold 1d"), none) else {
        panic!("--webhook-hold is refused")
    };
    assert_eq!(c.webhook_hold, std::time::Duration::from_secs(86_400));
    // `--help` lists what is refused nowhere, and the refused are those it leaves out.
    let refused = crate::config::webhook::REFUSED;
    for opt in OPTIONS.iter().filter(|o| o.commands.contains(&Cmd::Serve)) {
        let mut settings = config::settings(Cmd::Serve, |_| None).unwrap();
        let set = (opt.set)(&mut settings, "1", opt.flag);
        let no = set.is_err_and(|e| e.contains("this build has no webhooks"));
        assert_eq!(no, refused.contains(&opt.flag), "{}", opt.flag);
    }
    let help = help::help(&[]).unwrap();
    assert!(help.contains("--webhook-hold"), "{help}");
    assert!(!help.contains("plant-store webhook"), "{help}");
    for flag in refused {
        assert!(!help.contains(flag), "{help}");
    }
    for a in ["webhook --help", "webhook add -h", "webhook"] {
        let e = parse(&args(a), none).unwrap_err();
        assert_eq!(
            e,
            format!("the webhook command: this build has no webhooks {feature}"),
            "{a}"
        );
    }
}

/// A build without the `test-control` feature refuses `--test-control`, `--journal-size`,
/// `--journal-bytes` and `--test-seed`, flag or variable, naming the feature; `--seed`
/// and `--allow-test-file` (not test control's) are taken, and a control token in the
/// environment alone changes nothing, as without `--test-control`. `--help` lists none of
/// what is refused, nor the control token's variable.
#[cfg(not(feature = "test-control"))]
#[test]
fn without_test_control_its_options_are_refused() {
    let none = |_: &str| None;
    let feature =
        "this build has no test control (it was built without the `test-control` cargo feature)";
    for (a, var, value) in [
        ("--test-control", "PLANT_STORE_TEST_CONTROL", "1"),
        ("--journal-size 5", "PLANT_STORE_JOURNAL_SIZE", "5"),
        ("--journal-bytes 5", "PLANT_STORE_JOURNAL_BYTES", "5"),
        ("--test-seed 7", "PLANT_STORE_TEST_SEED", "7"),
    ] {
        let e = parse(&args(a), none).unwrap_err();
        let flag = a.split(' ').next().unwrap();
        assert_eq!(e, format!("{flag}: {feature}"));
        let e = parse(&[], |k| (k == var).then(|| value.to_owned())).unwrap_err();
        assert_eq!(e, format!("{var}: {feature}"));
    }
    let env = |k: &str| (k == CONTROL_TOKEN_VAR).then(|| "c".repeat(16));
    let Ok(Command::Serve(c)) = parse(&[], env) else {
        panic!("a control token alone is refused")
    };
    assert!(!c.test_control);
    let file = concat!(env!("CARGO_MANIFEST_DIR"), "/plants.sql");
    let given = format!("--seed {file} --allow-test-file");
    let Ok(Command::Serve(c)) = parse(&args(&given), none) else {
        panic!("{given} is refused")
    };
    assert!(c.seed.is_some() && c.allow_test_file);
    // `--help` lists what is refused nowhere, and the refused are those it leaves out.
    let refused = crate::config::control::REFUSED;
    for opt in OPTIONS.iter().filter(|o| o.commands.contains(&Cmd::Serve)) {
        let mut settings = config::settings(Cmd::Serve, |_| None).unwrap();
        let set = (opt.set)(&mut settings, "1", opt.flag);
        let no = set.is_err_and(|e| e.contains("this build has no test control"));
        assert_eq!(no, refused.contains(&opt.flag), "{}", opt.flag);
    }
    for help in [help::help(&[]).unwrap(), help::help(&["serve"]).unwrap()] {
        assert!(help.contains("  --seed FILE ") && help.contains("  --allow-test-file "));
        for name in refused.iter().chain(&[CONTROL_TOKEN_VAR]) {
            assert!(!help.contains(&format!("  {name} ")), "{name}: {help}");
        }
    }
}
