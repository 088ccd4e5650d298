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
    // The server no longer sets it itself (docs/operating.md, "Memory").
    assert!(unit.contains("\nEnvironment=GLIBC_TUNABLES=glibc.malloc.tcache_count=0\n"));
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

/// The OpenWrt init script in `contrib/` (docs/device.md, "On OpenWrt"), run by `sh`
/// with procd's and UCI's functions standing in: it starts the server on the database
/// path and with the token and flags it is configured with, and asks procd to respawn it
/// and to wait before SIGKILL.
#[test]
fn the_openwrt_init_script_starts_the_server_as_configured() {
    if sqlite_only("the init script does not touch the store; it runs once, on SQLite") {
        return;
    }
    let dir = TempDir::new();
    let token_file = dir.0.join("token");
    std::fs::write(&token_file, TOKEN).unwrap();
    let db = dir.0.join("data/plants.db");
    let out = dir.0.join("procd");
    // UCI gives the values below (the defaults for the rest); procd's calls are written
    // to files, one NUL-terminated word each.
    let stubs = r#"
        config_load() { :; }
        config_get() {
            case $3 in
                addr) eval "$1=127.0.0.1:0" ;;
                db) eval "$1=\$TEST_DB" ;;
                token_file) eval "$1=\$TEST_TOKEN_FILE" ;;
                args) eval "$1='--log-level debug --workers 2'" ;;
                *) eval "$1=\$4" ;;
            esac
        }
        procd_open_instance() { :; }
        procd_close_instance() { :; }
        procd_set_param() { p=$1; shift; printf '%s\0' "$@" >"$TEST_OUT.$p"; }
        . "$TEST_SCRIPT"
        start_service
    "#;
    let run = Command::new("sh")
        .args(["-euc", stubs])
        .env(
            "TEST_SCRIPT",
            concat!(env!("CARGO_MANIFEST_DIR"), "/contrib/plant-store.init"),
        )
        .env("TEST_DB", &db)
        .env("TEST_TOKEN_FILE", &token_file)
        .env("TEST_OUT", &out)
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let param = |name: &str| -> Vec<String> {
        let words = std::fs::read(format!("{}.{name}", out.display())).unwrap();
        let words = String::from_utf8(words).unwrap();
        words.split_terminator('\0').map(str::to_owned).collect()
    };
    let command = param("command");
    assert_eq!(command[0], "/usr/bin/plant-store");
    assert_eq!(
        param("env"),
        [
            format!("PLANT_STORE_TOKEN={TOKEN}"),
            "GLIBC_TUNABLES=glibc.malloc.tcache_count=0".into()
        ]
    );
    assert_eq!(param("respawn"), ["3600", "5", "5"]);
    assert_eq!(param("term_timeout"), ["30"]);
    // The database's directory was made, private.
    let mode = std::fs::metadata(db.parent().unwrap())
        .unwrap()
        .permissions();
    assert_eq!(
        std::os::unix::fs::PermissionsExt::mode(&mode) & 0o777,
        0o700
    );

    let s = Launch::new(&db).command_line(command[1..].to_vec()).start();
    assert_eq!(s.post(r#"{"id":1,"name":"fig"}"#).status, 200);
    assert!(s.stop().success());
    assert!(db.exists(), "the database is at the configured path");
}
