//! docs/testing.md's Python and Node examples (`tests/guide/suite.py` and
//! `suite.test.mjs`, the guide's blocks word for word: `tests/guide` checks), run against
//! the binary under test through the packages' source (`packages/python`'s pytest plugin,
//! `packages/npm/plant-store`'s module), when python3 with pytest and `requests`, and node,
//! are here (`scripts/install-test-deps` installs them).

use crate::support::*;
use std::path::Path;
use std::process::{Command, Stdio};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// Whether `program` runs `args` successfully; says what is skipped when it does not.
pub fn found(program: &str, args: &[&str], skipped: &str) -> bool {
    let ok = Command::new(program)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        eprintln!("skipped: {skipped} (scripts/install-test-deps installs it)");
    }
    ok
}

/// The binary under test as one executable path, which the packages take in
/// `PLANT_STORE_BIN`: under an emulator, a script in `dir` that runs it there.
pub fn binary_in(dir: &Path) -> String {
    let program = program();
    if program.len() == 1 {
        return program[0].clone();
    }
    let script = dir.join("plant-store");
    let line = format!("#!/bin/sh\nexec {} \"$@\"\n", program.join(" "));
    std::fs::write(&script, line).unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    script.to_str().unwrap().to_owned()
}

/// Runs `command` to its end; fails the test with its output unless it succeeded and
/// printed `expected`.
#[track_caller]
pub fn passes(command: &mut Command, expected: &str) {
    let out = command
        .env_remove("PLANT_STORE_TOKEN")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains(expected), "{stdout}\n{stderr}");
}

/// A Node project in `dir` whose `plant-store` is the source package, with these files
/// copied in (Node finds a package through `node_modules` beside the importing file).
pub fn node_project(dir: &Path, files: &[&str]) {
    let modules = dir.join("node_modules");
    std::fs::create_dir_all(&modules).unwrap();
    std::os::unix::fs::symlink(
        Path::new(ROOT).join("packages/npm/plant-store"),
        modules.join("plant-store"),
    )
    .unwrap();
    for file in files {
        let from = Path::new(ROOT).join(file);
        std::fs::copy(&from, dir.join(from.file_name().unwrap())).unwrap();
    }
}

#[test]
fn the_guide_s_python_suite_passes() {
    if no_test_control()
        || !found(
            "python3",
            &["-c", "import pytest, requests"],
            "python3 with pytest and requests is not installed",
        )
    {
        return;
    }
    let dir = TempDir::new();
    passes(
        Command::new("python3")
            .args([
                "-m",
                "pytest",
                "-p",
                "plant_store.plugin",
                "-p",
                "no:cacheprovider",
            ])
            .arg(Path::new(ROOT).join("tests/guide/suite.py"))
            .env("PYTHONPATH", Path::new(ROOT).join("packages/python"))
            .env("PLANT_STORE_BIN", binary_in(&dir.0))
            .current_dir(&dir.0),
        &format!("{} passed", tests_in(include_str!("../guide/suite.py"))),
    );
}

/// How many tests a pytest file holds: its `def test_` lines.
fn tests_in(suite: &str) -> usize {
    suite.lines().filter(|l| l.starts_with("def test_")).count()
}

#[test]
fn the_guide_s_node_suite_passes() {
    if no_test_control() || !found("node", &["--version"], "node is not installed") {
        return;
    }
    let dir = TempDir::new();
    node_project(
        &dir.0,
        &["tests/guide/suite.test.mjs", "tests/guide/seed.json"],
    );
    passes(
        Command::new("node")
            .args(["--test", "suite.test.mjs"])
            .env("PLANT_STORE_BIN", binary_in(&dir.0))
            .current_dir(&dir.0),
        "# pass 5",
    );
}
