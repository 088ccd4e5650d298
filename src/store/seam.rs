//! The seam between the store and its backends: the types every side shares, and the
//! traits SQLite (`sqlite/`) and PostgreSQL (`postgres/`) implement. Nothing here knows
//! either database.

use crate::ops::metrics::DatabaseSize;
use crate::ops::random::Random;
use crate::store::admin::{Admin, AdminJob, Admitted};
use std::time::Duration;

pub use crate::store::endpoint::{Attempt, Endpoint, EndpointRecord};

/// Most writes one transaction commits together.
pub const MAX_GROUP_COMMIT: usize = 512;
/// How long a step waits for a lock (SQLite) or a free connection (PostgreSQL), or fails.
pub const BUSY_TIMEOUT: Duration = Duration::from_secs(5);
/// Read connections shared by the writer threads that stream long lists, on SQLite (a
/// page each at a time); one more waits for a free one.
pub const STREAM_READERS: usize = 2;
/// Connections to PostgreSQL one instance holds at most, by default (`--db-pool`).
pub const DEFAULT_DB_POOL: usize = 8;

/// A failure of the database. The text is for the log only, never for a client.
#[derive(Debug)]
pub struct StoreError(pub String);

/// The message of a failure because every connection of the pool stayed in use for
/// `BUSY_TIMEOUT`: the instance is overloaded, not broken.
pub const BUSY: &str = "no free database connection within the wait (--db-pool)";
/// The message of a failure because the answer to a commit was lost and the database
/// could not be asked again in time: the write may or may not have taken effect.
pub const OUTCOME_UNKNOWN: &str = "the database did not say whether the write took effect";

impl StoreError {
    pub fn is_busy(&self) -> bool {
        self.0 == BUSY
    }

    pub fn is_outcome_unknown(&self) -> bool {
        self.0 == OUTCOME_UNKNOWN
    }
}

impl std::fmt::Display for StoreError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

pub type StoreResult<T> = Result<T, StoreError>;

/// A change the writer thread applies.
pub enum Change {
    Create {
        owner: Owner,
        id: i64,
        name: String,
        tag: Option<String>,
    },
    Delete {
        owner: Owner,
        id: i64,
    },
    /// Writes and removes a row: tells whether writing works again after a failure.
    Probe,
    /// The retention (docs/api.md, "Events"); times in milliseconds since the
    /// Unix epoch. First disables each active webhook endpoint whose next event is stamped
    /// before `hold_before_ms`. Then, per principal, removes at most `SWEEP_ROWS` events:
    /// the prefix of its log, by seq, that ends at the last event stamped before
    /// `before_ms` among the `SWEEP_ROWS` from its first, before the first one stamped
    /// neither before `before_ms` nor after `future_ms` (a reading of a clock that was
    /// ahead), never past the lowest cursor of its active endpoints.
    Sweep {
        before_ms: i64,
        future_ms: i64,
        hold_before_ms: i64,
    },
    /// Takes an endpoint's lease for `owner`, `lease_ms` from the commit (database clock),
    /// when active, due, not another owner's, at `delivered`, `failures` and a log of
    /// `last_seq` or more as read; `renew`: only lengthens `owner`'s lease, if it holds.
    Claim {
        endpoint: String,
        owner: String,
        delivered: i64,
        failures: i64,
        last_seq: i64,
        lease_ms: i64,
        renew: bool,
    },
    /// Records an attempt at the endpoint's event `seq` (its next), made under `owner`'s
    /// lease; applies only while the lease and the cursor are still as the attempt found
    /// them.
    Settle {
        endpoint: String,
        owner: String,
        seq: i64,
        attempt: Attempt,
    },
    /// Gives back the endpoint's lease, if `owner` holds it.
    Release {
        endpoint: String,
        owner: String,
    },
    /// Test control's whole-store operation, run alone between two groups (`admin.rs`).
    Admin(Box<AdminJob>),
}

/// Whose plants a create or a delete touches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Owner {
    /// The principal the caller's token was found to name.
    Principal(String),
    /// A stored token not yet looked up (`Reads::folds_tokens`): the commit looks it up
    /// and makes the change for its principal when it is a read-write token that has not
    /// expired at `now` (Unix seconds); otherwise the change is refused
    /// (`Outcome::Refused`, by `writer_of`'s rule).
    Token { hash: [u8; 32], now: i64 },
}

