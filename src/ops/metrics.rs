//! The service's figures for `GET /metrics`, in the Prometheus text exposition format
//! 0.0.4. Counters and histograms are atomics bumped where things happen (an answer's
//! access line, the connection loop, the queue, a commit) and read on a scrape; nothing
//! here locks or allocates per request.
//!
//! Aggregated only: the labels are a route pattern, a method and a status class. Never a
//! principal, a token, a plant id or a path as sent.

use std::fmt::Write;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering::Relaxed};

/// Request duration bounds, in microseconds (0.1 ms to 10 s).
const DURATION_BOUNDS_US: &[u64] = &[
    100, 250, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000, 500_000,
    1_000_000, 2_500_000, 5_000_000, 10_000_000,
];
/// Commit group size bounds (changes per transaction); `MAX_GROUP_COMMIT` is 512.
const GROUP_BOUNDS: &[u64] = &[1, 2, 4, 8, 16, 32, 64, 128, 256, 512];
/// Most buckets a histogram may have, besides `+Inf`.
const MAX_BOUNDS: usize = 16;

/// Routes counted apart: the router (`api::routes::Route`) names each request's, and
/// gives their patterns, as labels, to `render`.
pub const ROUTES: usize = 7;
const METHODS: [&str; 5] = ["GET", "HEAD", "POST", "DELETE", "other"];
const CLASSES: [&str; 5] = ["1xx", "2xx", "3xx", "4xx", "5xx"];

/// A count of events, each counted into the first bucket whose bound it does not exceed
/// (or `+Inf`), and their sum. Counts are kept per bucket and made cumulative on a scrape.
pub struct Histogram {
    bounds: &'static [u64],
    counts: [AtomicU64; MAX_BOUNDS + 1],
    sum: AtomicU64,
}

impl Histogram {
    const fn new(bounds: &'static [u64]) -> Histogram {
        assert!(bounds.len() <= MAX_BOUNDS);
        Histogram {
            bounds,
            counts: [const { AtomicU64::new(0) }; MAX_BOUNDS + 1],
            sum: AtomicU64::new(0),
        }
    }

    pub fn observe(&self, value: u64) {
        let bucket = self.bounds.partition_point(|&bound| bound < value);
        self.counts[bucket].fetch_add(1, Relaxed);
        self.sum.fetch_add(value, Relaxed);
    }

    fn count(&self) -> u64 {
        self.counts.iter().map(|c| c.load(Relaxed)).sum()
    }

    /// The `_bucket`, `_sum` and `_count` lines; `labels` ends in a comma when not empty.
    /// Values are in the recorded unit divided by `per_unit` (a division, so 100 µs is
    /// written 0.0001, not 0.00009999999999999999).
    fn render(&self, out: &mut String, name: &str, labels: &str, per_unit: f64) {
        let mut cumulative = 0;
        for (i, count) in self.counts[..=self.bounds.len()].iter().enumerate() {
            cumulative += count.load(Relaxed);
            let _ = match self.bounds.get(i) {
                Some(&bound) => writeln!(
                    out,
                    "{name}_bucket{{{labels}le=\"{}\"}} {cumulative}",
                    bound as f64 / per_unit
                ),
                None => writeln!(out, "{name}_bucket{{{labels}le=\"+Inf\"}} {cumulative}"),
            };
        }
        let labels = match labels.trim_end_matches(',') {
            "" => String::new(),
            some => format!("{{{some}}}"),
        };
        let sum = self.sum.load(Relaxed) as f64 / per_unit;
        let _ = writeln!(out, "{name}_sum{labels} {sum}");
        let _ = writeln!(out, "{name}_count{labels} {cumulative}");
    }
}

/// A value that goes up and down.
pub struct Gauge(AtomicI64);

impl Gauge {
    pub fn add(&self, n: i64) {
        self.0.fetch_add(n, Relaxed);
    }
    pub fn set(&self, n: i64) {
        self.0.store(n, Relaxed);
    }
    fn get(&self) -> i64 {
        self.0.load(Relaxed)
    }
}

