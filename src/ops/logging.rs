//! The binary's log: text lines (`TIME [LEVEL] message`) or, with `--log-format json`,
//! one JSON object per line, on standard error. A thread that logs formats its line
//! itself and hands it to `log_queue`'s writer thread; no request and no exit waits for
//! the output (a pipe nobody reads, a full disk, a stalled journald): lines the output
//! cannot take are dropped and counted (`lines_dropped`, on `/metrics`). The panic hook
//! writes its line at once, without the queue (`write_now`). The library installs no
//! logger: only the binary calls `init`.

use super::log_queue::{LOG_STOP_WAIT, Queue};
use super::stdio::{Output, PIPE_BUF};
use log::{Level, LevelFilter, Log, Metadata, Record};
use std::cell::RefCell;
use std::io::Write;
use std::sync::OnceLock;

/// How log lines are written (`--log-format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Time (RFC 3339, UTC, nanoseconds), `[LEVEL]`, message.
    Text,
    /// One JSON object per line: `time`, `level`, `message`, and an access line's
    /// `method`, `path`, `status`, `bytes`, `duration_us` and `principal`.
    Json,
}

/// The logger `init` installs.
struct Logger {
    level: LevelFilter,
    format: Format,
    queue: Queue,
}

static LOGGER: OnceLock<Logger> = OnceLock::new();

/// Whether a record's target is this program's. Dependencies' own records are left out:
/// tiny_http's (a line per closed connection), and the PostgreSQL client's, whose debug
/// lines carry statement parameters such as a token's hash.
fn ours(target: &str) -> bool {
    target.starts_with("plant_store") || target == "access"
}

/// Starts logging at `level` in `format`, this program's records only (`ours`), and the
/// log's writer thread.
pub fn init(level: LevelFilter, format: Format) {
    let mut fresh = false;
    let logger = LOGGER.get_or_init(|| {
        fresh = true;
        Logger {
            level,
            format,
            queue: Queue::new(Output::stderr(), report),
        }
    });
    if fresh && log::set_logger(logger).is_ok() {
        log::set_max_level(level);
        let _ = std::thread::Builder::new()
            .name("log".into())
            .stack_size(64 * 1024)
            .spawn(|| logger.queue.run_writer());
    }
}

/// Log lines the binary's log dropped because its output did not take them
/// (`plant_store_log_lines_dropped_total`); 0 when its logger is not installed (the
/// library's host logs its own way).
pub fn lines_dropped() -> u64 {
    LOGGER.get().map_or(0, |l| l.queue.dropped())
}

impl Log for Logger {
    fn enabled(&self, metadata: &Metadata<'_>) -> bool {
        metadata.level() <= self.level && ours(metadata.target())
    }

    fn log(&self, record: &Record<'_>) {
        if !self.enabled(record.metadata()) {
            return;
        }
        thread_local! {
            static LINE: RefCell<Vec<u8>> = RefCell::new(Vec::with_capacity(512));
        }
        let urgent = record.level() <= Level::Warn;
        LINE.with(|line| match line.try_borrow_mut() {
            Ok(mut line) => {
                line.clear();
                format_line(self.format, record, &mut line);
                self.queue.push(&line, urgent);
            }
            // A line logged while this thread formats another.
            Err(_) => {
                let mut line = Vec::new();
                format_line(self.format, record, &mut line);
                self.queue.push(&line, urgent);
            }
        });
    }

    /// Writes out what waits, for at most `LOG_STOP_WAIT` (at exit).
    fn flush(&self) {
        self.queue.flush(LOG_STOP_WAIT);
    }
}

/// Writes one line at `level` to standard error at once, in the log's format, without
/// the queue and without waiting: lost when the output cannot take it now (the panic
/// hook's line). At most `PIPE_BUF` bytes, which a pipe takes whole or not at all.
pub fn write_now(level: Level, message: std::fmt::Arguments<'_>) {
    let mut line = Vec::with_capacity(256);
    message_line(level, message, &mut line);
    if line.len() > PIPE_BUF {
        line.truncate(PIPE_BUF - 4);
        line.extend_from_slice("…\n".as_bytes());
    }
    let _ = match LOGGER.get() {
        Some(logger) => logger.queue.output().try_write(&line),
        None => Output::stderr().try_write(&line),
    };
}

/// Writes the lines waiting for the log's writer now, without waiting: what standard
/// error does not take at once is lost (a build whose panics abort, before it ends).
pub fn write_waiting_now() {
    if let Some(logger) = LOGGER.get() {
        logger.queue.write_waiting_now();
    }
}

/// The line that says how many lines were dropped (the queue's `Report`).
fn report(dropped: u64, line: &mut Vec<u8>) {
    message_line(
        Level::Warn,
        format_args!("{dropped} log lines dropped: the log's output did not take them in time"),
        line,
    );
}

