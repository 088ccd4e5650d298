//! HTTP as the tests speak it: a request builder that also gives raw bytes (`Req`),
//! responses read off a raw socket (`Resp`), and the table-driven `check`.

use super::{TOKEN, TestServer};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// A request to send. HTTP/1.1 with `Host: test` and, unless `keep_alive`, `Connection:
/// close`; a body gets its `Content-Length` unless the request is `chunked`. `bytes()`
/// gives the raw bytes (to pipeline, split or corrupt them), `send` the answer on a new
/// connection.
#[derive(Clone, Debug)]
pub struct Req {
    method: String,
    path: String,
    version: &'static str,
    headers: Vec<(String, String)>,
    body: Option<Vec<u8>>,
    keep_alive: bool,
    chunked: bool,
}

impl Req {
    pub fn new(method: &str, path: &str) -> Req {
        Req {
            method: method.to_owned(),
            path: path.to_owned(),
            version: "HTTP/1.1",
            headers: Vec::new(),
            body: None,
            keep_alive: false,
            chunked: false,
        }
    }

    pub fn get(path: &str) -> Req {
        Req::new("GET", path)
    }

    /// A creation: `POST /plants` with the test token and a JSON body.
    pub fn create(body: &str) -> Req {
        Req::new("POST", "/plants").token(TOKEN).json(body)
    }

    pub fn header(mut self, name: &str, value: &str) -> Req {
        self.headers.push((name.to_owned(), value.to_owned()));
        self
    }

    pub fn headers(self, headers: &[(&str, &str)]) -> Req {
        headers.iter().fold(self, |r, (k, v)| r.header(k, v))
    }

    /// `Authorization: Bearer TOKEN`.
    pub fn token(self, token: &str) -> Req {
        self.header("Authorization", &bearer(token))
    }

    /// A JSON body, with its `Content-Type`.
    pub fn json(self, body: &str) -> Req {
        self.header("Content-Type", "application/json")
            .body(body.as_bytes())
    }

    pub fn body(mut self, body: &[u8]) -> Req {
        self.body = Some(body.to_vec());
        self
    }

    /// Sent as one chunk and the last chunk, with `Transfer-Encoding: chunked`.
    pub fn chunked(mut self) -> Req {
        self.chunked = true;
        self
    }

    /// No `Connection: close`: the connection may carry more requests.
    pub fn keep_alive(mut self) -> Req {
        self.keep_alive = true;
        self
    }

    pub fn http10(mut self) -> Req {
        self.version = "HTTP/1.0";
        self
    }

    pub fn is_head(&self) -> bool {
        self.method == "HEAD"
    }

    /// The request's bytes, as sent.
    pub fn bytes(&self) -> Vec<u8> {
        let mut raw = format!(
            "{} {} {}\r\nHost: test\r\n",
            self.method, self.path, self.version
        );
        if !self.keep_alive {
            raw.push_str("Connection: close\r\n");
        }
        for (k, v) in &self.headers {
            raw.push_str(&format!("{k}: {v}\r\n"));
        }
        let body = self.body.as_deref().unwrap_or_default();
        match (&self.body, self.chunked) {
            (_, true) => raw.push_str("Transfer-Encoding: chunked\r\n"),
            (Some(b), false) => raw.push_str(&format!("Content-Length: {}\r\n", b.len())),
            (None, false) => {}
        }
        raw.push_str("\r\n");
        let mut bytes = raw.into_bytes();
        if self.chunked {
            if !body.is_empty() {
                bytes.extend_from_slice(format!("{:x}\r\n", body.len()).as_bytes());
                bytes.extend_from_slice(body);
                bytes.extend_from_slice(b"\r\n");
            }
            bytes.extend_from_slice(b"0\r\n\r\n");
        } else {
            bytes.extend_from_slice(body);
        }
        bytes
    }

    /// Sends it on a new connection to `addr` and reads the answer; an error when the
    /// server cannot be reached or does not answer (it may have been killed).
    pub fn send_to(&self, addr: &str) -> std::io::Result<Resp> {
        exchange(addr, &self.bytes(), self.is_head())
    }
}

/// A request as the error table writes it: method, path, token, headers, body.
impl<const N: usize> From<(&str, &str, Option<&str>, &[(&str, &str); N], Option<&str>)> for Req {
    fn from(
        (method, path, token, headers, body): (
            &str,
            &str,
            Option<&str>,
            &[(&str, &str); N],
            Option<&str>,
        ),
    ) -> Req {
        let mut r = Req::new(method, path).headers(headers);
        if let Some(t) = token {
            r = r.token(t);
        }
        match body {
            Some(b) => r.body(b.as_bytes()),
            None => r,
        }
    }
}

/// A row of a table of requests: the request, and the status, the headers named and
/// the exact body that must come back.
pub type Row<'a> = (Req, u16, &'a [(&'a str, &'a str)], String);

/// Sends each request of `rows` on a new connection and checks its answer: the status,
/// the headers named, `Content-Type: application/json` on any answer with a body, and
/// the exact body.
#[track_caller]
pub fn check(s: &TestServer, rows: &[Row]) {
    for (req, status, want_headers, want_body) in rows {
        let r = s.request(req);
        let ctx = format!(
            "{:?} -> {} {:?} {}",
            String::from_utf8_lossy(&req.bytes()),
            r.status,
            r.headers,
            String::from_utf8_lossy(&r.body)
        );
        assert_eq!(r.status, *status, "{ctx}");
        for (k, v) in *want_headers {
            assert_eq!(r.header(k), Some(*v), "header {k}: {ctx}");
        }
        if *status != 204 {
            assert_eq!(r.header("Content-Type"), Some("application/json"), "{ctx}");
        }
        assert_eq!(String::from_utf8_lossy(&r.body), *want_body, "{ctx}");
    }
}

