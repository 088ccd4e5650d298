//! What `serve` is given: `ServeConfig`, every setting of a server, and their defaults
//! (the option table, `table.rs`, sets them from flags and variables).

pub(crate) use crate::config::values::MAX_TIMEOUT_SECS;
use crate::config::values::{default_workers, parse_addr};
use crate::ops::secret::Secret;
use crate::store::Location;
use log::LevelFilter;
use std::net::SocketAddr;
use std::time::Duration;

pub const DEFAULT_ADDR: &str = "127.0.0.1:8080";
pub const DEFAULT_DB: &str = "plants.db";
/// A request that waited this long for a worker is answered 503 instead of served.
pub const DEFAULT_QUEUE_TIMEOUT: Duration = Duration::from_secs(5);
/// How long SIGTERM/SIGINT/SIGHUP waits for requests in flight before exiting anyway.
pub const DEFAULT_DRAIN_TIMEOUT: Duration = Duration::from_secs(10);
/// A connection whose next request head is not complete this long after the previous
/// answer (or after it opened) is closed: a total deadline, not one per read.
pub const DEFAULT_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// A request body must arrive whole within this long, or the answer is 408.
pub const DEFAULT_BODY_TIMEOUT: Duration = Duration::from_secs(10);
/// The default of `--write-timeout`.
pub const DEFAULT_WRITE_TIMEOUT: Duration = Duration::from_secs(10);
/// The default of `--event-retention`: events older than this are removed.
pub const DEFAULT_EVENT_RETENTION: Duration = Duration::from_secs(7 * 86_400);
/// Most workers `--workers` accepts.
pub const MAX_WORKERS: usize = 1024;
/// The longest `--event-retention`, `--webhook-hold` and `--expires-in`: 100 years (36,500 days).
pub const MAX_DURATION_SECS: u64 = 36_500 * 86_400;

impl Default for ServeConfig {
    fn default() -> ServeConfig {
        ServeConfig {
            addr: parse_addr(DEFAULT_ADDR, "--addr").expect("the default address parses"),
            db: Location::parse(DEFAULT_DB),
            db_pool: crate::store::DEFAULT_DB_POOL,
            workers: default_workers(),
            max_connections: crate::http::accept::DEFAULT_MAX_CONNECTIONS,
            max_streams: crate::http::feed::DEFAULT_MAX_STREAMS,
            max_streams_per_principal: crate::http::feed::DEFAULT_MAX_STREAMS_PER_PRINCIPAL,
            queue_timeout: DEFAULT_QUEUE_TIMEOUT,
            drain_timeout: DEFAULT_DRAIN_TIMEOUT,
            read_timeout: DEFAULT_READ_TIMEOUT,
            body_timeout: DEFAULT_BODY_TIMEOUT,
            write_timeout: DEFAULT_WRITE_TIMEOUT,
            event_retention: DEFAULT_EVENT_RETENTION,
            webhook_hold: crate::store::retention::DEFAULT_HOLD,
            webhooks: crate::config::webhook::defaults(),
            rate_limit: None,
            log_level: LevelFilter::Info,
            log_format: crate::ops::logging::Format::Text,
            exit_on_stdin_close: false,
            token: None,
            test_control: false,
            allow_test_file: false,
            named: Default::default(),
            control_token: None,
            seed: None,
            journal_size: crate::api::control::DEFAULT_JOURNAL_SIZE,
            journal_bytes: crate::api::control::DEFAULT_JOURNAL_BYTES,
            test_seed: None,
        }
    }
}

#[derive(Debug, Clone)]
pub struct ServeConfig {
    pub addr: SocketAddr,
    /// Resolved once: a `:memory:` location names one database of this process.
    pub db: Location,
    pub db_pool: usize,
    pub workers: usize,
    pub max_connections: usize,
    pub max_streams: usize,
    pub max_streams_per_principal: usize,
    pub queue_timeout: Duration,
    pub drain_timeout: Duration,
    pub read_timeout: Duration,
    pub body_timeout: Duration,
    pub write_timeout: Duration,
    pub event_retention: Duration,
    /// How long past the retention an active webhook endpoint may hold an event.
    pub webhook_hold: Duration,
    /// `--webhook-*` but `--webhook-hold` (nothing without the `webhooks` feature).
    pub webhooks: crate::config::webhook::Config,
    pub rate_limit: Option<crate::api::ratelimit::RateLimit>,
    pub log_level: LevelFilter,
    pub log_format: crate::ops::logging::Format,
    /// `--exit-on-stdin-close`: the binary's `main` stops the server once standard input
    /// is closed; a server started by the library reads no standard input.
    pub exit_on_stdin_close: bool,
    pub token: Option<Secret>,
    /// `--test-control`: `/_control/` behind `control_token` (docs/testing.md).
    pub test_control: bool,
    /// Serve a file test control has written, without test control (`--allow-test-file`).
    pub allow_test_file: bool,
    /// How a refusal of the database names `allow_test_file` and the control token
    /// (`Words`).
    pub named: crate::store::terms::Named,
    /// `PLANT_STORE_CONTROL_TOKEN`, checked once the options are read.
    pub control_token: Option<Secret>,
    /// `--seed FILE`: loaded before the server listens.
    pub seed: Option<std::path::PathBuf>,
    /// `--journal-size`: requests test control's journal keeps.
    pub journal_size: usize,
    /// `--journal-bytes`: what the journal's entries may cost in all.
    pub journal_bytes: usize,
    /// `--test-seed N`: ids and minted tokens from generators seeded with N.
    pub test_seed: Option<u64>,
}

/// How the settings that errors name together are called where they were given: the
/// command line says its flags and variables, the builder its methods.
pub struct Words {
    /// The bearer token of principal `default`.
    pub token: &'static str,
    /// Test control's token.
    pub control_token: &'static str,
    pub test_control: &'static str,
    pub seed: &'static str,
    pub rate_limit: &'static str,
    /// What accepts a file test control has written.
    pub allow_test_file: &'static str,
}
