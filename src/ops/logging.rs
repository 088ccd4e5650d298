//! The binary's log: simplelog's text lines (`TIME [LEVEL] message`, its `WriteLogger`)
//! or, with `--log-format json`, one JSON object per line, on standard error. A thread
//! that logs formats its line itself, into a buffer of its own (`Line`, simplelog's
//! output), and hands it to `log_queue`'s writer thread; no request and no exit waits for
//! the output (a pipe nobody reads, a full disk, a stalled journald): lines the output
//! cannot take are dropped and counted (`lines_dropped`, on `/metrics`). The panic hook
//! writes its line at once, without the queue and without simplelog (`write_now`), in
//! simplelog's shape. The library installs no logger: only the binary calls `init`.

use super::log_queue::{LOG_STOP_WAIT, Queue};
use super::stdio::{Output, PIPE_BUF};
use log::{Level, LevelFilter, Log, Metadata, Record};
use simplelog::WriteLogger;
use std::cell::RefCell;
use std::io::{self, Write};
use std::sync::OnceLock;

/// How log lines are written (`--log-format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// simplelog's line: the time (RFC 3339, UTC, to the nanosecond, trailing zeros
    /// left out), `[LEVEL]`, the message.
    Text,
    /// One JSON object per line: `time`, `level`, `message`, and an access line's
    /// `method`, `path`, `status`, `bytes`, `duration_us` and `principal`.
    Json,
}

/// The logger `init` installs.
struct Logger {
    level: LevelFilter,
    /// simplelog's logger of text lines, writing into the calling thread's `Line`;
    /// `None` for JSON lines.
    text: Option<Box<WriteLogger<Line>>>,
    queue: Queue,
}

static LOGGER: OnceLock<Logger> = OnceLock::new();

thread_local! {
    /// The line this thread is formatting, before it goes to the queue.
    static LINE: RefCell<Vec<u8>> = RefCell::new(Vec::with_capacity(512));
}

/// simplelog's output: the calling thread's line (`LINE`), which `Logger::log` then hands
/// to the queue whole. simplelog writes a line in pieces, under its own lock; nothing here
/// waits for standard error.
struct Line;

