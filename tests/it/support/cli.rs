//! The command line run to completion: `run_cli`, `exits` (a command that must exit),
//! and the `token` subcommands as a test uses them (`add_token`, `revoke_token_of`).

use super::server::plant_store;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Runs `plant-store ARGS` to completion: (exit code, stdout, stderr).
pub fn run_cli(args: &[&str]) -> (i32, String, String) {
    let out = plant_store()
        .args(args)
        .env_remove("PLANT_STORE_TOKEN")
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Runs `cmd`, which must exit within 20 s (else it is killed): (exit code, stderr).
#[track_caller]
pub fn exits(mut cmd: Command) -> (i32, String) {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "{cmd:?} still runs after 20 s: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `token add --create` (the database is made if it is not there yet) and the token it
/// printed on its last line.
pub fn add_token(db: &Path, principal: &str, read_only: bool) -> String {
    let mut args = vec![
        "token",
        "add",
        principal,
        "--create",
        "--db",
        db.to_str().unwrap(),
    ];
    if read_only {
        args.push("--read-only");
    }
    let (code, out, err) = run_cli(&args);
    assert_eq!(code, 0, "token add failed: {err}");
    out.lines().last().unwrap().to_owned()
}

/// `token revoke` of the one token of `principal`, found with `token list`.
pub fn revoke_token_of(db: &Path, principal: &str) {
    let db = db.to_str().unwrap();
    let (_, listing, _) = run_cli(&["token", "list", "--db", db]);
    let line = listing
        .lines()
        .find(|l| l.split_whitespace().nth(1) == Some(principal))
        .unwrap_or_else(|| panic!("no token of {principal} in\n{listing}"));
    let id = line.split_whitespace().next().unwrap();
    let (code, _, err) = run_cli(&["token", "revoke", id, "--db", db]);
    assert_eq!(code, 0, "token revoke failed: {err}");
}
