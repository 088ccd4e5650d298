//! What README.md promises a newcomer, checked: its session works when pasted, as on a
//! machine that has never built the project, and the Rust version it names builds what
//! `Cargo.lock` holds.

use crate::support::*;
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const README: &str = include_str!("../../README.md");
const MANIFEST: &str = include_str!("../../Cargo.toml");

/// How long the stand-in for `cargo` takes to "build" before it starts the binary: the
/// session must wait for the server, not assume it is there.
const BUILD: &str = "2";
/// Where the stand-in sends the server's standard output, in the session's directory.
const SERVER_OUT: &str = "server.out";
/// The session's port, which the test moves to one of its own.
const README_PORT: &str = ":8080";

/// The README's session, as a user pastes it, in a temporary directory (so with no
/// database yet), with `cargo` on `PATH` standing in for a build: it "builds" for a while
/// and then runs the binary under test. Every answer the README shows is what the
/// session prints, in order, each on its own line; the server says where it listens and
/// exits 0 on the session's `kill %1`.
#[test]
fn the_readme_session_works_as_pasted() {
    if sqlite_only("the session keeps its plants in ./plants.db") {
        return;
    }
    let block = session();
    assert!(
        block.contains(&format!("localhost{README_PORT}")),
        "{block}"
    );
    // What the README shows: each line that is only a comment is an answer, in order;
    // the server's own line is named after `prints:`.
    let answers: Vec<&str> = block
        .lines()
        .filter_map(|l| l.trim_start().strip_prefix("# "))
        .collect();
    assert!(answers.len() >= 5, "{answers:?}");
    let listening = block
        .split_once("prints: ")
        .and_then(|(_, rest)| rest.lines().next())
        .expect("the session says what the server prints");
    // A port no other test's server takes (they listen on port 0, which the kernel picks
    // from its ephemeral range), and free now; a server that still lost it is retried.
    for _ in 0..3 {
        let port = unused_port();
        let run = paste(&block.replace(README_PORT, &format!(":{port}")), port);
        if run.stderr.contains("cannot listen on") {
            continue;
        }
        let ours = listening.replace(README_PORT, &format!(":{port}"));
        assert_eq!(run.server, format!("{ours}\n"), "{run}");
        let mut lines: Vec<&str> = run.stdout.lines().collect();
        assert_eq!(lines.pop(), Some("the server exited 0"), "{run}");
        assert_eq!(lines, answers, "{run}");
        return;
    }
    panic!("no free port for the session in three tries");
}

/// The outcome of a pasted session: its standard output and error, and the server's
/// standard output.
struct Run {
    stdout: String,
    stderr: String,
    server: String,
}

impl std::fmt::Display for Run {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "stdout:\n{}\nstderr:\n{}\nthe server's stdout:\n{}",
            self.stdout, self.stderr, self.server
        )
    }
}

/// README's session block, between its markers and without its fence.
fn session() -> String {
    let start = "<!-- session: a test runs this block as written (tests/it/readme.rs) -->\n";
    README
        .split_once(start)
        .and_then(|(_, rest)| rest.split_once("<!-- /session -->"))
        .and_then(|(block, _)| block.strip_prefix("```sh\n"))
        .and_then(|block| block.strip_suffix("```\n"))
        .expect("README.md has the session between its markers, in a ```sh fence")
        .to_owned()
}