/// Every figure but the database's size, which is read on a scrape.
pub struct Metrics {
    requests: [[[AtomicU64; CLASSES.len()]; METHODS.len()]; ROUTES],
    durations: [Histogram; ROUTES],
    pub in_flight: Gauge,
    pub connections_open: Gauge,
    pub connections_max: Gauge,
    pub connections_refused: AtomicU64,
    pub queue_depth: Gauge,
    pub commit_groups: Histogram,
    pub commit_seconds: Histogram,
    pub commit_failures: AtomicU64,
    /// Events appended to the change feed (committed creates and deletes).
    pub events_appended: AtomicU64,
    /// Open event streams.
    pub streams_open: Gauge,
    /// From an event's commit to its being written to a stream, in microseconds.
    pub event_lag: Histogram,
    /// Webhook attempts by outcome, in `WEBHOOK_OUTCOMES` order.
    pub webhook_attempts: [AtomicU64; WEBHOOK_OUTCOMES.len()],
    /// Webhook endpoints, active and disabled.
    pub webhooks_active: Gauge,
    pub webhooks_disabled: Gauge,
    /// Events committed but not yet delivered, over every active endpoint.
    pub webhook_pending: Gauge,
    /// Age of the oldest of them, in milliseconds (0: none).
    pub webhook_oldest_pending_ms: Gauge,
    /// When the process started, in milliseconds since the Unix epoch.
    pub start_time_ms: Gauge,
}

/// The outcomes of a webhook attempt, as `/metrics` labels them: a 2xx; anything else that
/// is retried (or ends the schedule); a 410.
pub const WEBHOOK_OUTCOMES: [&str; 3] = ["delivered", "failed", "gone"];

impl Default for Metrics {
    fn default() -> Metrics {
        Metrics::new()
    }
}

impl Metrics {
    /// A server's figures, all zero: each server has its own (nothing here is
    /// process-wide).
    pub const fn new() -> Metrics {
        Metrics {
            requests: [const { [const { [const { AtomicU64::new(0) }; 5] }; 5] }; ROUTES],
            durations: [const { Histogram::new(DURATION_BOUNDS_US) }; ROUTES],
            in_flight: Gauge(AtomicI64::new(0)),
            connections_open: Gauge(AtomicI64::new(0)),
            connections_max: Gauge(AtomicI64::new(0)),
            connections_refused: AtomicU64::new(0),
            queue_depth: Gauge(AtomicI64::new(0)),
            commit_groups: Histogram::new(GROUP_BOUNDS),
            commit_seconds: Histogram::new(DURATION_BOUNDS_US),
            commit_failures: AtomicU64::new(0),
            events_appended: AtomicU64::new(0),
            streams_open: Gauge(AtomicI64::new(0)),
            event_lag: Histogram::new(DURATION_BOUNDS_US),
            webhook_attempts: [const { AtomicU64::new(0) }; WEBHOOK_OUTCOMES.len()],
            webhooks_active: Gauge(AtomicI64::new(0)),
            webhooks_disabled: Gauge(AtomicI64::new(0)),
            webhook_pending: Gauge(AtomicI64::new(0)),
            webhook_oldest_pending_ms: Gauge(AtomicI64::new(0)),
            start_time_ms: Gauge(AtomicI64::new(0)),
        }
    }

    /// An answered request: its route's place (below `ROUTES`), method, status and time
    /// from head to answer.
    pub fn request(&self, route: usize, method: &str, status: u16, micros: u64) {
        let r = route.min(ROUTES - 1);
        let m = METHODS
            .iter()
            .position(|&x| x == method)
            .unwrap_or(METHODS.len() - 1);
        let c = usize::from(status / 100).clamp(1, CLASSES.len()) - 1;
        self.requests[r][m][c].fetch_add(1, Relaxed);
        self.durations[r].observe(micros);
    }

