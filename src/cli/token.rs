//! The `token` subcommands: make, list and revoke bearer tokens in the database. They
//! work while servers run on the same database; each sees a change on its next request.

use crate::api::auth::{self, Scope};
use crate::cli::failure::Failure;
use crate::ops::clock;
use crate::store::{Location, TokenRecord, Tokens};

/// Makes a token for `principal`, stores only its hash, and prints it once, alone on the
/// last line of standard output.
pub fn add(
    db: &Location,
    principal: &str,
    read_only: bool,
    expires_at: Option<i64>,
) -> Result<(), String> {
    let mut tokens = open(db, false)?;
    let token =
        auth::new_token(&Default::default()).map_err(|e| format!("no random source: {e}"))?;
    let record = TokenRecord {
        public_id: auth::new_public_id(&Default::default())
            .map_err(|e| format!("no random source: {e}"))?,
        principal: principal.to_owned(),
        scope: if read_only {
            Scope::Read
        } else {
            Scope::ReadWrite
        },
        created_at: clock::system_now(),
        expires_at,
    };
    tokens
        .add(&record, &auth::hash_token(&token))
        .map_err(|e| format!("cannot store the token: {e}"))?;
    let expiry = record
        .expires_at
        .map_or(String::new(), |t| format!(", expires {}", clock::utc(t)));
    let shown = format!(
        "token {} for principal {} ({}{expiry}); it is shown only now:\n{token}\n",
        record.public_id,
        record.principal,
        record.scope.as_str()
    );
    crate::cli::output::show_once(&shown, &format!("the token {}", record.public_id))
}

/// Prints one line per token: identifier, principal, scope, creation and expiry time
/// (UTC). Reads only: the database is opened read-only and never migrated.
pub fn list(db: &Location) -> Result<(), String> {
    let records = open(db, true)?
        .list()
        .map_err(|e| format!("cannot read tokens: {e}"))?;
    println!(
        "{:<8}  {:<20}  {:<10}  {:<20}  expires",
        "id", "principal", "scope", "created"
    );
    for r in records {
        println!(
            "{:<8}  {:<20}  {:<10}  {:<20}  {}",
            r.public_id,
            r.principal,
            r.scope.as_str(),
            clock::utc(r.created_at),
            r.expires_at.map_or("never".to_owned(), clock::utc)
        );
    }
    Ok(())
}

/// Removes a token; it fails on its next request. An unknown identifier is an input
/// error (exit status 2).
pub fn revoke(db: &Location, id: &str) -> Result<(), Failure> {
    match open(db, false).map_err(Failure::Failed)?.revoke(id) {
        Ok(true) => {
            println!("token {id} revoked");
            Ok(())
        }
        Ok(false) => Err(Failure::Usage(format!(
            "no token has the identifier `{id}`; `token list` shows them"
        ))),
        Err(e) => Err(Failure::Failed(format!("cannot revoke the token: {e}"))),
    }
}

/// Every command but `serve` works on an existing database: a mistyped `--db` (or none,
/// and so `./plants.db`) must not quietly create an empty one that no server reads.
/// `serve` creates it, and `token add`/`webhook add` with `--create`.
pub fn require_existing(db: &Location) -> Result<(), String> {
    match db {
        Location::File(path) if !path.exists() => Err(format!(
            "no database at {db} (check --db or PLANT_STORE_DB); `plant-store serve --db {db}` makes it, or `token add`/`webhook add` with --create"
        )),
        _ => Ok(()),
    }
}

fn open(db: &Location, read_only: bool) -> Result<Tokens, String> {
    Tokens::open(db, read_only).map_err(|e| format!("cannot open the database {db}: {e}"))
}
