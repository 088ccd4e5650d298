//! The other end of webhook deliveries: `Receiver`, a local HTTP/1.1 server on port 0
//! that records every request (headers lowercased, body, when it arrived and when its
//! answer was released) and answers from a script that may change while it runs: a
//! queue of canned `Answer`s, then a default (200). `TlsReceiver` takes one request over
//! TLS through `openssl s_server`. `verify` checks a Standard Webhooks signature.

use super::wait::eventually;
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use hmac::{Hmac, KeyInit, Mac};
use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How the receiver answers one request: a status, extra headers, a delay before the
/// answer is written, and its body (at first empty, `content-length: 0`).
#[derive(Clone, Debug)]
pub struct Answer {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub delay: Duration,
    pub body: AnswerBody,
}

/// The body of an answer.
#[derive(Clone, Debug)]
pub enum AnswerBody {
    /// `content-length: N` and N bytes.
    Whole(usize),
    /// `content-length: 1000`, 10 bytes, then the connection closes.
    Cut,
    /// `content-length: 10`, then nothing for this long, then the 10 bytes.
    Stalled(Duration),
}

impl Answer {
    pub fn status(status: u16) -> Answer {
        Answer {
            status,
            headers: Vec::new(),
            delay: Duration::ZERO,
            body: AnswerBody::Whole(0),
        }
    }

    pub fn ok() -> Answer {
        Answer::status(200)
    }

    pub fn header(mut self, name: &str, value: &str) -> Answer {
        self.headers.push((name.to_owned(), value.to_owned()));
        self
    }

    /// Written only after `delay`.
    pub fn after(mut self, delay: Duration) -> Answer {
        self.delay = delay;
        self
    }

    pub fn body(mut self, body: AnswerBody) -> Answer {
        self.body = body;
        self
    }
}

/// A request as the receiver read it.
#[derive(Clone, Debug)]
pub struct Received {
    pub method: String,
    pub path: String,
    /// Names lowercased, in the order sent.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// When the whole request had arrived.
    pub at: Instant,
    /// When its answer was released (just before it was written): nothing the answer
    /// causes can happen before. `None` while the answer waits out its delay.
    pub answered: Option<Instant>,
    /// The status it was (or is to be) answered with.
    pub status: u16,
}

impl Received {
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .find(|h| h.0 == name)
            .map(|h| h.1.as_str())
    }

    pub fn text(&self) -> String {
        String::from_utf8(self.body.clone()).expect("the body is UTF-8")
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {:?}", String::from_utf8_lossy(&self.body)))
    }

    /// The `seq` of the event in the body.
    pub fn seq(&self) -> i64 {
        self.json()["seq"]
            .as_i64()
            .unwrap_or_else(|| panic!("no seq in {}", self.text()))
    }
}

struct State {
    script: VecDeque<Answer>,
    default: Answer,
    requests: Vec<Received>,
}

/// A local HTTP/1.1 receiver on 127.0.0.1, one thread per connection, keep-alive.
pub struct Receiver {
    port: u16,
    state: Arc<Mutex<State>>,
    stopping: Arc<AtomicBool>,
}

impl Receiver {
    pub fn start() -> Receiver {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let state = Arc::new(Mutex::new(State {
            script: VecDeque::new(),
            default: Answer::ok(),
            requests: Vec::new(),
        }));
        let stopping = Arc::new(AtomicBool::new(false));
        let (st, stop) = (state.clone(), stopping.clone());
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                if stop.load(Ordering::Relaxed) {
                    return;
                }
                let Ok(conn) = conn else { continue };
                let st = st.clone();
                std::thread::spawn(move || serve(conn, &st));
            }
        });
        Receiver {
            port,
            state,
            stopping,
        }
    }

    /// `http://127.0.0.1:PORT/hook`.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/hook", self.port)
    }

    /// `http://127.0.0.1:PORT{path}`.
    pub fn url_at(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Every request so far, in the order they arrived.
    pub fn requests(&self) -> Vec<Received> {
        self.state().requests.clone()
    }

    pub fn count(&self) -> usize {
        self.state().requests.len()
    }

    /// The seqs of the events received so far, in the order they arrived.
    pub fn seqs(&self) -> Vec<i64> {
        self.requests().iter().map(Received::seq).collect()
    }

    /// The requests once there are at least `n`; panics after `within`.
    #[track_caller]
    pub fn wait_for(&self, n: usize, within: Duration) -> Vec<Received> {
        eventually(within, || self.count() >= n);
        self.requests()
    }

    /// Answers the next request not answered yet from the script with `a`.
    pub fn push(&self, a: Answer) {
        self.state().script.push_back(a);
    }

    /// The answer once the script is used up (at first, 200).
    pub fn set_default(&self, a: Answer) {
        self.state().default = a;
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.stopping.store(true, Ordering::Relaxed);
        // Wakes the accepting thread, which then sees `stopping`.
        let _ = TcpStream::connect(("127.0.0.1", self.port));
        if std::thread::panicking() {
            let got: Vec<String> = self
                .requests()
                .iter()
                .map(|r| format!("{} {}", r.status, String::from_utf8_lossy(&r.body)))
                .collect();
            eprintln!("--- receiver {} got:\n{}", self.url(), got.join("\n"));
        }
    }
}

