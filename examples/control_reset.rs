//! What test control's whole-store operations cost (docs/performance.md, "Test
//! control"): a reset and a snapshot restore of a store of 10,000 plants (each with its
//! event), and a start with a seed of 1,000 plants, in-process, on `:memory:` and on a
//! file.
//!
//!     cargo run --release --example control_reset [PLANTS] [ROUNDS]
//!
//! (defaults 10000 and 50). The time is the HTTP round trip of `POST /_control/reset`
//! (or `…/restore`) on a kept-alive connection, answer read: what a test pays.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

const CONTROL: &str = "bench-control-token-0123";

fn seed(plants: usize) -> String {
    let list: Vec<String> = (1..=plants)
        .map(|i| format!(r#"{{"id":{i},"name":"plant {i}","tag":"t{}"}}"#, i % 10))
        .collect();
    format!(
        r#"{{"tokens":[{{"token":"bench-alice","principal":"alice"}}],"plants":{{"alice":[{}]}}}}"#,
        list.join(",")
    )
}

/// Sends one request on `tcp` (kept alive) and reads its answer: its status.
fn call(tcp: &mut BufReader<TcpStream>, method: &str, path: &str, token: &str) -> (u16, String) {
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: b\r\nAuthorization: Bearer {token}\r\nContent-Length: 0\r\n\r\n"
    );
    tcp.get_mut().write_all(head.as_bytes()).unwrap();
    let mut line = String::new();
    tcp.read_line(&mut line).unwrap();
    let status = line.split(' ').nth(1).unwrap().parse().unwrap();
    let mut length = 0;
    loop {
        line.clear();
        tcp.read_line(&mut line).unwrap();
        if line.trim_end().is_empty() {
            break;
        }
        if let Some((k, v)) = line.split_once(':')
            && k.eq_ignore_ascii_case("content-length")
        {
            length = v.trim().parse().unwrap();
        }
    }
    let mut body = vec![0; length];
    tcp.read_exact(&mut body).unwrap();
    (status, String::from_utf8(body).unwrap())
}

fn figures(name: &str, mut times: Vec<Duration>) {
    times.sort();
    let at = |q: f64| times[((times.len() - 1) as f64 * q) as usize].as_secs_f64() * 1e3;
    println!(
        "{name}: min {:.2} ms, median {:.2} ms, p90 {:.2} ms, max {:.2} ms ({} rounds)",
        at(0.0),
        at(0.5),
        at(0.9),
        at(1.0),
        times.len()
    );
}

fn main() {
    let mut args = std::env::args()
        .skip(1)
        .map(|a| a.parse::<usize>().unwrap());
    let plants = args.next().unwrap_or(10_000);
    let rounds = args.next().unwrap_or(50);
    let dir =
        std::env::temp_dir().join(format!("plant-store-control-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let big = dir.join("seed.json");
    std::fs::write(&big, seed(plants)).unwrap();
    let small = dir.join("seed-1000.json");
    std::fs::write(&small, seed(1000)).unwrap();

    let mut starts = Vec::new();
    for _ in 0..rounds {
        let t = Instant::now();
        let server = plant_store::Server::builder()
            .control_token(CONTROL)
            .seed_file(&small)
            .workers(2)
            .start()
            .unwrap();
        starts.push(t.elapsed());
        server.stop().unwrap();
    }
    figures("start() with a 1,000-plant seed, :memory:", starts);

    for db in [
        ":memory:".to_owned(),
        dir.join("bench.db").display().to_string(),
    ] {
        let server = plant_store::Server::builder()
            .db(&db)
            .control_token(CONTROL)
            .seed_file(&big)
            .workers(2)
            .start()
            .unwrap();
        let mut tcp = BufReader::new(TcpStream::connect(server.addr()).unwrap());
        let (status, body) = call(&mut tcp, "POST", "/_control/snapshots", CONTROL);
        assert_eq!(status, 201, "{body}");
        let id = body.split('"').nth(3).unwrap().to_owned();
        let restore = format!("/_control/snapshots/{id}/restore");
        let (mut resets, mut restores) = (Vec::new(), Vec::new());
        // Restores first: a reset drops the snapshots.
        for _ in 0..rounds {
            // A change between, so each has something to undo.
            let (status, _) = call(&mut tcp, "DELETE", "/plants/2", "bench-alice");
            assert_eq!(status, 204);
            let t = Instant::now();
            assert_eq!(call(&mut tcp, "POST", &restore, CONTROL).0, 204);
            restores.push(t.elapsed());
        }
        for _ in 0..rounds {
            let (status, _) = call(&mut tcp, "DELETE", "/plants/1", "bench-alice");
            assert_eq!(status, 204);
            let t = Instant::now();
            assert_eq!(call(&mut tcp, "POST", "/_control/reset", CONTROL).0, 204);
            resets.push(t.elapsed());
        }
        // The store is the seed's again: its last plant and its last event.
        let last = format!("/events?after={}&limit=5", plants - 1);
        let (status, events) = call(&mut tcp, "GET", &last, "bench-alice");
        assert_eq!(status, 200);
        assert!(events.contains(&format!(r#""seq":{plants},"#)), "{events}");
        assert!(
            !events.contains(&format!(r#""seq":{},"#, plants + 1)),
            "{events}"
        );
        figures(&format!("reset, {plants} plants, {db}"), resets);
        figures(
            &format!("snapshot restore, {plants} plants, {db}"),
            restores,
        );
        server.stop().unwrap();
        if let Ok(meta) = std::fs::metadata(&db) {
            // Checkpointed at the stop: the whole store, what a snapshot holds in memory.
            println!("the database of {plants} plants: {} bytes", meta.len());
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}