/// Why a change given by its token was not made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// No stored token has this hash (or its scope is one this binary does not know).
    Unknown,
    Expired,
    /// A read token, of this principal.
    ReadOnly(String),
}

/// The principal a stored token lets write at `now` (Unix seconds), or why it does not:
/// the rule of `Owner::Token`, the same as a request's token checks (expired, then scope).
pub fn writer_of(token: Option<TokenOwner>, now: i64) -> Result<String, Refusal> {
    match token {
        None => Err(Refusal::Unknown),
        Some(t) if t.expires_at.is_some_and(|at| at <= now) => Err(Refusal::Expired),
        Some(t) if t.scope != Scope::ReadWrite => Err(Refusal::ReadOnly(t.principal)),
        Some(t) => Ok(t.principal),
    }
}

impl Change {
    /// Whose log a change appends to when it applies: `None` for a change that appends
    /// no event.
    pub fn owner(&self) -> Option<&Owner> {
        match self {
            Change::Create { owner, .. } | Change::Delete { owner, .. } => Some(owner),
            Change::Probe
            | Change::Sweep { .. }
            | Change::Claim { .. }
            | Change::Settle { .. }
            | Change::Release { .. }
            | Change::Admin(_) => None,
        }
    }

    /// The principal whose log a change appends to when it applies, when it is known
    /// before the commit (not for `Owner::Token`).
    pub fn principal(&self) -> Option<&str> {
        match self.owner() {
            Some(Owner::Principal(p)) => Some(p),
            Some(Owner::Token { .. }) | None => None,
        }
    }
}

/// Most events one sweep removes, and most rows it reads of one principal's log: bounded
/// work per step of the retention.
pub const SWEEP_ROWS: u32 = 2000;

/// What a committed change did.
#[derive(Debug, PartialEq, Eq)]
pub enum Outcome {
    Created,
    /// The principal already owns this id; nothing was written.
    Conflict,
    Deleted,
    /// The principal owns no plant with this id; nothing was written.
    NotFound,
    /// A sweep ran; `more` when it removed `SWEEP_ROWS` (more may be due).
    Swept {
        more: bool,
    },
    /// A webhook endpoint's claim or settlement: whether it applied.
    Updated(bool),
    /// A create or delete given by its token (`Owner::Token`), made for this principal:
    /// `applied` as `Created` or `Deleted` (else `Conflict` or `NotFound`).
    Owned {
        principal: String,
        applied: bool,
    },
    /// A create or delete given by its token, not made.
    Refused(Refusal),
}

impl Outcome {
    /// The principal whose log the change appended an event to, if it did.
    pub fn appended<'a>(&'a self, change: &'a Change) -> Option<&'a str> {
        match self {
            Outcome::Created | Outcome::Deleted => change.principal(),
            Outcome::Owned {
                principal,
                applied: true,
            } => Some(principal),
            _ => None,
        }
    }
}

/// What is called with a change's outcome once its transaction has committed (or
/// failed). It runs on the writer thread, so it must hand the outcome on and return.
pub type Done = Box<dyn FnOnce(StoreResult<Outcome>) + Send>;

/// A change with what to call once its transaction has committed (or failed).
pub struct Job {
    pub change: Change,
    pub done: Done,
}

/// What a token allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// GET only.
    Read,
    /// GET, POST and DELETE.
    ReadWrite,
}

impl Scope {
    pub fn parse(s: &str) -> Option<Scope> {
        match s {
            "read" => Some(Scope::Read),
            "read-write" => Some(Scope::ReadWrite),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Read => "read",
            Scope::ReadWrite => "read-write",
        }
    }
}

/// A token as `token list` shows it: never the token, never its hash.
#[derive(Debug)]
pub struct TokenRecord {
    pub public_id: String,
    pub principal: String,
    pub scope: Scope,
    /// Seconds since the Unix epoch.
    pub created_at: i64,
    /// Seconds since the Unix epoch; `None`: never.
    pub expires_at: Option<i64>,
}