/// A line of this program's at `level`, in the log's format, appended to `line`.
fn message_line(level: Level, message: std::fmt::Arguments<'_>, line: &mut Vec<u8>) {
    let format = LOGGER.get().map_or(Format::Text, |l| l.format);
    let record = Record::builder()
        .args(message)
        .level(level)
        .target("plant_store")
        .build();
    format_line(format, &record, line);
}

/// `record` as one line in `format`, newline included, appended to `line`.
fn format_line(format: Format, record: &Record<'_>, line: &mut Vec<u8>) {
    match format {
        Format::Text => {
            write_time(line);
            let _ = writeln!(line, " [{}] {}", record.level(), record.args());
        }
        Format::Json => {
            line.extend_from_slice(&json_line(record));
            line.push(b'\n');
        }
    }
}

/// Now, as `YYYY-MM-DDTHH:MM:SS.NNNNNNNNNZ`; the part to the second is made once a second
/// per thread.
fn write_time(line: &mut Vec<u8>) {
    thread_local! {
        static SECOND: RefCell<(i64, String)> = const { RefCell::new((i64::MIN, String::new())) };
    }
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let secs = now.as_secs() as i64;
    SECOND.with(|second| {
        let mut second = second.borrow_mut();
        if second.0 != secs {
            let whole = super::clock::utc(secs);
            *second = (secs, whole.trim_end_matches('Z').to_owned());
        }
        line.extend_from_slice(second.1.as_bytes());
    });
    let _ = write!(line, ".{:09}Z", now.subsec_nanos());
}

/// `{"time":…,"level":…,"message":…}` and the record's key-values as members.
fn json_line(record: &Record<'_>) -> Vec<u8> {
    struct Fields(serde_json::Map<String, serde_json::Value>);
    impl<'kvs> log::kv::VisitSource<'kvs> for Fields {
        fn visit_pair(
            &mut self,
            key: log::kv::Key<'kvs>,
            value: log::kv::Value<'kvs>,
        ) -> Result<(), log::kv::Error> {
            let v = if let Some(n) = value.to_u64() {
                n.into()
            } else if let Some(s) = value.to_borrowed_str() {
                s.into()
            } else {
                // An absent `Option` (a request with no known principal) shows as `None`.
                match value.to_string() {
                    none if none == "None" => serde_json::Value::Null,
                    other => other.into(),
                }
            };
            // `fault` (test control's) is on the lines of faulted requests only.
            if !(v.is_null() && key.as_str() == "fault") {
                self.0.insert(key.as_str().to_owned(), v);
            }
            Ok(())
        }
    }
    let mut fields = Fields(serde_json::Map::new());
    fields
        .0
        .insert("time".into(), crate::ops::clock::utc_millis_now().into());
    fields
        .0
        .insert("level".into(), record.level().as_str().into());
    fields
        .0
        .insert("message".into(), record.args().to_string().into());
    let _ = record.key_values().visit(&mut fields);
    serde_json::to_vec(&fields.0).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_lines_carry_the_message_and_the_access_fields() {
        let who: Option<&str> = Some("alice");
        let nobody: Option<&str> = None;
        for (principal, want) in [
            (who, serde_json::json!("alice")),
            (nobody, serde_json::Value::Null),
        ] {
            let kvs: [(&str, log::kv::Value); 3] = [
                ("status", 200u16.into()),
                ("path", "/plants?limit=…".into()),
                ("principal", log::kv::ToValue::to_value(&principal)),
            ];
            let record = Record::builder()
                .args(format_args!("GET /plants"))
                .level(log::Level::Info)
                .target("access")
                .key_values(&kvs)
                .build();
            let v: serde_json::Value = serde_json::from_slice(&json_line(&record)).unwrap();
            assert_eq!(v["message"], "GET /plants");
            assert_eq!(v["level"], "INFO");
            assert_eq!(v["status"], 200);
            assert_eq!(v["path"], "/plants?limit=…");
            assert_eq!(v["principal"], want);
            assert!(v["time"].as_str().unwrap().ends_with('Z'));
        }
    }

    #[test]
    fn text_lines_are_the_time_the_level_and_the_message() {
        let record = Record::builder()
            .args(format_args!("GET /plants 200 14 85us alice"))
            .level(log::Level::Info)
            .target("access")
            .build();
        let now = || super::super::clock::utc(super::super::clock::system_now());
        let before = now();
        let mut line = Vec::new();
        format_line(Format::Text, &record, &mut line);
        let after = now();
        let line = String::from_utf8(line).unwrap();
        let (time, rest) = line.split_once(' ').unwrap();
        assert_eq!(rest, "[INFO] GET /plants 200 14 85us alice\n");
        // 2026-11-28T16:16:05.649621146Z
        assert_eq!(time.len(), 30, "{time}");
        assert!(time.ends_with('Z') && time.as_bytes()[19] == b'.', "{time}");
        assert!(
            before[..19] <= time[..19] && time[..19] <= after[..19],
            "{time}"
        );
    }
}
