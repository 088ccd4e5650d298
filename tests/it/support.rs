//! The one door to the system under test: `TestServer` starts the real binary on port 0
//! with a temporary database, reads the `listening on` line, and kills the child on drop.
//! `Resp` is a response read off a raw socket (so tests can also send malformed bytes).
//!
//! The same tests run twice: in the `it` crate on SQLite, and in the `postgres` crate
//! (`tests/postgres.rs`) on PostgreSQL, where `TempDir::db()` and `Launch::memory()` name
//! a fresh database in a throw-away cluster that this process starts (`Cluster`).

// Shared by two test crates (`it`, `postgres`), each using part of it.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

pub const TOKEN: &str = "test-token-0123456789";

/// The binary under test: `PLANT_STORE_BIN` when set (a static build;
/// docs/operating.md, "Running it on a host"), else the one cargo built for this test run.
pub fn bin() -> String {
    std::env::var("PLANT_STORE_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_plant-store").into())
}

/// Whether the binary under test is static (no program interpreter in its ELF program
/// headers): a musl build, which does not use glibc's allocator settings.
pub fn bin_is_static() -> bool {
    const PT_INTERP: u32 = 3;
    let elf = std::fs::read(bin()).unwrap();
    let u16_at = |o: usize| u16::from_le_bytes([elf[o], elf[o + 1]]) as usize;
    let phoff = u64::from_le_bytes(elf[0x20..0x28].try_into().unwrap()) as usize;
    let (size, count) = (u16_at(0x36), u16_at(0x38));
    !(0..count).any(|i| {
        let o = phoff + i * size;
        u32::from_le_bytes(elf[o..o + 4].try_into().unwrap()) == PT_INTERP
    })
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
}

