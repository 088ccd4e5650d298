//! A PostgreSQL connection: its settings from the URL with this service's defaults, its
//! prepared statements, and the migrations run under an advisory lock.

use crate::store::postgres::tls;
use crate::store::schema::{due, migrations, schema_version};
use crate::store::seam::{StoreError, StoreResult};
use postgres::{Client, Config, Row, Statement};
use std::collections::HashMap;
use std::time::Duration;
use tokio_postgres_rustls::MakeRustlsConnect;

/// The migrations in PostgreSQL's dialect.
pub const SCHEMA: &str = include_str!("schema.sql");
/// How long connecting may take, unless the URL says (`connect_timeout`).
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Data sent and not acknowledged for this long breaks the connection (a host that
/// vanished without closing it), unless the URL says (`tcp_user_timeout`).
const TCP_USER_TIMEOUT: Duration = Duration::from_secs(10);
/// Set on every connection around the URL's own `options` (the last setting of a name
/// wins): the URL may change the statement timeout, never turn synchronous commit off.
const SESSION_DEFAULTS: &str = "-c statement_timeout=10s";
const SESSION_REQUIRED: &str = "-c synchronous_commit=on";
/// The advisory lock the migrations run under ("plants" in ASCII).
const MIGRATION_LOCK: i64 = 0x0000_706c_616e_7473;

/// TCP keepalive on every connection (unless the URL sets it): idle time before the
/// first probe, between probes, and unanswered probes before the connection breaks.
pub const KEEPALIVE_IDLE: Duration = Duration::from_secs(5);
pub const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(2);
pub const KEEPALIVE_RETRIES: u32 = 3;

impl From<postgres::Error> for StoreError {
    fn from(e: postgres::Error) -> Self {
        StoreError(match e.as_db_error() {
            Some(db) => format!("PostgreSQL: {} ({})", db.message(), db.code().code()),
            None => format!("PostgreSQL: {}", with_causes(&e)),
        })
    }
}

/// An error and its causes, as one line: a TLS handshake's error, or a URL's, says why
/// only in its source. No cause holds a password: the client's errors name an option,
/// never its value.
fn with_causes(e: &postgres::Error) -> String {
    let mut message = e.to_string();
    let mut cause = std::error::Error::source(e);
    while let Some(c) = cause {
        message.push_str(&format!(": {c}"));
        cause = c.source();
    }
    message
}

pub type PgResult<T> = Result<T, postgres::Error>;

/// A connection and its prepared statements.
pub struct Conn {
    pub client: Client,
    pub statements: HashMap<&'static str, Statement>,
}

impl Conn {
    pub fn statement(&mut self, sql: &'static str) -> PgResult<Statement> {
        if let Some(st) = self.statements.get(sql) {
            return Ok(st.clone());
        }
        let st = self.client.prepare(sql)?;
        self.statements.insert(sql, st.clone());
        Ok(st)
    }

    pub fn query(
        &mut self,
        sql: &'static str,
        params: &[&(dyn postgres::types::ToSql + Sync)],
    ) -> PgResult<Vec<Row>> {
        let st = self.statement(sql)?;
        self.client.query(&st, params)
    }
}

/// Where and how to connect: the client's settings, and the TLS connector that does
/// what the URL's `sslmode` asks.
#[derive(Clone)]
pub struct Target {
    pub config: Config,
    tls: MakeRustlsConnect,
}

impl Target {
    pub fn connect(&self) -> PgResult<Client> {
        self.config.connect(self.tls.clone())
    }
}

/// The connection settings from the URL, with this service's defaults.
pub fn target(url: &str) -> StoreResult<Target> {
    let (url, tls) = tls::split(url)?;
    let mut config: Config = url
        .parse()
        .map_err(|e| StoreError(format!("not a PostgreSQL URL: {}", with_causes(&e))))?;
    config.ssl_mode(tls.mode.client_mode());
    if config.get_connect_timeout().is_none() {
        config.connect_timeout(CONNECT_TIMEOUT);
    }
    if config.get_tcp_user_timeout().is_none() {
        config.tcp_user_timeout(TCP_USER_TIMEOUT);
    }
    // A peer that went away while a query waits for its answer is noticed by keepalive
    // probes, within about 5 + 3 × 2 s, unless the URL says otherwise (tokio-postgres's
    // own idle default is 2 hours).
    if config.get_keepalives_idle() == Duration::from_secs(2 * 60 * 60) {
        config.keepalives_idle(KEEPALIVE_IDLE);
    }
    if config.get_keepalives_interval().is_none() {
        config.keepalives_interval(KEEPALIVE_INTERVAL);
    }
    if config.get_keepalives_retries().is_none() {
        config.keepalives_retries(KEEPALIVE_RETRIES);
    }
    if config.get_application_name().is_none() {
        config.application_name("plant-store");
    }
    let theirs = config.get_options().unwrap_or_default();
    let options = format!("{SESSION_DEFAULTS} {theirs} {SESSION_REQUIRED}");
    config.options(&options);
    Ok(Target {
        config,
        tls: tls::connector(&tls)?,
    })
}

/// Brings the schema to `schema_version()` in one transaction that holds an advisory
/// lock: of instances starting together, one migrates and the others then find nothing
/// to do.
/// For a command that only reads (`token list`, `webhook list`): the database must be at
/// this binary's schema version; nothing is created or migrated.
pub fn require_current(client: &mut Client) -> StoreResult<()> {
    let row = client.query_one(
        "SELECT CASE WHEN to_regclass('plant_store_schema') IS NULL THEN -1 ELSE 0 END",
        &[],
    )?;
    let current: i64 = if row.get::<_, i32>(0) < 0 {
        0
    } else {
        client
            .query_one(
                "SELECT coalesce(max(version), 0) FROM plant_store_schema",
                &[],
            )?
            .get(0)
    };
    let latest = schema_version();
    if current == latest {
        return Ok(());
    }
    Err(StoreError(if current == 0 {
        "the database holds no plant-store schema; `plant-store serve` (or `token add`) creates it"
            .into()
    } else if current > latest {
        format!("the database has schema version {current}, newer than this binary's {latest}")
    } else {
        format!(
            "the database has schema version {current}, older than this binary's {latest}, and a list does not migrate it: start `plant-store serve` on it (or run `token add`, `webhook add`…), which migrates it"
        )
    }))
}

pub fn migrate(client: &mut Client) -> StoreResult<()> {
    let mut tx = client.transaction()?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])?;
    tx.batch_execute("CREATE TABLE IF NOT EXISTS plant_store_schema (version bigint NOT NULL)")?;
    let current: i64 = tx
        .query_one(
            "SELECT coalesce(max(version), 0) FROM plant_store_schema",
            &[],
        )?
        .get(0);
    let Some(current) = due(current)? else {
        return Ok(());
    };
    for (_, sql) in migrations(SCHEMA).into_iter().filter(|m| m.0 > current) {
        tx.batch_execute(&sql)?;
    }
    tx.execute("DELETE FROM plant_store_schema", &[])?;
    tx.execute(
        "INSERT INTO plant_store_schema (version) VALUES ($1)",
        &[&schema_version()],
    )?;
    tx.commit()?;
    log::info!(
        "database migrated from schema version {current} to {}",
        schema_version()
    );
    Ok(())
}
