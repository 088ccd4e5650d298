//! Test-only faults of the store (the `fault-injection` feature, never in a release
//! build), armed through the routes `GET /__fault/NAME` (`api/routes/fault.rs`).

use std::sync::atomic::{AtomicBool, Ordering};

/// The next COMMIT that ends a transaction that changed something succeeds, then reports
/// an I/O error, as when the sync of the write-ahead log fails after the data reached it.
static SYNC_FAILS_AFTER: AtomicBool = AtomicBool::new(false);
/// The next COMMIT that ends a transaction that changed something is rolled back instead,
/// and reports an I/O error: the sync failed and the frames written do not count.
static SYNC_FAILS_BEFORE: AtomicBool = AtomicBool::new(false);
/// Every transaction that changed something fails at its COMMIT as on a full disk (a
/// transaction that changed nothing writes no page, and commits).
static DISK_FULL: AtomicBool = AtomicBool::new(false);
/// Held reads (`hold-read`) go on while this is set.
static HOLD_READS: AtomicBool = AtomicBool::new(false);
/// An event stream that has checked its position waits, before it is handed to the
/// streams' thread, while this is set (`hold-stream-checks` to `release-stream-checks`).
static HOLD_STREAM_CHECKS: AtomicBool = AtomicBool::new(false);
/// A long list waits before reading each page after its first while this is set
/// (`hold-list-pages` to `release-list-pages`).
static HOLD_LIST_PAGES: AtomicBool = AtomicBool::new(false);
/// A journal listing waits before it is built while this is set (`hold-listings` to
/// `release-listings`).
static HOLD_LISTINGS: AtomicBool = AtomicBool::new(false);
/// A held stream check, list page or listing waits this long at most.
const HOLD_AT_MOST: std::time::Duration = std::time::Duration::from_secs(30);

/// Arms (or disarms) a fault by name; an unknown name is an error.
pub fn arm(name: &str) -> Result<(), String> {
    let (flag, on) = match name {
        "sync-fails-after" => (&SYNC_FAILS_AFTER, true),
        "sync-fails-before" => (&SYNC_FAILS_BEFORE, true),
        "disk-full" => (&DISK_FULL, true),
        "disk-ok" => (&DISK_FULL, false),
        "hold-reads" => (&HOLD_READS, true),
        "release-reads" => (&HOLD_READS, false),
        "hold-stream-checks" => (&HOLD_STREAM_CHECKS, true),
        "release-stream-checks" => (&HOLD_STREAM_CHECKS, false),
        "hold-list-pages" => (&HOLD_LIST_PAGES, true),
        "release-list-pages" => (&HOLD_LIST_PAGES, false),
        "hold-listings" => (&HOLD_LISTINGS, true),
        "release-listings" => (&HOLD_LISTINGS, false),
        _ => return Err(format!("no such fault: {name}")),
    };
    flag.store(on, Ordering::SeqCst);
    log::info!("fault injection: {name}");
    Ok(())
}

/// What a COMMIT of a transaction that changed something must do instead of succeeding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommitFault {
    /// Commit, then report an I/O error.
    SyncFailsAfter,
    /// Roll back, and report an I/O error.
    SyncFailsBefore,
    /// Roll back, and report a full disk.
    DiskFull,
}

/// The fault for the COMMIT of a transaction that changed something (each `sync-fails-*`
/// fires once).
pub fn commit_fault() -> Option<CommitFault> {
    if SYNC_FAILS_AFTER.swap(false, Ordering::SeqCst) {
        Some(CommitFault::SyncFailsAfter)
    } else if SYNC_FAILS_BEFORE.swap(false, Ordering::SeqCst) {
        Some(CommitFault::SyncFailsBefore)
    } else if DISK_FULL.load(Ordering::SeqCst) {
        Some(CommitFault::DiskFull)
    } else {
        None
    }
}

/// Whether held reads go on.
pub fn reads_held() -> bool {
    HOLD_READS.load(Ordering::SeqCst)
}

/// Waits while stream checks are held (at most `HOLD_AT_MOST`); said in the log.
pub fn hold_stream_check() {
    hold(&HOLD_STREAM_CHECKS, "an event stream after its check");
}

/// Waits while a list's later pages are held (at most `HOLD_AT_MOST`); said in the log.
pub fn hold_list_page() {
    hold(&HOLD_LIST_PAGES, "a list's next page");
}

/// Waits while journal listings are held (at most `HOLD_AT_MOST`); said in the log.
pub fn hold_listing() {
    hold(&HOLD_LISTINGS, "a journal listing");
}

fn hold(flag: &AtomicBool, what: &str) {
    if !flag.load(Ordering::SeqCst) {
        return;
    }
    log::info!("fault injection: holding {what}");
    let started = std::time::Instant::now();
    while flag.load(Ordering::SeqCst) && started.elapsed() < HOLD_AT_MOST {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// The variable that names the step of a compaction (`store/sqlite/compact.rs`) at which
/// it stops, for a test to kill the process there.
pub const COMPACT_STOP_VAR: &str = "PLANT_STORE_FAULT_COMPACT";

/// Stops the thread for good (the process is to be killed) when `COMPACT_STOP_VAR` names
/// `step`; said in the log first.
pub fn pause_compaction(step: &str) {
    if std::env::var(COMPACT_STOP_VAR).is_ok_and(|s| s == step) {
        log::warn!("fault injection: compaction stopped at {step}");
        log::logger().flush();
        loop {
            std::thread::park();
        }
    }
}
