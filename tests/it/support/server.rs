//! The server under test: the binary, its temporary database, starting it on port 0
//! (`Launch`, `TestServer`), and loads run through it. The command line is `cli.rs`.

use super::http::{Req, Resp, exchange};
use super::postgres::shared_cluster;
use super::wait::eventually;
use super::{TOKEN, on_postgres};
use std::io::{BufRead, BufReader, Read};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The binary under test: `PLANT_STORE_BIN` when set (a static build;
/// docs/device.md, "Static builds"), else the one cargo built for this test run.
pub fn bin() -> String {
    std::env::var("PLANT_STORE_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_plant-store").into())
}

/// The emulator that runs the binary under test, from `PLANT_STORE_EMULATOR` (such as
/// `qemu-arm` for the armv7 build; `.ci/run`), or none.
pub fn emulator() -> Option<String> {
    std::env::var("PLANT_STORE_EMULATOR")
        .ok()
        .filter(|e| !e.is_empty())
}

/// The program and leading arguments that run the binary under test: the binary, or the
/// emulator and the binary.
pub fn program() -> Vec<String> {
    emulator().into_iter().chain([bin()]).collect()
}

/// A `Command` that runs the binary under test (under its emulator, if any).
pub fn plant_store() -> Command {
    let program = program();
    let mut cmd = Command::new(&program[0]);
    cmd.args(&program[1..]);
    cmd
}