impl<'a> Launch<'a> {
    pub fn new(db: &'a Path) -> Launch<'a> {
        Launch {
            db: db.to_str().unwrap(),
            args: Vec::new(),
            token: Some(TOKEN),
            env: Vec::new(),
            program: vec![bin()],
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
            program: vec![bin()],
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

    /// Runs `binary` under `emulator` (such as `qemu-aarch64`).
    pub fn under(mut self, emulator: &str, binary: &str) -> Self {
        self.program = vec![emulator.to_owned(), binary.to_owned()];
        self
    }

    pub fn start(self) -> TestServer {
        let mut cmd = Command::new(&self.program[0]);
        cmd.args(&self.program[1..])
            .args([
                "serve",
                "--addr",
                "127.0.0.1:0",
                "--db",
                self.db,
                "--log-level",
                "debug",
            ])
            .args(&self.args)
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
        let sink = stderr.clone();
        let mut err = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = err.read(&mut buf) {
                if n == 0 {
                    break;
                }
                sink.lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        });
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let Some(addr) = line.trim().strip_prefix("listening on http://") else {
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
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        loop {
            let log = self.log();
            if ready(&log) {
                return log;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "log never got there:\n{log}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Sends one request on a new connection and reads the whole response.
    pub fn send(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: Option<&[u8]>,
    ) -> Resp {
        let bytes = request_bytes(method, path, headers, body);
        exchange(&self.addr, &bytes, method == "HEAD")
            .unwrap_or_else(|e| panic!("no response: {e}; server log:\n{}", self.log()))
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
        self.send("GET", path, &[("Authorization", &bearer(TOKEN))], None)
    }

    pub fn post(&self, body: &str) -> Resp {
        self.post_as(TOKEN, body)
    }

    pub fn post_as(&self, token: &str, body: &str) -> Resp {
        let auth = bearer(token);
        let h = [
            ("Authorization", auth.as_str()),
            ("Content-Type", "application/json"),
        ];
        self.send("POST", "/plants", &h, Some(body.as_bytes()))
    }

    pub fn delete(&self, id: &str) -> Resp {
        self.send(
            "DELETE",
            &format!("/plants/{id}"),
            &[("Authorization", &bearer(TOKEN))],
            None,
        )
    }

    /// Lists all plants of the test token as JSON text.
    pub fn list(&self) -> String {
        let r = self.get("/plants");
        assert_eq!(r.status, 200, "{}", r.text());
        r.text()
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

/// An HTTP/1.1 request on a connection that closes after it, with a Content-Length when
/// there is a body.
pub fn request_bytes(
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<&[u8]>,
) -> Vec<u8> {
    let mut raw = format!("{method} {path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\n");
    for (k, v) in headers {
        raw.push_str(&format!("{k}: {v}\r\n"));
    }
    if let Some(b) = body {
        raw.push_str(&format!("Content-Length: {}\r\n", b.len()));
    }
    raw.push_str("\r\n");
    let mut bytes = raw.into_bytes();
    bytes.extend_from_slice(body.unwrap_or_default());
    bytes
}

/// Sends `bytes` on a new connection to `addr` and reads one response (no body after a
/// HEAD). An error when the server cannot be reached or does not answer.
pub fn exchange(addr: &str, bytes: &[u8], head: bool) -> std::io::Result<Resp> {
    let mut s = TcpStream::connect(addr)?;
    s.set_read_timeout(Some(Duration::from_secs(20)))?;
    let _ = s.write_all(bytes);
    read_response_to(&mut s, head)
}

/// POSTs a creation body with the test token on a new connection to `addr`; an error
/// when the server cannot be reached or does not answer (it may have been killed).
pub fn create_at(addr: &str, body: &str) -> std::io::Result<Resp> {
    let auth = bearer(TOKEN);
    let h = [
        ("Authorization", auth.as_str()),
        ("Content-Type", "application/json"),
    ];
    exchange(
        addr,
        &request_bytes("POST", "/plants", &h, Some(body.as_bytes())),
        false,
    )
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

/// Runs `plant-store ARGS` to completion: (exit code, stdout, stderr).
pub fn run_cli(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(bin())
        .args(args)
        .env_remove("PLANT_STORE_TOKEN")
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `token add` and the token it printed on its last line.
pub fn add_token(db: &Path, principal: &str, read_only: bool) -> String {
    let mut args = vec!["token", "add", principal, "--db", db.to_str().unwrap()];
    if read_only {
        args.push("--read-only");
    }
    let (code, out, err) = run_cli(&args);
    assert_eq!(code, 0, "token add failed: {err}");
    out.lines().last().unwrap().to_owned()
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

/// Whether this test crate runs the suite on PostgreSQL.
pub fn on_postgres() -> bool {
    crate::POSTGRES
}

/// True, after saying why, when a test holds only for SQLite and the suite runs on
/// PostgreSQL (where its twin, if any, is in the test itself or in `scale_out.rs`).
pub fn sqlite_only(why: &str) -> bool {
    if on_postgres() {
        eprintln!("not on PostgreSQL: {why}");
    }
    on_postgres()
}

/// The cluster this test process shares between its tests, started on first use.
pub fn shared_cluster() -> &'static Cluster {
    static SHARED: std::sync::OnceLock<Cluster> = std::sync::OnceLock::new();
    SHARED.get_or_init(Cluster::start)
}

/// A throw-away PostgreSQL cluster: `initdb` into a temporary directory (as `nobody`
/// when the tests run as root, which PostgreSQL refuses), a free port on 127.0.0.1,
/// trust authentication. A watcher process stops it and removes the directory once this
/// test process has exited, however it exits. `fsync=off`: these tests kill plant-store,
/// never the machine, so what PostgreSQL committed stays in the page cache either way.
pub struct Cluster {
    pub port: u16,
    dir: PathBuf,
    bin: PathBuf,
    created: Mutex<std::collections::HashSet<String>>,
}

impl Cluster {
    pub fn start() -> Cluster {
        let bin = postgres_bin();
        let dir = TempDir::new().keep();
        if unsafe { libc::geteuid() } == 0 {
            let status = Command::new("chown")
                .arg("nobody")
                .arg(&dir)
                .status()
                .unwrap();
            assert!(status.success());
        }
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let cluster = Cluster {
            port,
            dir,
            bin,
            created: Mutex::new(Default::default()),
        };
        let data = cluster.dir.join("data");
        cluster.run_pg(
            "initdb",
            &[
                "-D",
                data.to_str().unwrap(),
                "-U",
                "postgres",
                "-A",
                "trust",
                "-E",
                "UTF8",
                "--locale=C",
                "--no-sync",
            ],
        );
        // Stops the cluster and removes it when this process is gone.
        let stop = format!(
            "while kill -0 {pid} 2>/dev/null; do sleep 0.5; done; {as_user} {ctl} -D {data} stop -m immediate >/dev/null 2>&1; rm -rf {dir}",
            pid = std::process::id(),
            as_user = if unsafe { libc::geteuid() } == 0 {
                "runuser -u nobody --"
            } else {
                ""
            },
            ctl = cluster.bin.join("pg_ctl").display(),
            data = data.display(),
            dir = cluster.dir.display(),
        );
        // Never waited for: it outlives this process on purpose.
        #[allow(clippy::zombie_processes)]
        {
            use std::os::unix::process::CommandExt;
            Command::new("sh")
                .args(["-c", &stop])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .process_group(0)
                .spawn()
                .unwrap();
        }
        cluster.up();
        cluster
    }

    /// Starts the stopped cluster again on its port.
    pub fn up(&self) {
        let options = format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=500",
            self.port,
            self.dir.display()
        );
        let data = self.dir.join("data");
        let log = self.dir.join("log");
        self.run_pg(
            "pg_ctl",
            &[
                "-D",
                data.to_str().unwrap(),
                "-o",
                &options,
                "-l",
                log.to_str().unwrap(),
                "-w",
                "start",
            ],
        );
    }

    /// Stops the cluster: `fast` ends every session at once; `immediate` is a crash.
    pub fn down(&self, mode: &str) {
        let data = self.dir.join("data");
        self.run_pg(
            "pg_ctl",
            &["-D", data.to_str().unwrap(), "-m", mode, "-w", "stop"],
        );
    }

    fn run_pg(&self, program: &str, args: &[&str]) {
        let path = self.bin.join(program);
        let mut cmd = if unsafe { libc::geteuid() } == 0 {
            let mut c = Command::new("runuser");
            c.args(["-u", "nobody", "--"]).arg(&path);
            c
        } else {
            Command::new(&path)
        };
        let out = cmd.args(args).current_dir("/").output().unwrap();
        assert!(
            out.status.success(),
            "{program} {args:?}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// The URL of database `name`, created on first use.
    pub fn database(&self, name: &str) -> String {
        let mut created = self.created.lock().unwrap();
        if created.insert(name.to_owned()) {
            self.psql("postgres", &format!("CREATE DATABASE {name}"));
        }
        self.url(name)
    }

    pub fn url(&self, name: &str) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{name}", self.port)
    }

    /// Runs SQL in database `name` with psql; its output, unaligned and without headers.
    pub fn psql(&self, name: &str, sql: &str) -> String {
        let out = Command::new(self.bin.join("psql"))
            .args(["-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1"])
            .args(["-h", "127.0.0.1", "-U", "postgres", "-d", name])
            .arg("-p")
            .arg(self.port.to_string())
            .args(["-c", sql])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "psql {sql}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }
}

/// Runs SQL in the database at `url` (one of `shared_cluster()`'s) and returns psql's
/// output.
pub fn psql(url: &Path, sql: &str) -> String {
    let url = url.to_str().unwrap();
    let name = url.rsplit('/').next().unwrap();
    shared_cluster().psql(name, sql)
}

/// The directory of PostgreSQL's server programs: `PG_BIN`, else the newest
/// `/usr/lib/postgresql/*/bin` (Debian's `postgresql` package).
fn postgres_bin() -> PathBuf {
    if let Ok(dir) = std::env::var("PG_BIN") {
        return PathBuf::from(dir);
    }
    let mut found: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .map(|d| {
            d.flatten()
                .filter_map(|e| {
                    let v = e.file_name().to_str()?.parse().ok()?;
                    let bin = e.path().join("bin");
                    bin.join("initdb").exists().then_some((v, bin))
                })
                .collect()
        })
        .unwrap_or_default();
    found.sort();
    found
        .pop()
        .expect(
            "no PostgreSQL server programs: install Debian's `postgresql` package (.ci/run does)",
        )
        .1
}

/// Polls `ready` every 20 ms until it holds; panics after `within`.
#[track_caller]
pub fn eventually(within: Duration, mut ready: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + within;
    while !ready() {
        assert!(
            std::time::Instant::now() < deadline,
            "not so within {within:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
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
