//! What a harness around the binary leans on: `plant-store healthcheck` (a container's
//! `HEALTHCHECK`) and `--exit-on-stdin-close` (a server ends with the process that holds
//! its standard input, however that process ends).

use crate::support::*;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::process::{Child, Stdio};
use std::time::Duration;

/// `plant-store healthcheck` with `PLANT_STORE_ADDR=addr` and these arguments: (exit
/// code, stderr).
fn healthcheck(addr: &str, args: &[&str]) -> (i32, String) {
    let out = plant_store()
        .arg("healthcheck")
        .args(args)
        .env("PLANT_STORE_ADDR", addr)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), "");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A listener that answers every connection with `answer` (after reading its head), or
/// with nothing at all when `answer` is `None` (accepted by the kernel, never read).
fn fake(answer: Option<&'static str>) -> (TcpListener, String) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    if let Some(answer) = answer {
        let l = listener.try_clone().unwrap();
        std::thread::spawn(move || {
            for mut conn in l.incoming().flatten() {
                let mut head = Vec::new();
                let mut buf = [0u8; 256];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    match conn.read(&mut buf) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
                let _ = conn.write_all(answer.as_bytes());
            }
        });
    }
    (listener, addr)
}

#[test]
fn healthcheck_is_0_for_a_server_that_answers() {
    let s = TestServer::memory();
    assert_eq!(healthcheck(&s.addr, &[]), (0, String::new()));
    // `--addr` wins over the variable.
    assert_eq!(healthcheck("127.0.0.1:1", &["--addr", &s.addr]).0, 0);
}

#[test]
fn healthcheck_asks_the_loopback_for_an_unspecified_address() {
    let s = TestServer::memory();
    let port = s.addr.rsplit(':').next().unwrap();
    assert_eq!(healthcheck(&format!("0.0.0.0:{port}"), &[]).0, 0);
}

#[test]
fn healthcheck_is_1_when_nothing_listens() {
    let addr = {
        let (listener, addr) = fake(None);
        drop(listener);
        addr
    };
    let (code, err) = healthcheck(&addr, &[]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.starts_with(&format!("plant-store: unhealthy: {addr}: cannot connect: ")),
        "{err}"
    );
}

#[test]
fn healthcheck_is_1_for_an_answer_other_than_200() {
    let (_l, addr) = fake(Some(
        "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
    ));
    let (code, err) = healthcheck(&addr, &[]);
    assert_eq!(code, 1, "{err}");
    assert_eq!(
        err,
        format!(
            "plant-store: unhealthy: {addr}: GET /healthz answered `HTTP/1.1 503 Service Unavailable`\n"
        )
    );
    let (_l, addr) = fake(Some("SSH-2.0-OpenSSH\r\n\r\n"));
    assert_eq!(
        healthcheck(&addr, &[]),
        (
            1,
            format!("plant-store: unhealthy: {addr}: the answer is no HTTP answer\n")
        )
    );
}

#[test]
fn healthcheck_gives_up_on_a_server_that_never_answers() {
    // Connected (the kernel's backlog takes it), never answered: the deadline ends it.
    let (_l, addr) = fake(None);
    let (code, err) = healthcheck(&addr, &[]);
    assert_eq!(code, 1, "{err}");
    assert_eq!(
        err,
        format!("plant-store: unhealthy: {addr}: no answer within 2 s\n")
    );
}

#[test]
fn a_bad_healthcheck_is_unhealthy_not_a_usage_error() {
    // A HEALTHCHECK reserves 2.
    let (code, err) = healthcheck("not-an-address", &[]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("PLANT_STORE_ADDR must be an IP address"),
        "{err}"
    );
    let (code, err) = healthcheck("127.0.0.1:8080", &["--workers", "2"]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("healthcheck takes no option --workers"),
        "{err}"
    );
}

/// `plant-store serve` on a free port and `:memory:`, logging at `level`.
fn serve(level: &str) -> std::process::Command {
    let mut cmd = plant_store();
    cmd.args(["serve", "--addr", "127.0.0.1:0", "--db", ":memory:"])
        .args(["--log-level", level]);
    cmd
}

/// A server with `args`, its standard input a pipe held by the test; the address it
/// listens on, and its stderr gathered by a thread.
fn piped_server(
    args: &[&str],
    env: &[(&str, &str)],
) -> (Child, String, std::sync::mpsc::Receiver<String>) {
    let mut child = serve("info")
        .args(args)
        .envs(env.iter().copied())
        .env_remove("PLANT_STORE_TOKEN")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addr = line
        .trim()
        .strip_prefix("listening on http://")
        .unwrap_or_else(|| panic!("{line:?}"));
    let mut err = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut log = String::new();
        let _ = err.read_to_string(&mut log);
        let _ = tx.send(log);
    });
    (child, addr.to_owned(), rx)
}

#[test]
fn the_server_stops_gracefully_once_its_stdin_is_closed() {
    for (args, env) in [
        (&["--exit-on-stdin-close"][..], &[][..]),
        (&[][..], &[("PLANT_STORE_EXIT_ON_STDIN_CLOSE", "1")][..]),
    ] {
        let (mut child, addr, log) = piped_server(args, env);
        let mut stdin = child.stdin.take().unwrap();
        // What comes on standard input is read and dropped; only its end counts.
        stdin.write_all(b"anything\n").unwrap();
        assert_eq!(healthcheck(&addr, &[]).0, 0);
        drop(stdin);
        let status = exit_of(&mut child);
        let log = log.recv_timeout(Duration::from_secs(10)).unwrap();
        assert!(status.success(), "{status}\n{log}");
        let stopping = log
            .find("standard input closed (--exit-on-stdin-close): stopping")
            .unwrap_or_else(|| panic!("{log}"));
        // The same graceful stop as SIGTERM's: drained, closed, stopped.
        assert!(
            log[stopping..].contains("database checkpointed and closed"),
            "{log}"
        );
        assert!(log.trim_end().ends_with("[INFO] stopped"), "{log}");
    }
}

#[test]
fn a_server_ends_with_the_killed_process_that_held_its_stdin() {
    use std::os::fd::{FromRawFd, OwnedFd};
    let mut fds = [0; 2];
    // SAFETY: pipe2(2) fills the two descriptors, which are then owned here once each;
    // close-on-exec, so that no other test's child inherits the write end.
    assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
    let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    let mut server = serve("warn");
    server
        .arg("--exit-on-stdin-close")
        .env_remove("PLANT_STORE_TOKEN")
        .stdin(Stdio::from(read))
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let mut server_child = server.spawn().unwrap();
    drop(server);
    // The write end's one holder: a process that is then SIGKILLed, as a test session may be.
    let mut holder = std::process::Command::new("sleep");
    holder.arg("600").stdout(Stdio::from(write));
    let mut holder_child = holder.spawn().unwrap();
    drop(holder);
    let mut line = String::new();
    BufReader::new(server_child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert!(line.starts_with("listening on "), "{line:?}");
    holder_child.kill().unwrap();
    holder_child.wait().unwrap();
    assert!(exit_of(&mut server_child).success());
}

/// The child's exit status once it has ended by itself, within 5 s (else it is killed,
/// and the test fails).
#[track_caller]
fn exit_of(child: &mut Child) -> std::process::ExitStatus {
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the server still ran 5 s after its standard input closed");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}