/// A directory under the system temp dir, removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new() -> TempDir {
        static N: AtomicU32 = AtomicU32::new(0);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .subsec_nanos();
        let dir = std::env::temp_dir().join(format!(
            "plant-store-test-{}-{}-{nanos}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }

    /// The test's database: a file in this directory on SQLite; on PostgreSQL the URL
    /// of a database of its own (as a path, so tests pass it on either way).
    pub fn db(&self) -> PathBuf {
        if on_postgres() {
            let name = self
                .0
                .file_name()
                .unwrap()
                .to_str()
                .unwrap()
                .replace('-', "_");
            return PathBuf::from(shared_cluster().database(&name));
        }
        self.0.join("plants.db")
    }
}

impl TempDir {
    /// The directory, no longer removed on drop.
    pub fn keep(self) -> PathBuf {
        std::mem::ManuallyDrop::new(self).0.clone()
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

pub struct TestServer {
    pub child: Child,
    pub addr: String,
    pub stderr: Arc<Mutex<String>>,
}

/// How to start a server; `TestServer::start(&db)` is the usual case.
pub struct Launch<'a> {
    pub db: &'a str,
    pub args: Vec<String>,
    pub token: Option<&'a str>,
    pub env: Vec<(&'a str, &'a str)>,
    /// The program and its leading arguments: the binary under test, or an emulator and
    /// a binary for another architecture.
    pub program: Vec<String>,
    /// The whole command line after the program, instead of `serve --addr 127.0.0.1:0
    /// --db DB --log-level debug` and `args` (`command_line`).
    pub command_line: Option<Vec<String>>,
    /// The working directory (`dir`); the test's own when `None`.
    pub dir: Option<&'a Path>,
    /// Standard error is a pipe that nobody reads (`stderr_unread`): `TestServer::log` is
    /// empty, and the pipe's end is left in `TestServer::child` for the test.
    pub stderr_unread: bool,
}

impl<'a> Launch<'a> {
    pub fn new(db: &'a Path) -> Launch<'a> {
        Launch {
            db: db.to_str().unwrap(),
            args: Vec::new(),
            token: Some(TOKEN),
            env: Vec::new(),
            program: program(),
            command_line: None,
            dir: None,
            stderr_unread: false,
        }
    }

    /// A private database that lives as long as the server: `:memory:` on SQLite, a new
    /// database on PostgreSQL.
    pub fn memory() -> Launch<'static> {
        let db: &'static str = if on_postgres() {
            static N: AtomicU32 = AtomicU32::new(0);
            let name = format!(
                "m_{}_{}",
                std::process::id(),
                N.fetch_add(1, Ordering::Relaxed)
            );
            shared_cluster().database(&name).leak()
        } else {
            ":memory:"
        };
        Launch {
            db,
            args: Vec::new(),
            token: Some(TOKEN),
            env: Vec::new(),
            program: program(),
            command_line: None,
            dir: None,
            stderr_unread: false,
        }
    }

    pub fn arg(mut self, a: &str) -> Self {
        self.args.extend(a.split_whitespace().map(str::to_owned));
        self
    }

    pub fn token(mut self, t: Option<&'a str>) -> Self {
        self.token = t;
        self
    }

    pub fn env(mut self, name: &'a str, value: &'a str) -> Self {
        self.env.push((name, value));
        self
    }

    /// Runs the program with exactly these arguments (such as an init script's).
    pub fn command_line(mut self, args: Vec<String>) -> Self {
        self.command_line = Some(args);
        self
    }

    /// Leaves the server's standard error, a pipe, unread (`TestServer::child.stderr`).
    pub fn stderr_unread(mut self) -> Self {
        self.stderr_unread = true;
        self
    }

    /// Runs the server in this working directory.
    pub fn dir(mut self, dir: &'a Path) -> Self {
        self.dir = Some(dir);
        self
    }

    pub fn start(self) -> TestServer {
        let mut cmd = Command::new(&self.program[0]);
        cmd.args(&self.program[1..]);
        if let Some(dir) = self.dir {
            cmd.current_dir(dir);
        }
        match &self.command_line {
            Some(args) => cmd.args(args),
            None => cmd
                .args([
                    "serve",
                    "--addr",
                    "127.0.0.1:0",
                    "--db",
                    self.db,
                    "--log-level",
                    "debug",
                ])
                .args(&self.args),
        }
        .env_remove("PLANT_STORE_TOKEN")
        .env_remove("GLIBC_TUNABLES")
        .envs(self.env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
        if let Some(t) = self.token {
            cmd.env("PLANT_STORE_TOKEN", t);
        }
        let mut child = cmd.spawn().expect("start plant-store");
        let stderr = Arc::new(Mutex::new(String::new()));
        if !self.stderr_unread {
            read_into(child.stderr.take().unwrap(), stderr.clone());
        }
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let Some(addr) = line.trim().strip_prefix("listening on http://") else {
            // Only to let the stderr reader catch the last lines for the panic message;
            // the test fails either way.
            std::thread::sleep(Duration::from_millis(200));
            panic!(
                "no `listening on` line; stdout {line:?}; stderr:\n{}",
                stderr.lock().unwrap()
            );
        };
        TestServer {
            addr: addr.to_owned(),
            child,
            stderr,
        }
    }
}

/// Reads `from` to its end into `sink`, on a thread of its own.
pub fn read_into(mut from: impl Read + Send + 'static, sink: Arc<Mutex<String>>) {
    std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while let Ok(n) = from.read(&mut buf) {
            if n == 0 {
                break;
            }
            sink.lock()
                .unwrap()
                .push_str(&String::from_utf8_lossy(&buf[..n]));
        }
    });
}

impl TestServer {
    /// A server on a database file (kept by the caller's `TempDir`).
    pub fn start(db: &Path) -> TestServer {
        Launch::new(db).start()
    }

    pub fn memory() -> TestServer {
        Launch::memory().start()
    }

