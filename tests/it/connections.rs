//! The connection loop under slow, hostile and numerous clients: slow bodies and slow
//! readers hold no worker, bad framing closes the connection, the cap answers 503, running
//! out of descriptors ends nothing, and the process starts cleanly beside others.

use crate::support::*;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

#[test]
fn slow_bodies_hold_no_worker_and_get_408_at_the_deadline() {
    let s = Launch::memory().arg("--workers 1 --body-timeout 2").start();
    let started = Instant::now();
    let senders: Vec<_> = (0..20)
        .map(|i| {
            let mut c = s.connect();
            // Large and small declared bodies, and chunked ones: one deadline for each.
            let framing = [
                "Content-Length: 60000\r\n\r\n{\"id\":",
                "Content-Length: 100\r\n\r\n{\"id\":",
                "Transfer-Encoding: chunked\r\n\r\n400\r\n{\"id\":",
            ][i % 3];
            let head = format!(
                "POST /plants HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer {TOKEN}\r\n\
                 Content-Type: application/json\r\n{framing}"
            );
            c.write_all(head.as_bytes()).unwrap();
            thread::spawn(move || {
                // A byte every 200 ms for a second, then nothing: the body never completes.
                for _ in 0..5 {
                    thread::sleep(Duration::from_millis(200));
                    c.write_all(b"1").unwrap();
                }
                let r = read_response(&mut c).unwrap();
                (r, started.elapsed(), rest_until_closed(&mut c))
            })
        })
        .collect();
    served_promptly(&s, 7);
    for sender in senders {
        let (r, at, rest) = sender.join().unwrap();
        assert_eq!(r.status, 408);
        assert_eq!(
            r.text(),
            r#"{"error":408,"message":"the request body did not arrive in time"}"#
        );
        assert!(rest.is_empty(), "bytes after the 408");
        assert!(
            at >= Duration::from_millis(1900) && at < Duration::from_secs(5),
            "408 after {at:?}, deadline 2 s"
        );
    }
    assert_eq!(s.list(), "[]");
}

#[test]
fn connections_over_the_cap_get_503_and_the_service_comes_back() {
    let s = Launch::memory().arg("--max-connections 20").start();
    let held: Vec<TcpStream> = (0..20).map(|_| s.connect()).collect();
    let probe = || {
        let mut c = s.connect();
        let _ = c.write_all(&Req::get("/healthz").bytes());
        read_response(&mut c)
    };
    // The accept loop counts a connection once it has taken it: wait until all 20 are.
    eventually(Duration::from_secs(5), || {
        probe().is_ok_and(|r| r.status != 200)
    });
    let mut answered = 0;
    for _ in 0..5 {
        let t = Instant::now();
        // Read whole, to the close: the declared length must be the body's.
        let mut c = s.connect();
        let _ = c.write_all(&Req::get("/healthz").bytes());
        let mut all = Vec::new();
        match c.read_to_end(&mut all) {
            Ok(_) => {
                let text = String::from_utf8(all).unwrap();
                let (head, body) = text.split_once("\r\n\r\n").unwrap();
                assert!(head.starts_with("HTTP/1.1 503 "), "{head}");
                assert!(head.contains("\r\nRetry-After: 1\r\n"), "{head}");
                assert!(
                    head.lines()
                        .any(|l| l == format!("Content-Length: {}", body.len())),
                    "the declared length is not the body's: {text:?}"
                );
                assert_eq!(
                    body,
                    r#"{"error":503,"message":"too many connections; retry in a second"}"#
                );
                answered += 1;
            }
            // A reset is allowed too (the request raced the close); a hang is not.
            Err(e) => assert_ne!(e.kind(), std::io::ErrorKind::WouldBlock, "{e}"),
        }
        assert!(t.elapsed() < Duration::from_secs(2));
    }
    assert!(answered > 0, "no 503 was read whole");
    drop(held);
    // Back after the flood.
    eventually(Duration::from_secs(5), || {
        Req::get("/healthz")
            .send_to(&s.addr)
            .is_ok_and(|r| r.status == 200)
    });
}

