//! The ceiling of plant-store's shape: a tiny_http server whose worker threads answer
//! every request with the same JSON list of 10 plants (what `GET /plants?limit=10`
//! returns in the benchmark), with no token check and no database. plant-store can only
//! be slower; the gap is what routing, auth, SQLite and the connection handling cost.
//!
//!     tinyhttp-ceiling --port PORT [--workers N]     (default: 4 workers)

use std::sync::Arc;
use tiny_http::{Header, Response, Server, StatusCode};

fn main() {
    let (mut port, mut workers) = (8080u16, 4usize);
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let value = args.next().unwrap_or_default();
        match flag.as_str() {
            "--port" => port = value.parse().expect("--port takes a number"),
            "--workers" => workers = value.parse().expect("--workers takes a number"),
            _ => {
                eprintln!("usage: tinyhttp-ceiling --port PORT [--workers N]");
                std::process::exit(2);
            }
        }
    }
    let plants: Vec<String> = (1..=10)
        .map(|i| format!(r#"{{"name":"plant-{i}","tag":"green"}}"#))
        .collect();
    let body: &'static [u8] = format!("[{}]", plants.join(",")).into_bytes().leak();
    let server = Arc::new(Server::http(("127.0.0.1", port)).expect("cannot listen"));
    println!("listening on http://127.0.0.1:{}", server.server_addr().to_ip().map_or(port, |a| a.port()));
    let json = Header::from_bytes("Content-Type", "application/json").expect("ASCII");
    let threads: Vec<_> = (0..workers)
        .map(|_| {
            let (server, json) = (server.clone(), json.clone());
            std::thread::spawn(move || {
                for request in server.incoming_requests() {
                    let headers = vec![json.clone()];
                    let response = Response::new(StatusCode(200), headers, body, Some(body.len()), None);
                    let _ = request.respond(response);
                }
            })
        })
        .collect();
    for t in threads {
        let _ = t.join();
    }
}
