//! The `webhook` subcommands: add, list, remove and enable webhook endpoints in the
//! database. Like tokens, they work while servers run; each server sees a change at its
//! next look at the endpoints (within `webhooks::POLL`). And what `serve` has of webhooks:
//! the values of its `--webhook-*` options (the option table calls these setters) and the
//! deliveries' start. Only with the `webhooks` feature; `no_webhooks.rs` stands in for it
//! without.

use crate::cli::failure::Failure;
use crate::cli::options::values::{
    DURATION_FORMS, MAX_TIMEOUT_SECS, duration, number, parse_duration, show,
};
use crate::ops::clock;
use crate::store::{DUE_AT_MOST, EndpointRecord, LEASE_AT_MOST, Location, Webhooks};
use crate::webhooks::LEASE_MARGIN;
pub use crate::webhooks::schedule::DEFAULT_SCHEDULE;
use crate::webhooks::schedule::{MAX_DELAY, MAX_RETRY_AFTER, MAX_SCHEDULE_STEPS, Schedule};
pub use crate::webhooks::{Config, Deliveries, start};
use crate::webhooks::{client, sign};

/// This build has webhooks: the `webhook` commands run.
pub fn available() -> Result<(), String> {
    Ok(())
}

/// `serve`'s webhook settings when no option sets them.
pub fn defaults() -> Config {
    Config {
        threads: crate::webhooks::DEFAULT_THREADS,
        timeout: crate::webhooks::DEFAULT_TIMEOUT,
        schedule: Schedule::parse(DEFAULT_SCHEDULE, parse_duration)
            .expect("the default schedule parses"),
        ca: None,
    }
}

/// `--webhook-threads`.
pub fn set_threads(c: &mut Config, v: &str, name: &'static str) -> Result<(), String> {
    c.threads = number(v, name, 1, 256)?;
    Ok(())
}

/// `--webhook-timeout`.
pub fn set_timeout(c: &mut Config, v: &str, name: &'static str) -> Result<(), String> {
    c.timeout = duration(v, name, 1, MAX_TIMEOUT_SECS)?;
    Ok(())
}

/// `--webhook-schedule`.
pub fn set_schedule(c: &mut Config, v: &str, name: &'static str) -> Result<(), String> {
    c.schedule = Schedule::parse(v, parse_duration).map_err(|_| {
        format!(
            "{name} must list 1 to {MAX_SCHEDULE_STEPS} durations from 0s to {} separated by commas, each {DURATION_FORMS}; not `{v}`",
            show(MAX_DELAY.as_secs())
        )
    })?;
    Ok(())
}

/// `--webhook-ca`: read and parsed now, so that a bad file is refused before anything
/// is opened.
pub fn set_ca(c: &mut Config, v: &str, name: &'static str) -> Result<(), String> {
    let ca = std::path::PathBuf::from(v);
    client::Client::new(crate::webhooks::DEFAULT_TIMEOUT, Some(&ca))
        .map_err(|e| format!("{name}: {e}"))?;
    c.ca = Some(ca);
    Ok(())
}

/// Adds an endpoint for the principal's events committed from now on; prints its id on
/// the first line and its secret, once, alone on the last.
pub fn add(db: &Location, principal: &str, url: &str) -> Result<(), String> {
    let mut webhooks = open(db, false)?;
    let secret = sign::new_secret().map_err(|e| format!("no random source: {e}"))?;
    let mut id = [0u8; 8];
    getrandom::fill(&mut id).map_err(|e| format!("no random source: {e}"))?;
    let record = EndpointRecord {
        id: format!(
            "wh_{}",
            id.iter().map(|b| format!("{b:02x}")).collect::<String>()
        ),
        principal: principal.to_owned(),
        url: url.to_owned(),
        created_at: clock::system_now(),
        active: true,
        delivered: 0,
        last_seq: 0,
        failures: 0,
        last_error: None,
    };
    let after = webhooks
        .add(&record, &secret)
        .map_err(|e| format!("cannot store the endpoint: {e}"))?;
    // One write, so that a reader that takes only the first line (`| head -n1`) does not
    // make the rest fail.
    let shown = format!(
        "{id}\nwebhook {id} for principal {}: events after seq {after} go to {url}; its signing secret is shown only now:\n{secret}\n",
        record.principal,
        id = record.id
    );
    crate::cli::output::show_once(&shown, &format!("the endpoint {}", record.id))
}