#[test]
fn running_out_of_descriptors_refuses_for_a_while_and_never_exits() {
    let s = Launch::memory().arg("--read-timeout 30").start();
    let in_use = std::fs::read_dir(format!("/proc/{}/fd", s.pid()))
        .unwrap()
        .count() as libc::rlim_t;
    // Room for about four connections (two descriptors each), then EMFILE.
    let lim = libc::rlimit {
        rlim_cur: in_use + 8,
        rlim_max: in_use + 8,
    };
    // SAFETY: prlimit on our own child, with a valid struct and no old-value pointer.
    assert_eq!(
        unsafe { libc::prlimit(s.pid(), libc::RLIMIT_NOFILE, &lim, std::ptr::null_mut()) },
        0
    );
    let held: Vec<TcpStream> = (0..40).map(|_| s.connect()).collect();
    s.log_when(|log| log.contains("accept failed"));
    // Not a stand-in for a state: the server is kept out of descriptors for a while, and
    // must neither exit nor spin meanwhile.
    thread::sleep(Duration::from_millis(500));
    drop(held);
    // Served within 5 s of the descriptors being free.
    eventually(Duration::from_secs(5), || {
        Req::get("/healthz")
            .send_to(&s.addr)
            .is_ok_and(|r| r.status == 200)
    });
    assert!(
        !s.log().contains("panic"),
        "a panic reached the log:\n{}",
        s.log()
    );
}

