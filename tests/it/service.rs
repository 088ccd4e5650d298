//! The hardened systemd unit in `contrib/`: systemd itself checks it, and scores its
//! exposure low.

use crate::support::*;
use std::process::Command;

#[test]
fn the_service_unit_verifies_and_scores_low_exposure() {
    if sqlite_only("the service unit does not touch the store; it runs once, on SQLite") {
        return;
    }
    let dir = TempDir::new();
    let unit = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/contrib/plant-store.service"
    ))
    .unwrap();
    assert!(unit.contains("ExecStart=/usr/local/bin/plant-store serve"));
    // The env file it invites is read whole: no flag on the command line hides one of its
    // variables (a flag wins over a variable), and the database's default is a variable
    // that the file may override (EnvironmentFile= wins over Environment=).
    let exec = unit.lines().find(|l| l.starts_with("ExecStart=")).unwrap();
    assert!(!exec.contains("--"), "ExecStart passes a flag: {exec}");
    assert!(unit.contains("\nEnvironment=PLANT_STORE_DB=/var/lib/plant-store/plants.db\n"));
    assert!(unit.contains("\nStateDirectory=plant-store\n"));
    assert!(unit.contains("\nEnvironmentFile=-/etc/plant-store/env\n"));
    // `verify` checks that the program exists: point it at the binary under test.
    let path = dir.0.join("plant-store.service");
    std::fs::write(&path, unit.replace("/usr/local/bin/plant-store", &bin())).unwrap();
    let verify = Command::new("systemd-analyze")
        .args(["verify", path.to_str().unwrap()])
        .output()
        .expect("systemd-analyze (.ci/run installs it)");
    let said = String::from_utf8_lossy(&verify.stderr);
    assert!(verify.status.success() && said.trim().is_empty(), "{said}");
    let security = Command::new("systemd-analyze")
        .args(["security", "--offline=true", path.to_str().unwrap()])
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&security.stdout);
    let overall = out
        .lines()
        .find_map(|l| {
            l.split("Overall exposure level for plant-store.service: ")
                .nth(1)
        })
        .unwrap_or_else(|| panic!("no overall score:\n{out}"));
    let mut words = overall.split_whitespace();
    let score: f64 = words.next().unwrap().parse().unwrap();
    let label = words.next().unwrap();
    assert!(
        score <= 2.0 && ["SAFE", "OK"].contains(&label),
        "exposure {overall}\n{out}"
    );
}
