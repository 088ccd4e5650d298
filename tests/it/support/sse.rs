//! The change feed as a client reads it: `GET /events` as a token, a JSON list's
//! elements, and an event stream (the answer's head, then one message at a time).

use super::{Resp, TestServer, bearer};
use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// `GET /events{query}` as `token`.
pub fn events_as(s: &TestServer, token: &str, query: &str) -> Resp {
    let path = format!("/events{query}");
    s.send("GET", &path, &[("Authorization", &bearer(token))], None)
}

/// The elements of a JSON list of events, each as its exact text.
pub fn elements(list: &str) -> Vec<String> {
    let v: Vec<Box<serde_json::value::RawValue>> = serde_json::from_str(list).unwrap();
    v.into_iter().map(|e| e.get().to_owned()).collect()
}

/// A message of the stream: its fields, or a comment.
#[derive(Debug, PartialEq, Eq)]
pub enum Message {
    Event {
        id: i64,
        event: String,
        data: String,
    },
    Comment(String),
}

pub struct Sse {
    pub head: Resp,
    reader: BufReader<TcpStream>,
}

impl Sse {
    /// Opens `GET path` with `Accept: text/event-stream` as `token`, with `headers`, and
    /// reads the head. A non-200 answer is returned whole in `head`, its body included.
    pub fn open(s: &TestServer, token: &str, path: &str, headers: &[(&str, &str)]) -> Sse {
        let mut c = TcpStream::connect(&s.addr).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        let mut req = format!(
            "GET {path} HTTP/1.1\r\nHost: test\r\nAccept: text/event-stream\r\nAuthorization: {}\r\n",
            bearer(token)
        );
        for (k, v) in headers {
            req.push_str(&format!("{k}: {v}\r\n"));
        }
        req.push_str("\r\n");
        c.write_all(req.as_bytes()).unwrap();
        let mut reader = BufReader::new(c);
        let mut status_line = String::new();
        reader.read_line(&mut status_line).unwrap();
        let status = status_line
            .split_whitespace()
            .nth(1)
            .unwrap()
            .parse()
            .unwrap();
        let mut headers = Vec::new();
        let mut length = None;
        loop {
            let mut line = String::new();
            reader.read_line(&mut line).unwrap();
            let line = line.trim_end();
            if line.is_empty() {
                break;
            }
            let (k, v) = line.split_once(':').unwrap();
            if k.eq_ignore_ascii_case("content-length") {
                length = Some(v.trim().parse::<usize>().unwrap());
            }
            headers.push((k.to_owned(), v.trim().to_owned()));
        }
        let mut body = Vec::new();
        if let Some(n) = length {
            body.resize(n, 0);
            std::io::Read::read_exact(&mut reader, &mut body).unwrap();
        }
        Sse {
            head: Resp {
                status,
                headers,
                body,
            },
            reader,
        }
    }

    /// Closes the client's sending side only; it reads on.
    pub fn shutdown_write(&self) {
        self.reader
            .get_ref()
            .shutdown(std::net::Shutdown::Write)
            .unwrap();
    }

    pub fn set_timeout(&self, t: Duration) {
        self.reader.get_ref().set_read_timeout(Some(t)).unwrap();
    }

    /// The next message; `None` when the stream ended (the connection closed).
    pub fn next(&mut self) -> Option<Message> {
        let (mut id, mut event, mut data, mut comment) = (None, None, None, None);
        loop {
            let mut line = String::new();
            match self.reader.read_line(&mut line) {
                Ok(0) => return None,
                Ok(_) => {}
                Err(e) if matches!(e.kind(), std::io::ErrorKind::ConnectionReset) => return None,
                Err(e) => panic!("reading the stream: {e}"),
            }
            let line = line.strip_suffix('\n').expect("a whole line");
            if line.is_empty() {
                if let Some(c) = comment.take() {
                    return Some(Message::Comment(c));
                }
                return Some(Message::Event {
                    id: id.expect("an id line"),
                    event: event.expect("an event line"),
                    data: data.expect("a data line"),
                });
            }
            if let Some(c) = line.strip_prefix(": ") {
                comment = Some(c.to_owned());
            } else if let Some(v) = line.strip_prefix("id: ") {
                id = Some(v.parse::<i64>().unwrap());
            } else if let Some(v) = line.strip_prefix("event: ") {
                event = Some(v.to_owned());
            } else if let Some(v) = line.strip_prefix("data: ") {
                assert!(data.is_none(), "one data line per event");
                data = Some(v.to_owned());
            } else {
                panic!("unexpected line {line:?}");
            }
        }
    }

    /// The next event, past comments; it panics when none came within 30 s (keep-alive
    /// comments alone would otherwise hold a test forever).
    pub fn next_event(&mut self) -> Option<(i64, String, String)> {
        let started = Instant::now();
        loop {
            match self.next()? {
                Message::Event { id, event, data } => return Some((id, event, data)),
                Message::Comment(_) => {
                    assert!(
                        started.elapsed() < Duration::from_secs(30),
                        "no event within 30 s"
                    )
                }
            }
        }
    }
}