/// The error body of a status and message.
pub fn err(status: u16, message: &str) -> String {
    serde_json::json!({ "error": status, "message": message }).to_string()
}

/// Sends `bytes` on a new connection to `addr` and reads one response (no body after a
/// HEAD). An error when the server cannot be reached or does not answer.
pub fn exchange(addr: &str, bytes: &[u8], head: bool) -> std::io::Result<Resp> {
    let mut s = TcpStream::connect(addr)?;
    s.set_read_timeout(Some(Duration::from_secs(20)))?;
    let _ = s.write_all(bytes);
    read_response_to(&mut s, head)
}

/// The ids of the test token's plants named `p<id>`, as listed by `s`.
pub fn listed_ids(s: &TestServer) -> std::collections::BTreeSet<i64> {
    serde_json::from_str::<serde_json::Value>(&s.list())
        .unwrap()
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap()[1..].parse().unwrap())
        .collect()
}

pub fn bearer(token: &str) -> String {
    format!("Bearer {token}")
}

#[derive(Debug)]
pub struct Resp {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Resp {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|h| h.0.eq_ignore_ascii_case(name))
            .map(|h| h.1.as_str())
    }

    pub fn text(&self) -> String {
        String::from_utf8(self.body.clone()).expect("body is UTF-8")
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {:?}", self.text()))
    }
}

/// Reads one response: status line, headers, then a body by Content-Length, chunked, or
/// to the end of the stream. A `100 Continue` before it is skipped.
pub fn read_response(s: &mut impl Read) -> std::io::Result<Resp> {
    read_response_to(s, false)
}

/// `read_response`, for the answer to a HEAD request when `head` (no body follows).
pub fn read_response_to(s: &mut impl Read, head: bool) -> std::io::Result<Resp> {
    // Unbuffered, so the bytes of a pipelined next response stay on the connection.
    let mut r = Unbuffered(s);
    loop {
        let mut line = String::new();
        if r.read_line(&mut line)? == 0 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                "connection closed",
            ));
        }
        let status: u16 = line
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        let mut headers = Vec::new();
        loop {
            let mut h = String::new();
            r.read_line(&mut h)?;
            let h = h.trim_end();
            if h.is_empty() {
                break;
            }
            let (k, v) = h.split_once(':').unwrap();
            headers.push((k.trim().to_owned(), v.trim().to_owned()));
        }
        if status == 100 {
            continue;
        }
        let find = |n: &str| {
            headers
                .iter()
                .find(|h: &&(String, String)| h.0.eq_ignore_ascii_case(n))
                .map(|h| h.1.clone())
        };
        let mut body = Vec::new();
        if head {
        } else if let Some(len) = find("Content-Length") {
            body.resize(len.parse().unwrap(), 0);
            r.read_exact(&mut body)?;
        } else if find("Transfer-Encoding").is_some_and(|t| t.eq_ignore_ascii_case("chunked")) {
            loop {
                let mut size = String::new();
                r.read_line(&mut size)?;
                let n = usize::from_str_radix(size.trim(), 16).map_err(std::io::Error::other)?;
                let start = body.len();
                body.resize(start + n + 2, 0);
                r.read_exact(&mut body[start..])?;
                body.truncate(start + n);
                if n == 0 {
                    break;
                }
            }
        } else if status != 204 && status != 304 {
            r.read_to_end(&mut body)?;
        }
        return Ok(Resp {
            status,
            headers,
            body,
        });
    }
}

/// Names of a list body: `[{"name":"a"},{"name":"b","tag":"t"}]` → ["a", "b"].
pub fn names(list: &str) -> Vec<String> {
    let v: serde_json::Value = serde_json::from_str(list).unwrap();
    v.as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap().to_owned())
        .collect()
}

/// A reader whose `read_line` takes one byte at a time, so it never reads past the line.
struct Unbuffered<'a, R>(&'a mut R);

impl<R: Read> Unbuffered<'_, R> {
    fn read_line(&mut self, line: &mut String) -> std::io::Result<usize> {
        let mut bytes = Vec::new();
        let mut byte = [0u8];
        loop {
            match self.0.read(&mut byte) {
                Ok(1) => {}
                Ok(_) => break,
                // A signal to this process (a child's exit, say) is no answer.
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
            bytes.push(byte[0]);
            if byte[0] == b'\n' {
                break;
            }
        }
        line.push_str(&String::from_utf8_lossy(&bytes));
        Ok(bytes.len())
    }

    fn read_exact(&mut self, buf: &mut [u8]) -> std::io::Result<()> {
        self.0.read_exact(buf)
    }

    fn read_to_end(&mut self, buf: &mut Vec<u8>) -> std::io::Result<usize> {
        self.0.read_to_end(buf)
    }
}

/// Reads one interim (1xx) answer's head, which `read_response` skips.
pub fn read_interim(c: &mut impl Read) -> String {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        c.read_exact(&mut byte).unwrap();
        head.push(byte[0]);
    }
    String::from_utf8_lossy(&head).into_owned()
}

/// Reads until the server closes the connection; what came after the first response.
pub fn rest_until_closed(c: &mut TcpStream) -> Vec<u8> {
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut rest = Vec::new();
    let _ = c.read_to_end(&mut rest);
    rest
}

/// Bytes that arrived on `c` and are not read yet.
pub fn unread_bytes(c: &TcpStream) -> usize {
    use std::os::fd::AsRawFd;
    let mut n: libc::c_int = 0;
    // SAFETY: FIONREAD writes one int for a socket we own.
    unsafe { libc::ioctl(c.as_raw_fd(), libc::FIONREAD, &mut n) };
    n as usize
}