/// One connection: requests until the peer closes it (or asks to), each answered from
/// the script.
fn serve(conn: TcpStream, state: &Mutex<State>) {
    // An idle connection is given up after a minute, so no thread outlives a test long.
    let _ = conn.set_read_timeout(Some(Duration::from_secs(60)));
    let mut out = match conn.try_clone() {
        Ok(c) => c,
        Err(_) => return,
    };
    let mut reader = BufReader::new(conn);
    while let Some(mut req) = read_request(&mut reader) {
        let close = req
            .header("connection")
            .is_some_and(|v| v.eq_ignore_ascii_case("close"));
        let (answer, index) = {
            let mut st = state.lock().unwrap_or_else(|e| e.into_inner());
            let answer = st.script.pop_front().unwrap_or_else(|| st.default.clone());
            req.status = answer.status;
            st.requests.push(req);
            (answer, st.requests.len() - 1)
        };
        std::thread::sleep(answer.delay);
        let mut head = format!("HTTP/1.1 {} {}\r\n", answer.status, reason(answer.status));
        for (k, v) in &answer.headers {
            head.push_str(&format!("{k}: {v}\r\n"));
        }
        let (length, body) = match answer.body {
            AnswerBody::Whole(n) => (n, vec![b'x'; n]),
            AnswerBody::Cut => (1000, vec![b'x'; 10]),
            AnswerBody::Stalled(_) => (10, vec![b'x'; 10]),
        };
        head.push_str(&format!("content-length: {length}\r\n"));
        if close {
            head.push_str("connection: close\r\n");
        }
        head.push_str("\r\n");
        state.lock().unwrap_or_else(|e| e.into_inner()).requests[index].answered =
            Some(Instant::now());
        if out.write_all(head.as_bytes()).is_err() {
            return;
        }
        if let AnswerBody::Stalled(d) = answer.body {
            let _ = out.flush();
            std::thread::sleep(d);
        }
        if out.write_all(&body).is_err() || close || matches!(answer.body, AnswerBody::Cut) {
            // A cut body: the connection closes short of its length.
            let _ = out.shutdown(std::net::Shutdown::Both);
            return;
        }
    }
}

/// Reads one request: its head, and a body by `content-length` or chunked. `None` at the
/// end of the connection (or on anything unreadable).
fn read_request(r: &mut impl BufRead) -> Option<Received> {
    let mut line = String::new();
    if r.read_line(&mut line).ok()? == 0 {
        return None;
    }
    let mut parts = line.split_whitespace();
    let (method, path) = (parts.next()?.to_owned(), parts.next()?.to_owned());
    let mut headers = Vec::new();
    loop {
        let mut h = String::new();
        if r.read_line(&mut h).ok()? == 0 {
            return None;
        }
        let h = h.trim_end();
        if h.is_empty() {
            break;
        }
        let (k, v) = h.split_once(':')?;
        headers.push((k.trim().to_ascii_lowercase(), v.trim().to_owned()));
    }
    let find = |n: &str| headers.iter().find(|h| h.0 == n).map(|h| h.1.clone());
    let mut body = Vec::new();
    if let Some(len) = find("content-length") {
        body.resize(len.parse().ok()?, 0);
        r.read_exact(&mut body).ok()?;
    } else if find("transfer-encoding").is_some_and(|t| t.eq_ignore_ascii_case("chunked")) {
        loop {
            let mut size = String::new();
            r.read_line(&mut size).ok()?;
            let n = usize::from_str_radix(size.trim(), 16).ok()?;
            let start = body.len();
            body.resize(start + n + 2, 0);
            r.read_exact(&mut body[start..]).ok()?;
            body.truncate(start + n);
            if n == 0 {
                break;
            }
        }
    }
    Some(Received {
        method,
        path,
        headers,
        body,
        at: Instant::now(),
        answered: None,
        status: 0,
    })
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        204 => "No Content",
        302 => "Found",
        410 => "Gone",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        _ => "Whatever",
    }
}