/// Who a stored token speaks for.
pub struct TokenOwner {
    pub principal: String,
    pub scope: Scope,
    /// Seconds since the Unix epoch; `None`: never.
    pub expires_at: Option<i64>,
}

impl TokenOwner {
    /// A stored row; `None` when its scope is not one this binary knows.
    pub fn from_row(principal: String, scope: &str, expires_at: Option<i64>) -> Option<TokenOwner> {
        Some(TokenOwner {
            principal,
            scope: Scope::parse(scope)?,
            expires_at,
        })
    }
}

/// A row's values, each row once; `each(id, name, tag)`.
pub type Rows<'a> = &'a mut dyn FnMut(i64, &str, Option<&str>);

/// An event's type, as the feed names it.
pub const CREATED: &str = "plant.created";
pub const DELETED: &str = "plant.deleted";

/// An event as stored: `name` (and `tag`, when given) for a creation only.
pub struct EventRow<'a> {
    pub seq: i64,
    pub id: &'a str,
    pub kind: &'a str,
    /// Milliseconds since the Unix epoch.
    pub at_ms: i64,
    pub plant: i64,
    pub name: Option<&'a str>,
    pub tag: Option<&'a str>,
}

/// An event's row, each once, in seq order.
pub type EventRows<'a> = &'a mut dyn FnMut(&EventRow);

/// What a principal's log holds: its last seq (0: no event yet) and the oldest seq
/// retention kept (`None` when none is).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LogBounds {
    pub last_seq: i64,
    pub oldest_kept: Option<i64>,
}

impl LogBounds {
    /// Whether a reader that has seen the events up to `after` cannot go on from there:
    /// some seq in `after + 1 ..= last_seq` is no longer kept, or `after` is past the end
    /// of the log (a database restored from an older backup).
    pub fn missed(&self, after: i64) -> bool {
        after > self.last_seq
            || (after < self.last_seq && self.oldest_kept.is_none_or(|oldest| after < oldest - 1))
    }
}

/// What a `Store` opens workers' reads from.
pub trait Backend: Send + Sync {
    /// A worker's own reads.
    fn connect(&self) -> StoreResult<Box<dyn Reads>>;
    /// Reads of its own for a thread that answers no request (`Store::lend`): as a
    /// worker's, where the backend has nothing lighter.
    fn lend(&self) -> StoreResult<Box<dyn Reads>> {
        self.connect()
    }
}

/// One worker's reads.
pub trait Reads: Send {
    /// Calls `each` for up to `count` of the principal's plants with `id >= from`, in id
    /// order, in one short read. Returns how many it saw.
    fn list_page(&self, principal: &str, from: i64, count: u32, each: Rows) -> StoreResult<u32>;
    /// Runs `f`, whose reads share one snapshot (SQLite) or one lent connection
    /// (PostgreSQL); fails before `f` runs when the read cannot begin. The error is that
    /// of ending the read.
    fn read(&self, f: &mut dyn FnMut()) -> StoreResult<()>;
    /// The principal and scope of the token with this SHA-256, if it exists.
    fn token_owner(&self, hash: &[u8; 32]) -> StoreResult<Option<TokenOwner>>;
    /// Calls `each` for up to `count` of the principal's events with `seq > after`, in
    /// seq order. Returns how many it saw.
    fn events_page(
        &self,
        principal: &str,
        after: i64,
        count: u32,
        each: EventRows,
    ) -> StoreResult<u32>;
    /// The principal's log; `None` when it has never had an event.
    fn log_bounds(&self, principal: &str) -> StoreResult<Option<LogBounds>>;
    /// Every webhook endpoint, by id, with its principal's last seq.
    /// `steady_ms`: now as SQLite compares due times and leases (PostgreSQL asks the
    /// database's clock).
    fn endpoints(&self, steady_ms: i64) -> StoreResult<Vec<Endpoint>>;
    /// Whether writes go better with their token looked up by the commit
    /// (`Owner::Token`) than before it: one round trip fewer on PostgreSQL.
    fn folds_tokens(&self) -> bool {
        false
    }
    /// A hint, inside `read`: the next token look-up will be followed by `list_page` of
    /// its principal from `from` for `count` rows. A backend may fetch both at once (one
    /// round trip on PostgreSQL); the default ignores it.
    fn expect_page(&self, _from: i64, _count: u32) {}
    /// Fails when the database is no longer the one opened (a SQLite file replaced).
    fn check_file(&self) -> StoreResult<()> {
        Ok(())
    }
    /// Who else has the database open (another server of this process, another process).
    fn others(&self) -> Option<String> {
        None
    }
    /// The database answers a read now.
    fn ping(&self) -> StoreResult<()>;
    /// The sizes of the database file and its write-ahead log; `None` unless a file.
    fn size(&self) -> Option<DatabaseSize> {
        None
    }
}

