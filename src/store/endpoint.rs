//! Webhook endpoints as the store gives them out: to the `webhook` commands
//! (`EndpointRecord`) and to the deliveries (`Endpoint`), and what a delivery attempt came
//! to (`Attempt`), which the writer records.

/// What an attempt at a webhook delivery came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Attempt {
    /// A 2xx: the cursor moves to the event; the lease is kept for `lease_ms` more (0:
    /// given back).
    Delivered { lease_ms: i64 },
    /// Anything else: the attempt is counted, the next is due `wait_ms` after the commit,
    /// the lease is given back; `active` false disables the endpoint (410, or the schedule
    /// used up).
    Failed {
        failures: i64,
        wait_ms: i64,
        error: String,
        active: bool,
    },
}

/// A webhook endpoint as `webhook list` shows it: never its secret.
#[derive(Debug)]
pub struct EndpointRecord {
    pub id: String,
    pub principal: String,
    pub url: String,
    /// Seconds since the Unix epoch.
    pub created_at: i64,
    pub active: bool,
    /// The last seq delivered (or, before the first, the log's last when it was added).
    pub delivered: i64,
    /// The principal's last seq now.
    pub last_seq: i64,
    /// Failed attempts at the next event.
    pub failures: i64,
    pub last_error: Option<String>,
}

/// A webhook endpoint as the deliveries see it.
#[derive(Debug, Clone)]
pub struct Endpoint {
    pub id: String,
    pub principal: String,
    pub url: String,
    pub secret: String,
    pub active: bool,
    pub delivered: i64,
    pub failures: i64,
    /// Milliseconds since the Unix epoch: the next attempt not before.
    pub due_ms: i64,
    pub lease_owner: String,
    pub lease_until_ms: i64,
    /// The principal's last seq.
    pub last_seq: i64,
    /// When the next event to deliver was committed (milliseconds since the Unix epoch),
    /// if it is still kept.
    pub next_at_ms: Option<i64>,
    /// The database's clock at the read (milliseconds since the Unix epoch): what `due_ms`
    /// and `lease_until_ms` are compared with.
    pub now_ms: i64,
}
