//! The log records of this test process, captured (a host's logger, as an embedder
//! would install one): installed once, by the first test that asks, at every level.

use std::sync::{Mutex, Once};

static LINES: Mutex<Vec<String>> = Mutex::new(Vec::new());

struct Capture;

impl log::Log for Capture {
    fn enabled(&self, _: &log::Metadata) -> bool {
        true
    }

    fn log(&self, record: &log::Record) {
        let line = format!("{} {}: {}", record.level(), record.target(), record.args());
        LINES.lock().unwrap_or_else(|e| e.into_inner()).push(line);
    }

    fn flush(&self) {}
}

/// From now on, every record of this process is kept.
pub fn capture() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        log::set_logger(&Capture).expect("no other logger in this test process");
        log::set_max_level(log::LevelFilter::Trace);
    });
}

/// The records kept so far.
pub fn lines() -> Vec<String> {
    LINES.lock().unwrap_or_else(|e| e.into_inner()).clone()
}
