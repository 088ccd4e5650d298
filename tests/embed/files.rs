//! Servers on a database file in one process: POSIX locks belong to the process, so a
//! second server (or an in-process `token` command) on the same file must never close a
//! descriptor of it while the first runs, and a stopped server leaves no descriptor open.

use crate::client::{get, request};
use crate::{TOKEN, alone, census, shared};
use plant_store::Server;
use std::path::{Path, PathBuf};

/// A directory of its own, removed when dropped.
struct Dir(PathBuf);

impl Dir {
    fn new(name: &str) -> Dir {
        let dir =
            std::env::temp_dir().join(format!("plant-store-embed-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Dir(dir)
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn start_on(db: &Path) -> plant_store::Running {
    Server::builder()
        .db(db.to_str().unwrap())
        .token(TOKEN)
        .option("workers", "2")
        .start()
        .expect("the server starts")
}

fn create(server: &plant_store::Running, id: u32) {
    let body = format!(r#"{{"id":{id},"name":"p{id}"}}"#);
    let r = request(server.addr(), "POST", "/plants", Some(TOKEN), Some(&body));
    assert_eq!(r.status, 200, "{}", r.body);
}

/// Where SQLite's shared lock lies in a database file (`SHARED_FIRST`, `SHARED_SIZE` in
/// its os.h): every connection in WAL mode holds a read lock there while open, and a
/// connection that can take a write lock there believes it is the last one, so it may
/// checkpoint and delete the `-wal` of the others.
const SHARED_FIRST: i64 = 0x4000_0000 + 2;
const SHARED_SIZE: i64 = 510;
/// The variable naming the file that `probe_sqlite_shared_lock` looks at.
const PROBE_DB: &str = "PLANT_STORE_EMBED_PROBE_DB";

/// Whether this process still holds SQLite's shared lock on `db`: asked of another
/// process (this test binary again, running `probe_sqlite_shared_lock`), since the kernel
/// reports only other processes' locks.
fn this_process_holds_its_lock(db: &Path) -> bool {
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--ignored",
            "--exact",
            "files::probe_sqlite_shared_lock",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(PROBE_DB, db)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{said}");
    match (said.contains("PROBE held"), said.contains("PROBE free")) {
        (true, false) => true,
        (false, true) => false,
        _ => panic!("no answer from the probe: {said}"),
    }
}

/// Run in a child process by `this_process_holds_its_lock` (nothing to do otherwise).
#[test]
#[ignore = "a child process of the lock test"]
fn probe_sqlite_shared_lock() {
    use std::os::fd::AsRawFd;
    let Some(db) = std::env::var_os(PROBE_DB) else {
        return;
    };
    let file = std::fs::File::open(db).unwrap();
    // SAFETY: a zeroed `flock` is a valid value; F_GETLK only fills it in.
    let mut lock: libc::flock = unsafe { std::mem::zeroed() };
    lock.l_type = libc::F_WRLCK as _;
    lock.l_whence = libc::SEEK_SET as _;
    lock.l_start = SHARED_FIRST as _;
    lock.l_len = SHARED_SIZE as _;
    // SAFETY: a valid descriptor and a valid `flock`.
    let r = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_GETLK, &mut lock) };
    assert_eq!(r, 0, "{}", std::io::Error::last_os_error());
    let free = i32::from(lock.l_type) == libc::F_UNLCK;
    println!("PROBE {}", if free { "free" } else { "held" });
}

#[test]
fn a_second_server_or_command_on_the_same_file_leaves_the_first_one_s_locks() {
    let _g = shared();
    let dir = Dir::new("locks");
    let db = dir.0.join("live.db");
    let a = start_on(&db);
    create(&a, 1);
    assert!(this_process_holds_its_lock(&db), "A holds its lock");
    // B reads the header of the file A has open, and closes its connections at stop.
    let b = start_on(&db);
    assert!(this_process_holds_its_lock(&db), "with B started");
    b.stop().unwrap();
    assert!(this_process_holds_its_lock(&db), "with B stopped");
    create(&a, 2);
    // A `token` command in this process, on the file A has open.
    let args: Vec<String> = ["token", "add", "in-process", "--db", db.to_str().unwrap()]
        .map(String::from)
        .into();
    assert!(plant_store::binary::run(&args).is_ok());
    assert!(this_process_holds_its_lock(&db), "after the command");
    create(&a, 3);
    a.stop().unwrap();
    // Every write A acknowledged is there.
    let again = start_on(&db);
    let listed = get(again.addr(), "/plants", Some(TOKEN)).body;
    assert_eq!(listed, r#"[{"name":"p1"},{"name":"p2"},{"name":"p3"}]"#);
    again.stop().unwrap();
}

#[test]
fn fifty_servers_started_and_stopped_on_a_file_leave_no_descriptor_open() {
    let _g = alone();
    let dir = Dir::new("descriptors");
    let db = dir.0.join("live.db");
    // One first, so that the file exists and what a first server sets up is counted.
    start_on(&db).stop().unwrap();
    let before = census();
    for n in 0..50 {
        let server = start_on(&db);
        if n % 10 == 0 {
            create(&server, n);
        }
        server.stop().unwrap();
    }
    assert_eq!(
        census(),
        before,
        "(threads, descriptors, listening ports) before and after"
    );
}

/// A file of its own, in one process too (docs/testing.md): test control refuses a file
/// another server of this process serves, and a reset is 409 while one does.
#[test]
fn test_control_needs_its_file_to_itself_in_this_process_too() {
    let _g = shared();
    let dir = Dir::new("own");
    let db = dir.0.join("live.db");
    let control = "embedded-control-token";
    let controlled = || {
        Server::builder()
            .db(db.to_str().unwrap())
            .control_token(control)
            .option("workers", "2")
            .start()
    };
    let plain = start_on(&db);
    match controlled() {
        Err(plant_store::Error::Option(e)) => assert!(
            e.contains("test control needs the database file to itself")
                && e.contains("another server of this process has it open"),
            "{e}"
        ),
        other => panic!("not refused: {other:?}"),
    }
    plain.stop().unwrap();
    let tested = controlled().expect("alone, it starts");
    // Without test control, the file it marked is refused, naming the builder's method
    // (never a flag or a variable), unless accepted.
    let refused = Server::builder().db(db.to_str().unwrap()).start();
    assert!(
        matches!(&refused, Err(plant_store::Error::Option(e))
            if e.ends_with("start with allow_test_file") && !e.contains("PLANT_STORE_")),
        "{refused:?}"
    );
    let accepted = Server::builder()
        .db(db.to_str().unwrap())
        .allow_test_file()
        .start()
        .expect("accepted");
    let reset = || {
        request(
            tested.addr(),
            "POST",
            "/_control/reset",
            Some(control),
            None,
        )
    };
    let refused = reset();
    assert_eq!(refused.status, 409, "{}", refused.body);
    assert!(
        refused
            .body
            .contains("another server of this process has it open"),
        "{}",
        refused.body
    );
    accepted.stop().unwrap();
    assert_eq!(reset().status, 204);
    tested.stop().unwrap();
}

/// The library takes its port first, as the binary does: a port in use makes no file.
#[test]
fn a_start_refused_for_its_port_makes_no_file() {
    let _g = shared();
    let dir = Dir::new("port");
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let e = Server::builder()
        .addr(taken.local_addr().unwrap().to_string())
        .db(dir.0.join("p.db").to_str().unwrap())
        .start()
        .unwrap_err();
    assert!(
        matches!(&e, plant_store::Error::Start(m) if m.contains("cannot listen")),
        "{e}"
    );
    assert_eq!(std::fs::read_dir(&dir.0).unwrap().count(), 0);
}
