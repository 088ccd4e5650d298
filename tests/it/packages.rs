//! The packages' own tests (`packages/python/tests`, `packages/npm/plant-store/test`), run
//! from the source tree against the binary under test, as `.ci/packages` runs them from
//! the wheel and the npm tarballs: servers that start, stop and never outlive their test
//! run (SIGKILL included), and every control method.

use crate::control_guide::{binary_in, found, node_project, passes};
use crate::support::*;
use std::path::Path;
use std::process::Command;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

#[test]
fn the_python_package_s_tests_pass() {
    if no_test_control()
        || native_only("the package's tests start many servers and test runs")
        || !found(
            "python3",
            &["-c", "import pytest"],
            "python3 with pytest is not installed",
        )
    {
        return;
    }
    let dir = TempDir::new();
    passes(
        Command::new("python3")
            .args(["-m", "pytest", "-q"])
            .arg(Path::new(ROOT).join("packages/python/tests"))
            .env("PYTHONPATH", Path::new(ROOT).join("packages/python"))
            // The test runs the tests start get the plugin as this one does.
            .env(
                "PYTEST_ADDOPTS",
                "-p plant_store.plugin -p no:cacheprovider",
            )
            .env("PLANT_STORE_BIN", binary_in(&dir.0))
            .current_dir(&dir.0),
        " passed",
    );
}

#[test]
fn the_npm_package_s_tests_pass() {
    if no_test_control()
        || native_only("the package's tests start many servers and processes")
        || !found("node", &["--version"], "node is not installed")
    {
        return;
    }
    let dir = TempDir::new();
    node_project(&dir.0, &["packages/npm/plant-store/test/package.test.mjs"]);
    passes(
        Command::new("node")
            .args(["--test", "package.test.mjs"])
            .env("PLANT_STORE_BIN", binary_in(&dir.0))
            .current_dir(&dir.0),
        "# fail 0",
    );
}