/// Runs `script` in bash as a user's shell would, in a fresh directory, with `cargo`
/// standing in for a build of the binary under test, which listens on `port`. Then
/// waits for the background server (the last job started) and prints how it ended. The
/// server's standard output goes to a file of its own: its `listening on` line comes
/// when it comes, and could otherwise fall between an answer and its newline.
fn paste(script: &str, port: u16) -> Run {
    let dir = TempDir::new();
    let bin = dir.0.join("bin");
    std::fs::create_dir(&bin).unwrap();
    let quoted: Vec<String> = program()
        .iter()
        .map(|p| format!("'{}'", p.replace('\'', r"'\''")))
        .collect();
    let cargo = format!(
        "#!/bin/sh\n\
         # Stands in for `cargo run --release [-- ARGS]`: builds a while, then runs the binary.\n\
         [ \"$1 $2\" = 'run --release' ] || {{ echo \"stand-in cargo: not $*\" >&2; exit 64; }}\n\
         shift 2\n\
         [ \"$1\" = -- ] && shift\n\
         sleep {BUILD}\n\
         exec {} \"$@\" >'{SERVER_OUT}'\n",
        quoted.join(" ")
    );
    let stand_in = bin.join("cargo");
    std::fs::write(&stand_in, cargo).unwrap();
    std::fs::set_permissions(
        &stand_in,
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());
    let mut child = Command::new("bash")
        .arg("-c")
        .arg(format!("{script}wait $!\necho \"the server exited $?\"\n"))
        .current_dir(&dir.0)
        .env_clear()
        .env("PATH", path)
        // No ~/.curlrc of the machine's.
        .env("CURL_HOME", &dir.0)
        .env("PLANT_STORE_ADDR", format!("127.0.0.1:{port}"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .expect("bash runs the session");
    let collect = |mut from: Box<dyn Read + Send>| {
        let text = Arc::new(Mutex::new(String::new()));
        let to = text.clone();
        let reader = std::thread::spawn(move || {
            let mut buf = [0; 4096];
            while let Ok(n @ 1..) = from.read(&mut buf) {
                to.lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        });
        (text, reader)
    };
    let (stdout, out_reader) = collect(Box::new(child.stdout.take().unwrap()));
    let (stderr, err_reader) = collect(Box::new(child.stderr.take().unwrap()));
    let run = || Run {
        stdout: stdout.lock().unwrap().clone(),
        stderr: stderr.lock().unwrap().clone(),
        server: std::fs::read_to_string(dir.0.join(SERVER_OUT)).unwrap_or_default(),
    };
    // Until the shell and the server (which holds the same pipes) are done; a server
    // that could not listen leaves the session waiting, and is given up on.
    let deadline = Instant::now() + Duration::from_secs(120);
    while !(out_reader.is_finished() && err_reader.is_finished()) {
        let lost_port = stderr.lock().unwrap().contains("cannot listen on");
        if lost_port || Instant::now() > deadline {
            // SAFETY: kill(2) on the session's own process group.
            unsafe { libc::kill(-(child.id() as i32), libc::SIGKILL) };
            let _ = child.wait();
            assert!(lost_port, "the session did not end in 120 s:\n{}", run());
            return run();
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait().unwrap();
    run()
}

/// A port that is free now and outside the kernel's ephemeral range, where port 0 never
/// lands, so no other test's server takes it.
fn unused_port() -> u16 {
    let range = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .unwrap_or_else(|_| "32768 60999".into());
    let low: u16 = range.split_whitespace().next().unwrap().parse().unwrap();
    let span = low.saturating_sub(10_000).max(1) as u32;
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
    let mut pick = std::process::id() ^ now.unwrap().subsec_nanos();
    loop {
        pick = pick.wrapping_mul(1_103_515_245).wrapping_add(12_345);
        let port = 10_000 + (pick % span) as u16;
        if port != 8080 && std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
}

/// `rust-version` in Cargo.toml is at least what every package in `Cargo.lock` needs
/// (`cargo metadata --locked`), README names the same version, and clippy refuses any
/// use of the standard library newer than it (`incompatible_msrv`, denied in Cargo.toml
/// and allowed nowhere).
#[test]
fn the_stated_rust_version_builds_what_cargo_lock_holds() {
    let stated = MANIFEST
        .lines()
        .find_map(|l| l.strip_prefix("rust-version = \""))
        .and_then(|v| v.strip_suffix('"'))
        .expect("Cargo.toml states a rust-version");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .args(["metadata", "--locked", "--offline", "--format-version", "1"])
        .arg("--manifest-path")
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml"))
        .output()
        .expect("cargo runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let metadata: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let packages = metadata["packages"].as_array().unwrap();
    let needs: Vec<(&str, &str, &str)> = packages
        .iter()
        .filter(|p| p["name"] != env!("CARGO_PKG_NAME"))
        .filter_map(|p| {
            let needs = p["rust_version"].as_str()?;
            Some((p["name"].as_str()?, p["version"].as_str()?, needs))
        })
        .collect();
    assert!(needs.len() > 10, "{needs:?}");
    let newer: Vec<_> = needs
        .iter()
        .filter(|(_, _, needs)| version(needs) > version(stated))
        .collect();
    assert!(
        newer.is_empty(),
        "Cargo.toml's rust-version is {stated}, but Cargo.lock holds packages that need more: {newer:?}"
    );
    assert!(
        README.contains(&format!("Rust {stated} or newer")),
        "README.md must name Rust {stated}, Cargo.toml's rust-version"
    );
    assert!(
        MANIFEST.contains("[lints.clippy]\nincompatible_msrv = \"deny\"\n"),
        "Cargo.toml denies clippy's incompatible_msrv"
    );
    for dir in ["src", "tests", "benches", "examples"] {
        for file in files(&std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(dir)) {
            let text = std::fs::read_to_string(&file).unwrap_or_default();
            assert!(
                !text.contains(&format!("{}::incompatible_msrv", "clippy")),
                "{} names incompatible_msrv",
                file.display()
            );
        }
    }
}

/// "1.89" and "1.89.0" as numbers to compare.
fn version(v: &str) -> [u32; 3] {
    let mut parts = v.split('.').map(|p| p.parse().unwrap());
    [0; 3].map(|_| parts.next().unwrap_or(0))
}

/// Every file under `dir`.
fn files(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .flatten()
        .flat_map(|e| {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                files(&e.path())
            } else {
                vec![e.path()]
            }
        })
        .collect()
}
