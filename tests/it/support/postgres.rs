//! A throw-away PostgreSQL cluster for the suite's run on PostgreSQL.

use super::TempDir;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;

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
    /// Settings besides the suite's own, such as TLS's.
    settings: String,
    dir: PathBuf,
    bin: PathBuf,
    created: Mutex<std::collections::HashSet<String>>,
}

impl Cluster {
    pub fn start() -> Cluster {
        Cluster::start_with_tls(None)
    }

    /// A cluster that also takes TLS (`ssl=on`) with this certificate and key (PEM files),
    /// besides plain connections.
    pub fn start_with_tls(tls: Option<(&Path, &Path)>) -> Cluster {
        let bin = postgres_bin();
        let dir = TempDir::new().keep();
        to_server_user(&[&dir]);
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut settings = String::new();
        if let Some((cert, key)) = tls {
            // PostgreSQL reads the key only when its owner alone may read it.
            let (crt, pem) = (dir.join("server.crt"), dir.join("server.key"));
            std::fs::copy(cert, &crt).unwrap();
            std::fs::copy(key, &pem).unwrap();
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&pem, std::fs::Permissions::from_mode(0o600)).unwrap();
            to_server_user(&[&crt, &pem]);
            settings = format!(
                " -c ssl=on -c ssl_cert_file={} -c ssl_key_file={}",
                crt.display(),
                pem.display()
            );
        }
        let cluster = Cluster {
            port,
            settings,
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
            "-p {} -k {} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=500{}",
            self.port,
            self.dir.display(),
            self.settings
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

    /// The cluster's log, as written so far.
    pub fn log(&self) -> String {
        String::from_utf8_lossy(&std::fs::read(self.dir.join("log")).unwrap()).into_owned()
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

/// Gives files to `nobody`, the user the cluster runs as when the tests run as root.
fn to_server_user(paths: &[&Path]) {
    if unsafe { libc::geteuid() } == 0 {
        let status = Command::new("chown")
            .arg("nobody")
            .args(paths)
            .status()
            .unwrap();
        assert!(status.success());
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