/// Where the pages of a long list after the first are read, from any thread.
pub trait Streams: Send + Sync {
    /// `Reads::list_page` on a lent connection.
    fn list_page(&self, principal: &str, from: i64, count: u32, each: Rows) -> StoreResult<u32>;
    /// `Reads::events_page` on a lent connection.
    fn events_page(
        &self,
        principal: &str,
        after: i64,
        count: u32,
        each: EventRows,
    ) -> StoreResult<u32>;
    /// `Reads::token_owner` on a lent connection.
    fn token_owner(&self, hash: &[u8; 32]) -> StoreResult<Option<TokenOwner>>;
}

/// The writer thread's side of a backend.
pub trait Writer: Send {
    /// Applies a batch in one transaction. A change that finds a conflict or nothing to
    /// delete writes nothing and does not disturb its neighbours; any other failure fails
    /// the batch, and nothing of it is committed. A writer that cannot know the outcome
    /// yet (PostgreSQL: the answer to COMMIT was lost) takes the batch's jobs, answers
    /// them from another thread once it knows, and returns `Ok` with no outcomes.
    /// `at`: the group's wall time (milliseconds since the epoch), its events' time;
    /// `random`: where its events' ids come from (`store::ids::event_ids`).
    fn commit(
        &mut self,
        batch: &mut Vec<Job>,
        at: i64,
        random: &Random,
    ) -> StoreResult<Vec<Outcome>>;
    /// A whole-store operation (`store/admin.rs`), between two batches; SQLite only.
    fn admin(&mut self, op: Admin, random: &Random) -> StoreResult<Admitted>;
    /// After the last batch; `checkpoint`: SQLite's final checkpoint is wanted.
    fn close(self: Box<Self>, checkpoint: bool);
}

/// Token administration, for the `token` subcommands. Safe while servers run on the
/// same database: each call is one short transaction.
pub trait TokenAdmin {
    fn add(&mut self, record: &TokenRecord, hash: &[u8; 32]) -> StoreResult<()>;
    /// Every token, oldest first (ties by identifier, byte order).
    fn list(&mut self) -> StoreResult<Vec<TokenRecord>>;
    /// Removes a token; false when no token has this identifier.
    fn revoke(&mut self, public_id: &str) -> StoreResult<bool>;
}

/// Webhook administration, for the `webhook` subcommands; like `TokenAdmin`, safe while
/// servers run.
pub trait WebhookAdmin {
    /// Adds an active endpoint whose cursor is its principal's last seq now, so it gets the
    /// events committed after it; returns that seq.
    fn add(&mut self, record: &EndpointRecord, secret: &str) -> StoreResult<i64>;
    /// Every endpoint, oldest first (ties by identifier, byte order).
    fn list(&mut self) -> StoreResult<Vec<EndpointRecord>>;
    /// Removes an endpoint; false when none has this identifier.
    fn remove(&mut self, id: &str) -> StoreResult<bool>;
    /// Makes an endpoint active with a fresh schedule, due now, and returns its cursor
    /// before and after: past events the retention removed while it was disabled (it
    /// holds events only while active); `None` when none has this identifier.
    fn enable(&mut self, id: &str) -> StoreResult<Option<(i64, i64)>>;
}

/// An opened backend: what a `Store` runs on.
pub struct Opened {
    pub backend: Box<dyn Backend>,
    pub streams: std::sync::Arc<dyn Streams>,
    pub writer: Box<dyn Writer>,
}