    /// The exposition: every figure (requests labelled with the routes' `patterns`), with
    /// the database's size when it has a file.
    pub fn render(&self, patterns: &[&str; ROUTES], database: Option<DatabaseSize>) -> String {
        let mut out = String::with_capacity(8 * 1024);
        let o = &mut out;
        help(
            o,
            "plant_store_http_requests_total",
            "counter",
            "Requests answered, by route pattern, method and status class.",
        );
        for (r, pattern) in patterns.iter().enumerate() {
            for (m, method) in METHODS.iter().enumerate() {
                for (c, class) in CLASSES.iter().enumerate() {
                    let n = self.requests[r][m][c].load(Relaxed);
                    if n > 0 {
                        let _ = writeln!(
                            o,
                            "plant_store_http_requests_total{{route=\"{pattern}\",method=\"{method}\",code=\"{class}\"}} {n}",
                        );
                    }
                }
            }
        }
        let name = "plant_store_http_request_duration_seconds";
        help(
            o,
            name,
            "histogram",
            "Time from a request's head to its answer handed to the socket, by route pattern.",
        );
        for (r, pattern) in patterns.iter().enumerate() {
            if self.durations[r].count() > 0 {
                let labels = format!("route=\"{pattern}\",");
                self.durations[r].render(o, name, &labels, 1e6);
            }
        }
        gauge(
            o,
            "plant_store_http_requests_in_flight",
            "Requests read and not yet answered.",
            self.in_flight.get(),
        );
        gauge(
            o,
            "plant_store_connections_open",
            "Open client connections.",
            self.connections_open.get(),
        );
        gauge(
            o,
            "plant_store_connections_max",
            "The cap on open connections (--max-connections).",
            self.connections_max.get(),
        );
        counter(
            o,
            "plant_store_connections_refused_total",
            "Connections answered 503 and closed because the cap was reached.",
            self.connections_refused.load(Relaxed),
        );
        gauge(
            o,
            "plant_store_queue_depth",
            "Requests waiting for a worker.",
            self.queue_depth.get(),
        );
        histogram(
            o,
            "plant_store_commit_group_size",
            "Changes committed per transaction (group commit).",
            &self.commit_groups,
            1.0,
        );
        histogram(
            o,
            "plant_store_commit_duration_seconds",
            "Time to commit a group, its fsync included.",
            &self.commit_seconds,
            1e6,
        );
        counter(
            o,
            "plant_store_commit_failures_total",
            "Transactions that failed; their changes were refused.",
            self.commit_failures.load(Relaxed),
        );
        counter(
            o,
            "plant_store_events_appended_total",
            "Events appended to the change feed by this instance (committed creates and deletes).",
            self.events_appended.load(Relaxed),
        );
        gauge(
            o,
            "plant_store_event_streams_open",
            "Open event streams (GET /events as text/event-stream).",
            self.streams_open.get(),
        );
        histogram(
            o,
            "plant_store_event_stream_lag_seconds",
            "Time from an event's commit to its being handed to an open stream's socket.",
            &self.event_lag,
            1e6,
        );
        let name = "plant_store_webhook_attempts_total";
        help(
            o,
            name,
            "counter",
            "Webhook delivery attempts by this instance, by outcome: delivered (2xx), failed (retried, or the schedule used up), gone (410).",
        );
        for (outcome, n) in WEBHOOK_OUTCOMES.iter().zip(&self.webhook_attempts) {
            let _ = writeln!(o, "{name}{{outcome=\"{outcome}\"}} {}", n.load(Relaxed));
        }
        let name = "plant_store_webhook_endpoints";
        help(o, name, "gauge", "Webhook endpoints, by state.");
        for (state, n) in [
            ("active", &self.webhooks_active),
            ("disabled", &self.webhooks_disabled),
        ] {
            let _ = writeln!(o, "{name}{{state=\"{state}\"}} {}", n.get());
        }
        gauge(
            o,
            "plant_store_webhook_pending_events",
            "Events committed and not yet delivered, summed over the active webhook endpoints.",
            self.webhook_pending.get(),
        );
        let name = "plant_store_webhook_oldest_pending_seconds";
        help(
            o,
            name,
            "gauge",
            "Age of the oldest event an active webhook endpoint has still to get (0: none).",
        );
        let _ = writeln!(
            o,
            "{name} {}",
            self.webhook_oldest_pending_ms.get() as f64 / 1e3
        );
        if let Some(size) = database {
            gauge(
                o,
                "plant_store_database_size_bytes",
                "Size of the database file.",
                size.main as i64,
            );
            gauge(
                o,
                "plant_store_database_wal_size_bytes",
                "Size of the database's write-ahead log file.",
                size.wal as i64,
            );
            if let Some(written) = process_write_bytes() {
                counter(
                    o,
                    "plant_store_storage_bytes_written_total",
                    "Bytes the process caused to be written to storage since it started \
                     (write_bytes of /proc/self/io: each page it dirtied, each time; the \
                     database, its write-ahead log and checkpoints, and any other file the \
                     process writes).",
                    written,
                );
            }
        }
        counter(
            o,
            "plant_store_log_lines_dropped_total",
            "Log lines the binary dropped because its log's output (standard error) did not take them in time; 0 in a library host.",
            crate::ops::logging::lines_dropped(),
        );
        let name = "process_start_time_seconds";
        help(
            o,
            name,
            "gauge",
            "Start time of the process since the Unix epoch, in seconds.",
        );
        let _ = writeln!(o, "{name} {}", self.start_time_ms.get() as f64 / 1e3);
        out
    }
}

