//! What an in-process server costs (docs/embedding.md): the time from `start()` to a
//! served `GET /healthz`, over many servers started and stopped one after another, and
//! the resident memory of many running at once.
//!
//!     cargo run --release --example embed [STARTS] [AT_ONCE]
//!
//! (defaults 200 and 100; each server with `--workers 2` on `:memory:`).

use std::io::{Read, Write};
use std::time::{Duration, Instant};

fn healthz(addr: std::net::SocketAddr) {
    let mut tcp = std::net::TcpStream::connect(addr).unwrap();
    tcp.write_all(b"GET /healthz HTTP/1.1\r\nHost: b\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut answer = String::new();
    tcp.read_to_string(&mut answer).unwrap();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
}

fn start() -> plant_store::Running {
    plant_store::Server::builder()
        .token("bench-token")
        .workers(2)
        .start()
        .unwrap()
}

/// A line of /proc/self/status, in kB.
fn status_kb(key: &str) -> u64 {
    let text = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = text.lines().find(|l| l.starts_with(key)).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

fn main() {
    let mut args = std::env::args()
        .skip(1)
        .map(|a| a.parse::<usize>().unwrap());
    let starts = args.next().unwrap_or(200);
    let at_once = args.next().unwrap_or(100);

    let (mut to_served, mut stops) = (Vec::new(), Vec::new());
    for _ in 0..starts {
        let t = Instant::now();
        let server = start();
        healthz(server.addr());
        to_served.push(t.elapsed());
        let t = Instant::now();
        server.stop().unwrap();
        stops.push(t.elapsed());
    }
    let show = |name: &str, v: &mut Vec<Duration>| {
        v.sort();
        let at = |q: f64| v[((v.len() - 1) as f64 * q).round() as usize].as_secs_f64() * 1e3;
        println!(
            "{name} over {} servers: min {:.2} ms, median {:.2} ms, p90 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
            v.len(),
            at(0.0),
            at(0.5),
            at(0.9),
            at(0.99),
            at(1.0)
        );
    };
    show("start() to a served GET /healthz", &mut to_served);
    show("stop()", &mut stops);

    let (rss0, threads0) = (status_kb("VmRSS:"), status_kb("Threads:"));
    let running: Vec<_> = (0..at_once)
        .map(|_| {
            let s = start();
            healthz(s.addr());
            s
        })
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    let (rss, threads) = (status_kb("VmRSS:"), status_kb("Threads:"));
    println!(
        "{at_once} servers at once: process RSS {:.1} MB ({:.1} MB before them), {:.0} kB and {} threads each",
        rss as f64 / 1024.0,
        rss0 as f64 / 1024.0,
        (rss - rss0) as f64 / at_once as f64,
        (threads - threads0) / at_once as u64
    );
    drop(running);
}
