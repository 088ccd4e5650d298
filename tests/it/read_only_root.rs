//! A read-only root (docs/device.md, "A read-only root"): the server writes nowhere but
//! its database's directory: no file in its working directory, none in `TMPDIR`, no
//! temporary file of SQLite's anywhere (`temp_store=MEMORY`).

use crate::support::*;
use std::collections::BTreeSet;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// Plants made, each about 540 bytes of list JSON: the list (about 1 MB) is several times
/// a connection's page cache, so a sort or a temporary table that spills would spill.
const PLANTS: i64 = 2_000;

/// What a directory holds, by name.
fn names(dir: &Path) -> BTreeSet<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect()
}

/// The server's descriptors open for writing on a path outside `data` (and `/dev`),
/// deleted files included, read from /proc/PID/fd and fdinfo every millisecond until
/// `stop`. A temporary file of SQLite's is unlinked as soon as it is opened, so only
/// this sees one; the directory listings see what is left behind.
fn watch(pid: i32, data: PathBuf, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<Vec<String>> {
    std::thread::spawn(move || {
        let mut seen = BTreeSet::new();
        while !stop.load(Ordering::Relaxed) {
            let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
                break;
            };
            for fd in fds.flatten() {
                let Ok(target) = std::fs::read_link(fd.path()) else {
                    continue;
                };
                let shown = target.to_string_lossy().into_owned();
                if !shown.starts_with('/')
                    || target.starts_with(&data)
                    || shown.starts_with("/dev/")
                {
                    continue;
                }
                let info = std::fs::read_to_string(format!(
                    "/proc/{pid}/fdinfo/{}",
                    fd.file_name().to_string_lossy()
                ))
                .unwrap_or_default();
                let flags = info
                    .lines()
                    .find_map(|l| l.strip_prefix("flags:"))
                    .and_then(|f| i32::from_str_radix(f.trim(), 8).ok())
                    .unwrap_or(0);
                if flags & libc::O_ACCMODE != libc::O_RDONLY || shown.ends_with("(deleted)") {
                    seen.insert(shown);
                }
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        seen.into_iter().collect()
    })
}

/// Creates `PLANTS` plants with 256-character names and tags, from 4 writers at once.
fn create_long_plants(s: &TestServer) {
    let long = "x".repeat(256);
    let writers: Vec<_> = (0..4)
        .map(|w| {
            let (addr, long) = (s.addr.clone(), long.clone());
            std::thread::spawn(move || {
                for id in (w..PLANTS).step_by(4) {
                    let name = format!("{id:0>256}");
                    let body = format!(r#"{{"id":{id},"name":"{name}","tag":"{long}"}}"#);
                    let r = Req::create(&body).send_to(&addr).unwrap();
                    assert_eq!(r.status, 200, "{}", r.text());
                }
            })
        })
        .collect();
    for w in writers {
        w.join().unwrap();
    }
}

/// The whole list, checked: `PLANTS` plants in id order.
fn check_list(s: &TestServer) {
    let list = s.list();
    let plants: Vec<serde_json::Value> = serde_json::from_str(&list).unwrap();
    assert_eq!(plants.len(), PLANTS as usize);
    assert_eq!(plants[0]["name"], format!("{:0>256}", 0));
    assert_eq!(
        plants[PLANTS as usize - 1]["name"],
        format!("{:0>256}", PLANTS - 1)
    );
}

#[test]
fn the_server_writes_only_in_its_database_directory() {
    if sqlite_only("the database's files are PostgreSQL's") {
        return;
    }
    let root = TempDir::new();
    let (cwd, tmp, data) = (root.0.join("cwd"), root.0.join("tmp"), root.0.join("data"));
    for dir in [&cwd, &tmp, &data] {
        std::fs::create_dir(dir).unwrap();
    }
    for dir in [&cwd, &tmp] {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o555)).unwrap();
    }
    // Root writes into a 0555 directory all the same (as this suite runs on some
    // machines): then the listings and the watch below are the whole check.
    let db = data.join("plants.db");
    let launch = || {
        Launch::new(&db)
            .dir(&cwd)
            .env("TMPDIR", tmp.to_str().unwrap())
            .env("SQLITE_TMPDIR", tmp.to_str().unwrap())
            .start()
    };
    let mut written = Vec::new();
    for round in 0..2 {
        let s = launch();
        let stop = Arc::new(AtomicBool::new(false));
        let watcher = watch(s.pid(), data.clone(), stop.clone());
        if round == 0 {
            create_long_plants(&s);
            let r = s.get("/events?limit=1000");
            assert_eq!(r.status, 200, "{}", r.text());
        }
        check_list(&s);
        stop.store(true, Ordering::Relaxed);
        written.extend(watcher.join().unwrap());
        assert!(s.stop().success());
        assert_eq!(names(&cwd), BTreeSet::new(), "the working directory");
        assert_eq!(names(&tmp), BTreeSet::new(), "TMPDIR");
        let own: BTreeSet<String> = ["plants.db", "plants.db-wal", "plants.db-shm"]
            .map(String::from)
            .into();
        let found = names(&data);
        assert!(
            found.contains("plants.db") && found.is_subset(&own),
            "the database's directory: {found:?}"
        );
    }
    let none: Vec<String> = Vec::new();
    assert_eq!(written, none, "files open for writing outside {data:?}");
}
