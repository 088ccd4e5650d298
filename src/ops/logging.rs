//! The log: simplelog's text lines (or, with `--log-format json`, one JSON object per
//! line), on standard error, written in batches. One `write` per
//! line cost about a tenth of the time of a small GET (the access log has a line per
//! request), so lines collect in a buffer that is written out whole when it fills, at
//! least every `LOG_FLUSH_EVERY`, at exit, and at once after a warning or an error.

use log::{LevelFilter, Log, Metadata, Record};
use simplelog::WriteLogger;
use std::io::{self, Write};
use std::sync::Mutex;
use std::time::Duration;

/// How log lines are written (`--log-format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// simplelog's line: time, level, message.
    Text,
    /// One JSON object per line: `time`, `level`, `message`, and an access line's
    /// `method`, `path`, `status`, `bytes`, `duration_us` and `principal`.
    Json,
}

/// Longest time a log line waits in the buffer.
pub const LOG_FLUSH_EVERY: Duration = Duration::from_millis(100);
/// Buffered log text that triggers a write, at the end of a line.
pub const LOG_BUFFER_BYTES: usize = 32 * 1024;

/// Whether a record's target is this program's. Dependencies' own records are left out:
/// tiny_http's (a line per closed connection), and the PostgreSQL client's, whose debug
/// lines carry statement parameters such as a token's hash.
fn ours(target: &str) -> bool {
    target.starts_with("plant_store") || target == "access"
}

/// Starts logging at `level` in `format`, this program's records only (`ours`).
pub fn init(level: LevelFilter, format: Format) {
    let logger: Box<dyn Log> = match format {
        Format::Text => {
            let config = simplelog::ConfigBuilder::new()
                .set_time_format_rfc3339()
                .set_thread_level(LevelFilter::Off)
                .set_target_level(LevelFilter::Off)
                .add_filter_allow_str("plant_store")
                .add_filter_allow_str("access")
                .build();
            Box::new(Batched(WriteLogger::new(
                level,
                config,
                Lines::new(io::stderr()),
            )))
        }
        Format::Json => Box::new(Json {
            level,
            out: Mutex::new(Lines::new(io::stderr())),
        }),
    };
    if log::set_boxed_logger(logger).is_ok() {
        log::set_max_level(level);
        let _ = std::thread::Builder::new()
            .name("log".into())
            .stack_size(64 * 1024)
            .spawn(|| {
                loop {
                    std::thread::sleep(LOG_FLUSH_EVERY);
                    log::logger().flush();
                }
            });
    }
}

/// simplelog's logger, flushed after every warning and error.
struct Batched(Box<WriteLogger<Lines<io::Stderr>>>);

impl Log for Batched {
    fn enabled(&self, metadata: &Metadata<'_>) -> bool {
        self.0.enabled(metadata)
    }

    fn log(&self, record: &Record<'_>) {
        self.0.log(record);
        if record.level() <= log::Level::Warn {
            self.0.flush();
        }
    }

    fn flush(&self) {
        self.0.flush();
    }
}

/// One JSON object per line, flushed after every warning and error.
struct Json {
    level: LevelFilter,
    out: Mutex<Lines<io::Stderr>>,
}

impl Log for Json {
    fn enabled(&self, metadata: &Metadata<'_>) -> bool {
        metadata.level() <= self.level && ours(metadata.target())
    }

    fn log(&self, record: &Record<'_>) {
        if !self.enabled(record.metadata()) {
            return;
        }
        let mut line = json_line(record);
        line.push(b'\n');
        let mut out = self.out.lock().unwrap_or_else(|e| e.into_inner());
        let _ = out.write_all(&line);
        if record.level() <= log::Level::Warn {
            let _ = out.flush();
        }
    }

    fn flush(&self) {
        let _ = self.out.lock().unwrap_or_else(|e| e.into_inner()).flush();
    }
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

/// A buffered writer whose writes to `out` carry whole lines only.
struct Lines<W: Write> {
    out: W,
    buf: Vec<u8>,
}

impl<W: Write> Lines<W> {
    fn new(out: W) -> Self {
        Lines {
            out,
            buf: Vec::with_capacity(LOG_BUFFER_BYTES + 1024),
        }
    }
}

impl<W: Write> Write for Lines<W> {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        self.buf.extend_from_slice(data);
        if self.buf.len() >= LOG_BUFFER_BYTES && self.buf.ends_with(b"\n") {
            self.flush()?;
        }
        Ok(data.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        // What cannot be written (standard error closed) is dropped, not kept.
        let written = self.out.write_all(&self.buf);
        self.buf.clear();
        written
    }
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
    fn lines_are_written_whole_and_in_batches() {
        let mut lines = Lines::new(Vec::new());
        let line = ("x".repeat(99) + "\n").into_bytes();
        let mut sent = 0;
        while sent + line.len() < LOG_BUFFER_BYTES {
            // simplelog writes a line in pieces.
            lines.write_all(&line[..40]).unwrap();
            lines.write_all(&line[40..]).unwrap();
            sent += line.len();
        }
        assert!(
            lines.out.is_empty(),
            "nothing written before the buffer fills"
        );
        lines.write_all(&line[..40]).unwrap();
        assert!(lines.out.is_empty(), "never half a line");
        lines.write_all(&line[40..]).unwrap();
        sent += line.len();
        assert_eq!(lines.out.len(), sent, "written once full, at a line end");
        lines.write_all(&line).unwrap();
        lines.flush().unwrap();
        assert_eq!(lines.out.len(), sent + line.len());
        assert!(lines.out.ends_with(b"\n") && lines.buf.is_empty());
    }
}