/// Prints one line per endpoint: id, state, principal, delivered/last seq, failed attempts
/// at the next event, URL, last error. Never the secret. Reads only: the database is
/// opened read-only and never migrated.
pub fn list(db: &Location) -> Result<(), String> {
    let records = open(db, true)?
        .list()
        .map_err(|e| format!("cannot read the endpoints: {e}"))?;
    println!(
        "{:<19}  {:<8}  {:<20}  {:<15}  {:<8}  {:<20}  url  last error",
        "id", "state", "principal", "delivered/last", "failures", "created"
    );
    for r in records {
        println!(
            "{:<19}  {:<8}  {:<20}  {:<15}  {:<8}  {:<20}  {}  {}",
            r.id,
            if r.active { "active" } else { "disabled" },
            r.principal,
            format!("{}/{}", r.delivered, r.last_seq),
            r.failures,
            clock::utc(r.created_at),
            r.url,
            r.last_error.as_deref().unwrap_or("-")
        );
    }
    Ok(())
}

/// Removes an endpoint: no attempt starts after it, and one under way is not recorded.
pub fn remove(db: &Location, id: &str) -> Result<(), Failure> {
    match open(db, false).map_err(Failure::Failed)?.remove(id) {
        Ok(true) => {
            println!("webhook {id} removed");
            Ok(())
        }
        Ok(false) => Err(unknown(id)),
        Err(e) => Err(Failure::Failed(format!("cannot remove the webhook: {e}"))),
    }
}

/// An unknown endpoint id is an input error (exit status 2), as a bad URL is.
fn unknown(id: &str) -> Failure {
    Failure::Usage(format!(
        "no webhook has the identifier `{id}`; `webhook list` shows them"
    ))
}

/// Resumes an endpoint, with a fresh schedule, from its first undelivered event that is
/// still kept (and says which were removed by the retention while it was disabled).
pub fn enable(db: &Location, id: &str) -> Result<(), Failure> {
    match open(db, false).map_err(Failure::Failed)?.enable(id) {
        Ok(Some((before, after))) if after > before => {
            println!(
                "webhook {id} enabled; events {} to {after} were removed by the retention while it was disabled and are skipped: it resumes after seq {after}",
                before + 1
            );
            Ok(())
        }
        Ok(Some((_, after))) => {
            println!("webhook {id} enabled; it resumes after seq {after}");
            Ok(())
        }
        Ok(None) => Err(unknown(id)),
        Err(e) => Err(Failure::Failed(format!("cannot enable the webhook: {e}"))),
    }
}

/// Whether this build can deliver to `url` (checked before anything is stored).
pub fn check_url(url: &str) -> Result<(), String> {
    client::check_url(url)
}

fn open(db: &Location, read_only: bool) -> Result<Webhooks, String> {
    Webhooks::open(db, read_only).map_err(|e| format!("cannot open the database {db}: {e}"))
}

// No lease or retry time that a real clock stores is further ahead than the store lets
// one be at open (`store::LEASE_AT_MOST`, `DUE_AT_MOST`; further is a test clock's): a
// lease is the timeout and the margin, renewed for a fault's second post (a timeout) or
// delay (at most a minute); a retry waits at most the longest wait a schedule lists, or
// a `Retry-After`'s most.
const _: () = assert!(
    2 * MAX_TIMEOUT_SECS + LEASE_MARGIN.as_secs() < LEASE_AT_MOST.as_secs()
        && MAX_DELAY.as_secs() < DUE_AT_MOST.as_secs()
        && MAX_RETRY_AFTER.as_secs() < DUE_AT_MOST.as_secs()
);