/// What the process caused to be written to storage since it started: `write_bytes` of
/// `/proc/self/io` (the kernel counts each page-cache page the process dirtied, each time it
/// dirtied it, so a page synced and written again counts again); `None` where the file is
/// missing or unreadable.
pub fn process_write_bytes() -> Option<u64> {
    let io = std::fs::read_to_string("/proc/self/io").ok()?;
    io.lines()
        .find_map(|l| l.strip_prefix("write_bytes:"))?
        .trim()
        .parse()
        .ok()
}

/// The database's files, in bytes.
#[derive(Debug, Clone, Copy)]
pub struct DatabaseSize {
    pub main: u64,
    pub wal: u64,
}

fn help(out: &mut String, name: &str, kind: &str, text: &str) {
    let _ = writeln!(out, "# HELP {name} {text}\n# TYPE {name} {kind}");
}

fn gauge(out: &mut String, name: &str, text: &str, value: i64) {
    help(out, name, "gauge", text);
    let _ = writeln!(out, "{name} {value}");
}

fn counter(out: &mut String, name: &str, text: &str, value: u64) {
    help(out, name, "counter", text);
    let _ = writeln!(out, "{name} {value}");
}

/// A histogram without labels, in its recorded unit divided by `per_unit`.
fn histogram(out: &mut String, name: &str, text: &str, h: &Histogram, per_unit: f64) {
    help(out, name, "histogram", text);
    h.render(out, name, "", per_unit);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_histogram_counts_into_the_first_bound_not_exceeded_and_is_cumulative() {
        let h = Histogram::new(&[1, 2, 4]);
        for v in [0, 1, 2, 3, 9] {
            h.observe(v);
        }
        let mut out = String::new();
        h.render(&mut out, "x", "a=\"b\",", 1.0);
        assert_eq!(
            out,
            "x_bucket{a=\"b\",le=\"1\"} 2\nx_bucket{a=\"b\",le=\"2\"} 3\n\
             x_bucket{a=\"b\",le=\"4\"} 4\nx_bucket{a=\"b\",le=\"+Inf\"} 5\n\
             x_sum{a=\"b\"} 15\nx_count{a=\"b\"} 5\n"
        );
    }

    #[test]
    fn requests_are_counted_by_route_method_and_class() {
        let m = Metrics::new();
        m.request(4, "DELETE", 204, 300);
        m.request(4, "DELETE", 204, 700);
        m.request(6, "PATCH", 404, 50);
        m.request(3, "GET", 999, 50);
        let patterns = ["a", "b", "c", "/plants", "/plants/{id}", "/events", "other"];
        let text = m.render(&patterns, None);
        assert!(text.contains(
            "plant_store_http_requests_total{route=\"/plants/{id}\",method=\"DELETE\",code=\"2xx\"} 2\n"
        ));
        assert!(text.contains(
            "plant_store_http_requests_total{route=\"other\",method=\"other\",code=\"4xx\"} 1\n"
        ));
        assert!(
            text.contains("code=\"5xx\"} 1\n"),
            "an odd status counts as its class"
        );
        assert!(text.contains(
            "plant_store_http_request_duration_seconds_bucket{route=\"/plants/{id}\",le=\"0.0005\"} 1\n"
        ));
        assert!(text.contains(
            "plant_store_http_request_duration_seconds_sum{route=\"/plants/{id}\"} 0.001\n"
        ));
        assert!(
            text.contains(
                "plant_store_http_request_duration_seconds_bucket{route=\"/plants/{id}\",le=\"0.0001\"} 0\n"
            ),
            "bounds are written as the decimals they are"
        );
        assert!(!text.contains("plant_store_database_size_bytes"));
    }
}