/// Whether `request` carries a `webhook-signature` (one of its space-separated `v1,`
/// signatures) that is HMAC-SHA256 under `secret` (`whsec_` + base64 of the key) of
/// `{webhook-id}.{webhook-timestamp}.{body}`.
pub fn verify(secret: &str, request: &Received) -> bool {
    let Some(key) = secret
        .strip_prefix("whsec_")
        .and_then(|k| STANDARD.decode(k).ok())
    else {
        return false;
    };
    let (Some(id), Some(ts), Some(sigs)) = (
        request.header("webhook-id"),
        request.header("webhook-timestamp"),
        request.header("webhook-signature"),
    ) else {
        return false;
    };
    let mut mac = <Hmac<sha2::Sha256> as KeyInit>::new_from_slice(&key).unwrap();
    mac.update(format!("{id}.{ts}.").as_bytes());
    mac.update(&request.body);
    let want = format!("v1,{}", STANDARD.encode(mac.finalize().into_bytes()));
    sigs.split(' ').any(|s| s == want)
}

/// One request over TLS: `openssl s_server` with `cert` and `key` on 127.0.0.1, port 0,
/// for one connection. Its decrypted input comes out on its stdout (after its own
/// report of the session); what is written to its stdin goes back to the client.
pub struct TlsReceiver {
    child: Child,
    stdin: Option<ChildStdin>,
    out: Arc<Mutex<Vec<u8>>>,
    pub port: u16,
}

impl TlsReceiver {
    pub fn start(cert: &Path, key: &Path) -> TlsReceiver {
        let mut child = Command::new("openssl")
            .args([
                "s_server",
                "-accept",
                "127.0.0.1:0",
                "-naccept",
                "1",
                "-cert",
            ])
            .arg(cert)
            .arg("-key")
            .arg(key)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("run openssl s_server (scripts/install-test-deps installs openssl)");
        let out = Arc::new(Mutex::new(Vec::new()));
        let sink = out.clone();
        let mut stdout = child.stdout.take().unwrap();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = stdout.read(&mut buf) {
                if n == 0 {
                    break;
                }
                sink.lock().unwrap().extend_from_slice(&buf[..n]);
            }
        });
        let stdin = child.stdin.take();
        let mut r = TlsReceiver {
            child,
            stdin,
            out,
            port: 0,
        };
        // "ACCEPT 127.0.0.1:PORT"
        let port = || {
            let out = String::from_utf8_lossy(&r.out.lock().unwrap()).into_owned();
            let line = out.lines().find(|l| l.starts_with("ACCEPT "))?.to_owned();
            line.rsplit(':').next()?.trim().parse::<u16>().ok()
        };
        eventually(Duration::from_secs(10), || port().is_some());
        r.port = port().unwrap();
        r
    }

    /// The one request once it has arrived whole (panics after `within`); answered 200
    /// with `connection: close`.
    #[track_caller]
    pub fn request(&mut self, within: Duration) -> Received {
        let parsed = || {
            let out = self.out.lock().unwrap().clone();
            let start = out.windows(5).position(|w| w == b"POST ")?;
            read_request(&mut &out[start..])
        };
        eventually(within, || parsed().is_some());
        let mut req = parsed().unwrap();
        req.status = 200;
        req.answered = Some(Instant::now());
        let mut stdin = self.stdin.take().unwrap();
        stdin
            .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
            .unwrap();
        // Closing stdin ends s_server's connection.
        drop(stdin);
        req
    }
}

impl Drop for TlsReceiver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