    pub fn log(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// The log once `ready` holds for it (lines reach it in batches, every 100 ms at
    /// most); panics after 5 s.
    #[track_caller]
    pub fn log_when(&self, ready: impl Fn(&str) -> bool) -> String {
        eventually(Duration::from_secs(5), || ready(&self.log()));
        self.log()
    }

    /// Sends `req` on a new connection and reads the whole response.
    #[track_caller]
    pub fn request(&self, req: &Req) -> Resp {
        req.send_to(&self.addr)
            .unwrap_or_else(|e| panic!("no response: {e}; server log:\n{}", self.log()))
    }

    /// `request` of a request built from its parts.
    #[track_caller]
    pub fn send(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: Option<&[u8]>,
    ) -> Resp {
        let req = Req::new(method, path).headers(headers);
        self.request(&match body {
            Some(b) => req.body(b),
            None => req,
        })
    }

    /// Writes raw bytes on a new connection and parses what comes back.
    pub fn raw(&self, bytes: &[u8]) -> Resp {
        exchange(&self.addr, bytes, false)
            .unwrap_or_else(|e| panic!("no response: {e}; server log:\n{}", self.log()))
    }

    pub fn connect(&self) -> TcpStream {
        let s = TcpStream::connect(&self.addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        s
    }

    pub fn get(&self, path: &str) -> Resp {
        self.request(&Req::get(path).token(TOKEN))
    }

    pub fn post(&self, body: &str) -> Resp {
        self.post_as(TOKEN, body)
    }

    pub fn post_as(&self, token: &str, body: &str) -> Resp {
        self.request(&Req::new("POST", "/plants").token(token).json(body))
    }

    pub fn delete(&self, id: &str) -> Resp {
        self.request(&Req::new("DELETE", &format!("/plants/{id}")).token(TOKEN))
    }

    /// Lists all plants of the test token as JSON text.
    pub fn list(&self) -> String {
        let r = self.get("/plants");
        assert_eq!(r.status, 200, "{}", r.text());
        r.text()
    }

    /// The value of a figure of `/metrics` without labels, such as
    /// `plant_store_connections_open`.
    #[track_caller]
    pub fn metric(&self, name: &str) -> f64 {
        let text = self.send("GET", "/metrics", &[], None).text();
        text.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no {name} in /metrics:\n{text}"))
    }

    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    pub fn signal(&self, sig: i32) {
        // SAFETY: kill(2) with our own child's pid.
        unsafe { libc::kill(self.pid(), sig) };
    }

    /// Sends SIGTERM and waits for the exit status.
    pub fn stop(mut self) -> std::process::ExitStatus {
        self.signal(libc::SIGTERM);
        let status = self.child.wait().unwrap();
        std::mem::forget(self);
        status
    }

    /// A value of /proc/PID/status, such as `Threads` or `VmRSS` (kB).
    pub fn proc_status(&self, key: &str) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid())).unwrap();
        let line = status
            .lines()
            .find(|l| l.starts_with(&format!("{key}:")))
            .unwrap();
        line.split_whitespace().nth(1).unwrap().parse().unwrap()
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            eprintln!("--- server log ---\n{}", self.log());
        }
    }
}

/// `n` ordinary requests on new connections, each answered correctly within 2 s.
#[track_caller]
pub fn served_promptly(s: &TestServer, n: usize) {
    for i in 0..n {
        let t = Instant::now();
        let r = if i % 2 == 0 {
            s.send("GET", "/healthz", &[], None)
        } else {
            s.get("/plants?limit=1")
        };
        assert_eq!(r.status, 200, "{}", r.text());
        assert!(
            t.elapsed() < Duration::from_secs(2),
            "request {i} took {:?}",
            t.elapsed()
        );
    }
}

/// SIGKILL to the server at a random moment 0.3 to 1 s from now, while a load runs. Not
/// a stand-in for a state: the kill is to land anywhere in the load.
pub fn kill_at_a_random_moment(s: &TestServer) {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    std::thread::sleep(Duration::from_millis(300 + u64::from(nanos % 700)));
    s.signal(libc::SIGKILL);
}

/// `writers` threads per server, each creating `each` plants with ids of their own as the
/// test token, all at once; returns when every create was answered 200.
pub fn create_through(servers: &[&TestServer], writers: i64, each: i64) {
    let threads: Vec<_> = servers
        .iter()
        .enumerate()
        .flat_map(|(n, s)| {
            (0..writers).map(move |w| {
                let addr = s.addr.clone();
                std::thread::spawn(move || {
                    for i in 0..each {
                        let id = (n as i64 * writers + w) * 1_000_000 + i;
                        let body = format!(r#"{{"id":{id},"name":"p{id}"}}"#);
                        assert_eq!(Req::create(&body).send_to(&addr).unwrap().status, 200);
                    }
                })
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
}
