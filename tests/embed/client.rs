//! A small HTTP/1.1 client for the in-process tests: one request per connection.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

pub struct Answer {
    pub status: u16,
    pub body: String,
}

/// Sends one request (`Connection: close`) and reads its answer.
pub fn request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    token: Option<&str>,
    body: Option<&str>,
) -> Answer {
    let mut tcp = TcpStream::connect(addr).expect("the server listens");
    tcp.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut head = format!("{method} {path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\n");
    if let Some(token) = token {
        head.push_str(&format!("Authorization: Bearer {token}\r\n"));
    }
    if let Some(body) = body {
        head.push_str(&format!(
            "Content-Type: application/json\r\nContent-Length: {}\r\n",
            body.len()
        ));
    }
    head.push_str("\r\n");
    head.push_str(body.unwrap_or(""));
    tcp.write_all(head.as_bytes()).unwrap();
    read_response(&mut tcp)
}

pub fn get(addr: SocketAddr, path: &str, token: Option<&str>) -> Answer {
    request(addr, "GET", path, token, None)
}

/// Reads one answer: its status, and its body (by `Content-Length`, chunks, or the close).
pub fn read_response(tcp: &mut TcpStream) -> Answer {
    tcp.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut r = BufReader::new(tcp);
    let mut line = String::new();
    r.read_line(&mut line).unwrap();
    let status = line
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .expect("a status line");
    let (mut length, mut chunked) = (None, false);
    loop {
        line.clear();
        r.read_line(&mut line).unwrap();
        let l = line.trim_end();
        if l.is_empty() {
            break;
        }
        let (name, value) = l.split_once(':').unwrap();
        match name.to_ascii_lowercase().as_str() {
            "content-length" => length = value.trim().parse::<usize>().ok(),
            "transfer-encoding" => chunked = value.trim().eq_ignore_ascii_case("chunked"),
            _ => {}
        }
    }
    let mut body = Vec::new();
    if chunked {
        loop {
            line.clear();
            r.read_line(&mut line).unwrap();
            let size = usize::from_str_radix(line.trim_end(), 16).unwrap();
            let mut chunk = vec![0; size + 2];
            r.read_exact(&mut chunk).unwrap();
            if size == 0 {
                break;
            }
            body.extend_from_slice(&chunk[..size]);
        }
    } else if let Some(n) = length {
        body.resize(n, 0);
        r.read_exact(&mut body).unwrap();
    } else {
        r.read_to_end(&mut body).unwrap();
    }
    Answer {
        status,
        body: String::from_utf8(body).unwrap(),
    }
}