impl Write for Line {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        LINE.with_borrow_mut(|line| line.extend_from_slice(bytes));
        Ok(bytes.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

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
        let text = (format == Format::Text).then(|| text_logger(level));
        Logger {
            level,
            text,
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

/// simplelog's logger of text lines at `level`: RFC 3339 time, no thread, no target, this
/// program's records only.
fn text_logger(level: LevelFilter) -> Box<WriteLogger<Line>> {
    let config = simplelog::ConfigBuilder::new()
        .set_time_format_rfc3339()
        .set_thread_level(LevelFilter::Off)
        .set_target_level(LevelFilter::Off)
        .add_filter_allow_str("plant_store")
        .add_filter_allow_str("access")
        .build();
    WriteLogger::new(level, config, Line)
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
        let urgent = record.level() <= Level::Warn;
        match &self.text {
            Some(text) => {
                LINE.with_borrow_mut(Vec::clear);
                text.log(record);
                LINE.with_borrow_mut(|line| {
                    self.queue.push(line, urgent);
                    line.clear();
                });
            }
            None => {
                let mut line = json_line(record);
                line.push(b'\n');
                self.queue.push(&line, urgent);
            }
        }
    }

    /// Writes out what waits, for at most `LOG_STOP_WAIT` (at exit).
    fn flush(&self) {
        self.queue.flush(LOG_STOP_WAIT);
    }
}

/// Writes one line at `level` to standard error at once, in the log's format, without
/// the queue, without simplelog (whose lock this thread may hold: a panic while it formats)
/// and without waiting: lost when the output cannot take it now (the panic hook's line).
/// At most `PIPE_BUF` bytes, which a pipe takes whole or not at all.
pub fn write_now(level: Level, message: std::fmt::Arguments<'_>) {
    let mut line = Vec::with_capacity(256);
    match LOGGER.get().map_or(Format::Text, Logger::format) {
        Format::Text => text_line(level, message, &mut line),
        Format::Json => {
            line = json_line(&record(level, message));
            line.push(b'\n');
        }
    }
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

impl Logger {
    fn format(&self) -> Format {
        match self.text {
            Some(_) => Format::Text,
            None => Format::Json,
        }
    }
}

/// The line that says how many lines were dropped (the queue's `Report`), in the log's
/// format (the log's writer thread makes it).
fn report(dropped: u64, line: &mut Vec<u8>) {
    let message =
        format_args!("{dropped} log lines dropped: the log's output did not take them in time");
    let record = record(Level::Warn, message);
    match LOGGER.get().and_then(|l| l.text.as_ref()) {
        Some(text) => {
            LINE.with_borrow_mut(Vec::clear);
            text.log(&record);
            LINE.with_borrow_mut(|formatted| line.append(formatted));
        }
        None => {
            line.extend_from_slice(&json_line(&record));
            line.push(b'\n');
        }
    }
}

/// A record of this program's at `level`.
fn record<'a>(level: Level, message: std::fmt::Arguments<'a>) -> Record<'a> {
    Record::builder()
        .args(message)
        .level(level)
        .target("plant_store")
        .build()
}

/// A text line as simplelog writes it (`TIME [LEVEL] message`, the time as `time`'s RFC
/// 3339: nanoseconds without their trailing zeros, none when whole), made here.
fn text_line(level: Level, message: std::fmt::Arguments<'_>, line: &mut Vec<u8>) {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    text_line_at(now, level, message, line);
}

/// `text_line` at `now` (since the Unix epoch).
fn text_line_at(
    now: std::time::Duration,
    level: Level,
    message: std::fmt::Arguments<'_>,
    line: &mut Vec<u8>,
) {
    let whole = super::clock::utc(now.as_secs() as i64);
    line.extend_from_slice(whole.trim_end_matches('Z').as_bytes());
    let nanos = now.subsec_nanos();
    if nanos != 0 {
        let digits = format!(".{nanos:09}");
        line.extend_from_slice(digits.trim_end_matches('0').as_bytes());
    }
    let _ = writeln!(line, "Z [{level}] {message}");
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

    /// A time as simplelog writes it: `YYYY-MM-DDTHH:MM:SS`, then a fraction of up to 9
    /// digits without trailing zeros (none when the second is whole), then `Z`; within
    /// the seconds read before and after.
    fn check_time(time: &str, before: &str, after: &str) {
        let (whole, fraction) = time.split_at(19);
        assert!(before[..19] <= *whole && *whole <= after[..19], "{time}");
        let fraction = fraction
            .strip_suffix('Z')
            .unwrap_or_else(|| panic!("{time}"));
        if !fraction.is_empty() {
            let digits = fraction
                .strip_prefix('.')
                .unwrap_or_else(|| panic!("{time}"));
            assert!(
                (1..=9).contains(&digits.len())
                    && digits.bytes().all(|b| b.is_ascii_digit())
                    && !digits.ends_with('0'),
                "{time}"
            );
        }
    }

    /// Both ways a text line is made, simplelog's and the panic hook's, have one shape:
    /// `2026-11-28T16:16:05.649621146Z [INFO] message`, byte for byte but the time.
    #[test]
    fn text_lines_are_simplelogs_time_level_and_message_also_the_hooks() {
        let message = "GET /plants 200 14 85us alice";
        let now = || super::super::clock::utc(super::super::clock::system_now());
        let before = now();
        let logger = text_logger(LevelFilter::Info);
        LINE.with_borrow_mut(Vec::clear);
        logger.log(
            &Record::builder()
                .args(format_args!("{message}"))
                .level(Level::Info)
                .target("access")
                .build(),
        );
        let simplelogs = String::from_utf8(LINE.with_borrow_mut(std::mem::take)).unwrap();
        let mut hooks = Vec::new();
        text_line(Level::Info, format_args!("{message}"), &mut hooks);
        let hooks = String::from_utf8(hooks).unwrap();
        let after = now();
        for line in [&simplelogs, &hooks] {
            let (time, rest) = line.split_once(' ').unwrap();
            assert_eq!(rest, format!("[INFO] {message}\n"), "{line:?}");
            check_time(time, &before, &after);
        }
        // The fraction as `time` writes it: no trailing zeros, none for a whole second.
        for (nanos, time) in [
            (649_621_146, "2026-11-28T16:16:05.649621146Z"),
            (649_000_000, "2026-11-28T16:16:05.649Z"),
            (500_000_000, "2026-11-28T16:16:05.5Z"),
            (10, "2026-11-28T16:16:05.00000001Z"),
            (0, "2026-11-28T16:16:05Z"),
        ] {
            let mut line = Vec::new();
            let at = std::time::Duration::new(1_795_882_565, nanos);
            text_line_at(at, Level::Error, format_args!("panic"), &mut line);
            assert_eq!(
                String::from_utf8(line).unwrap(),
                format!("{time} [ERROR] panic\n")
            );
        }
        // Another program's record is left out.
        logger.log(
            &Record::builder()
                .args(format_args!("closed"))
                .level(Level::Error)
                .target("tiny_http")
                .build(),
        );
        assert!(LINE.with_borrow(Vec::is_empty));
    }
}
