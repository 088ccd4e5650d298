//! docs/testing.md's Python example (`tests/guide/suite.py`, the guide's block word for
//! word: `tests/guide` checks), run against the binary under test when python3 and
//! `requests` are here (`scripts/install-test-deps` installs them).

use crate::support::*;

const SUITE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/guide/suite.py");

#[test]
fn the_guide_s_python_suite_passes() {
    if sqlite_only("test control is SQLite's") {
        return;
    }
    let found = std::process::Command::new("python3")
        .args(["-c", "import requests"])
        .output();
    if !found.is_ok_and(|o| o.status.success()) {
        eprintln!("skipped: python3 with requests is not installed (scripts/install-test-deps)");
        return;
    }
    let out = std::process::Command::new("python3")
        .arg(SUITE)
        .args(program())
        .env_remove("PLANT_STORE_TOKEN")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains("ok: the guide's suite passed"), "{stdout}");
}
