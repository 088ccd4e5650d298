//! The log: simplelog's format, on standard error, written in batches. One `write` per
//! line cost about a tenth of the time of a small GET (the access log has a line per
//! request), so lines collect in a buffer that is written out whole when it fills, at
//! least every `LOG_FLUSH_EVERY`, at exit, and at once after a warning or an error.

use log::{LevelFilter, Log, Metadata, Record};
use simplelog::WriteLogger;
use std::io::{self, Write};
use std::time::Duration;

/// Longest time a log line waits in the buffer.
pub const LOG_FLUSH_EVERY: Duration = Duration::from_millis(100);
/// Buffered log text that triggers a write, at the end of a line.
pub const LOG_BUFFER_BYTES: usize = 32 * 1024;

/// Starts logging at `level`. tiny_http's own messages (a line per closed connection) are
/// left out.
pub fn init(level: LevelFilter) {
    let config = simplelog::ConfigBuilder::new()
        .set_time_format_rfc3339()
        .set_thread_level(LevelFilter::Off)
        .set_target_level(LevelFilter::Off)
        .add_filter_ignore_str("tiny_http")
        .build();
    let logger = Batched(WriteLogger::new(level, config, Lines::new(io::stderr())));
    if log::set_boxed_logger(Box::new(logger)).is_ok() {
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