/// Clients that pipeline requests and never read their answers: each connection holds
/// at most one request in flight and one read ahead, so memory stays flat and others are
/// served.
#[test]
fn pipelining_clients_that_never_read_hold_no_worker_and_no_memory() {
    let s = Launch::memory().arg("--workers 2").start();
    assert_eq!(s.post(r#"{"id":1,"name":"a"}"#).status, 200);
    let stop = Arc::new(AtomicBool::new(false));
    let request = Req::get("/plants?limit=10")
        .token(TOKEN)
        .keep_alive()
        .bytes()
        .repeat(64);
    // How many flooders found their connection full (a write that timed out).
    let full = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let flooders: Vec<_> = (0..16)
        .map(|_| {
            let (mut c, stop, request) = (s.connect(), stop.clone(), request.clone());
            let full = full.clone();
            c.set_write_timeout(Some(Duration::from_millis(200)))
                .unwrap();
            thread::spawn(move || {
                let (mut sent, mut blocked) = (0usize, false);
                while !stop.load(Ordering::Relaxed) {
                    match c.write(&request) {
                        Ok(n) => sent += n,
                        Err(_) => {
                            if !std::mem::replace(&mut blocked, true) {
                                full.fetch_add(1, Ordering::Relaxed);
                            }
                            // The client's own pace while its connection is full.
                            thread::sleep(Duration::from_millis(20));
                        }
                    }
                }
                sent
            })
        })
        .collect();
    eventually(Duration::from_secs(20), || {
        full.load(Ordering::Relaxed) == 16
    });
    served_promptly(&s, 20);
    let rss = s.proc_status("VmRSS");
    stop.store(true, Ordering::Relaxed);
    let sent: usize = flooders.into_iter().map(|f| f.join().unwrap()).sum();
    assert!(sent > 1_000_000, "the flood sent only {sent} bytes");
    assert!(rss < 64 * 1024, "RSS {rss} kB under the pipelined flood");
    served_promptly(&s, 2);
}

/// A list far larger than the socket buffers, requested by clients that do not read it,
/// ties up no worker; read later, it arrives whole.
#[test]
fn clients_that_do_not_read_a_long_list_hold_no_worker() {
    if native_only(EMULATED_TCP_INFO) {
        return;
    }
    let s = Launch::memory().arg("--workers 1").start();
    seed_long_list(&s);
    let readers: Vec<TcpStream> = (0..4)
        .map(|_| {
            let mut c = s.connect();
            let get = Req::get("/plants").token(TOKEN).keep_alive().bytes();
            c.write_all(&get).unwrap();
            c
        })
        .collect();
    // Each list is being written and has filled what the client does not read.
    eventually(Duration::from_secs(10), || {
        readers.iter().all(|c| unread_bytes(c) > 64 * 1024)
    });
    served_promptly(&s, 6);
    let t = Instant::now();
    assert_eq!(s.post(r#"{"id":0,"name":"during"}"#).status, 200);
    assert!(t.elapsed() < Duration::from_secs(2));
    for mut c in readers {
        let r = read_response(&mut c).unwrap();
        let list: Vec<serde_json::Value> = serde_json::from_slice(&r.body).unwrap();
        assert!(list.len() >= 20_000, "{} plants", list.len());
    }
}

/// 20,000 plants of about 530 bytes each, created over one pipelining connection: a list
/// of over 10 MB of JSON, far larger than the socket buffers.
fn seed_long_list(s: &TestServer) {
    let name = "n".repeat(256);
    let tag = "t".repeat(256);
    let mut c = s.connect();
    for chunk in (1..=20_000).collect::<Vec<u32>>().chunks(500) {
        let mut batch = Vec::new();
        for id in chunk {
            let body = format!(r#"{{"id":{id},"name":"{name}","tag":"{tag}"}}"#);
            batch.extend(
                Req::new("POST", "/plants")
                    .token(TOKEN)
                    .json(&body)
                    .keep_alive()
                    .bytes(),
            );
        }
        c.write_all(&batch).unwrap();
        for _ in chunk {
            assert_eq!(read_response(&mut c).unwrap().status, 200);
        }
    }
}

/// A client that takes in a long list a few bytes at a time is cut off after
/// `--write-timeout` windows in which it took in under 16 KiB, and its connection is gone;
/// a client that reads at speed gets the whole list from the same server.
#[test]
fn a_client_that_takes_in_an_answer_too_slowly_is_cut_off() {
    if native_only(EMULATED_TCP_INFO) {
        return;
    }
    let s = Launch::memory().arg("--write-timeout 1").start();
    seed_long_list(&s);
    let open = s.metric("plant_store_connections_open");
    let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    let addr: std::net::SocketAddr = s.addr.parse().unwrap();
    socket.connect(&addr.into()).unwrap();
    let mut c: TcpStream = socket.into();
    c.write_all(&Req::get("/plants").token(TOKEN).bytes())
        .unwrap();
    let started = Instant::now();
    let mut taken = 0;
    let mut buf = [0u8; 256];
    loop {
        match c.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => taken += n,
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "still served after {taken} bytes"
        );
        // The client's pace (about 2.5 KB/s), not a wait for a state.
        thread::sleep(Duration::from_millis(100));
    }
    assert!(taken < 1_000_000, "took in {taken} bytes");
    eventually(Duration::from_secs(5), || {
        s.metric("plant_store_connections_open") <= open
    });
    assert!(
        s.log()
            .contains("a client took in under 16384 bytes of an answer in 1 s")
    );
    let r = s.get("/plants");
    assert_eq!(
        names(&r.text()).len(),
        20_000,
        "read at speed, the list is whole"
    );
}

/// Servers and `token add` started together on a new database file all succeed: opening,
/// the switch to WAL and the migrations wait for each other.
#[test]
fn ten_processes_started_at_once_on_a_new_file_all_succeed() {
    for round in 0..5 {
        let dir = TempDir::new();
        let db = dir.db();
        let db = db.to_str().unwrap();
        let mut children: Vec<_> = (0..10)
            .map(|i| {
                let mut cmd = plant_store();
                if i % 2 == 0 {
                    cmd.args(["serve", "--addr", "127.0.0.1:0", "--db", db]);
                } else {
                    cmd.args(["token", "add", &format!("p{i}"), "--create", "--db", db]);
                }
                cmd.stdin(Stdio::null())
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped())
                    .env_remove("PLANT_STORE_TOKEN")
                    .spawn()
                    .unwrap()
            })
            .collect();
        for (i, child) in children.iter_mut().enumerate() {
            let mut out = child.stdout.take().unwrap();
            let mut first = Vec::new();
            let mut byte = [0u8];
            while out.read(&mut byte).unwrap_or(0) == 1 && byte[0] != b'\n' {
                first.push(byte[0]);
            }
            if i % 2 == 1 {
                // A token add's token is read too, so its write meets no closed pipe.
                let _ = out.read_to_end(&mut Vec::new());
            }
            let first = String::from_utf8_lossy(&first).into_owned();
            let expected = if i % 2 == 0 { "listening on" } else { "token " };
            if !first.starts_with(expected) {
                let _ = child.kill();
                let mut err = String::new();
                child
                    .stderr
                    .take()
                    .unwrap()
                    .read_to_string(&mut err)
                    .unwrap();
                panic!("round {round}, process {i}: {first:?}\n{err}");
            }
            if i % 2 == 0 {
                let _ = child.kill();
            }
        }
        for (i, mut child) in children.into_iter().enumerate() {
            let status = child.wait().unwrap();
            assert!(
                i % 2 == 0 || status.success(),
                "round {round}, token add {i}"
            );
        }
        let (code, out, _) = run_cli(&["token", "list", "--db", db]);
        assert_eq!((code, out.lines().count()), (0, 6), "{out}");
    }
}
