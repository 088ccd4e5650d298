//! Where the database lives: `--db` resolved once into a `Location`, whose `Display`
//! (and `Debug`) never shows a password.

use crate::store::postgres;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};

/// Where the database lives, from `--db`.
#[derive(Clone)]
pub enum Location {
    /// A SQLite file.
    File(std::path::PathBuf),
    /// The name of a SQLite `memdb` database shared by this process's connections only.
    Memory(String),
    /// A PostgreSQL connection URL (`postgres://…` or `postgresql://…`).
    Postgres(String),
}

impl Location {
    pub fn parse(db: &str) -> Location {
        if is_postgres(db) {
            Location::Postgres(db.to_owned())
        } else if db == ":memory:" {
            static NEXT: AtomicU64 = AtomicU64::new(0);
            let n = NEXT.fetch_add(1, Ordering::Relaxed);
            Location::Memory(format!(
                "file:/plant-store-{}-{n}?vfs=memdb",
                std::process::id()
            ))
        } else {
            Location::File(std::path::PathBuf::from(db))
        }
    }

    /// `db`, as `--db` takes it, shown as its `Location` is (a PostgreSQL URL without
    /// its password), without resolving it.
    pub fn show(db: &str) -> String {
        match is_postgres(db) {
            true => redacted(db),
            false => db.to_owned(),
        }
    }
}

/// Whether `--db` names a PostgreSQL database.
fn is_postgres(db: &str) -> bool {
    db.starts_with("postgres://") || db.starts_with("postgresql://")
}

impl Location {
    /// Refuses a location no connection could be made with: a PostgreSQL URL this
    /// build cannot open (checked without connecting); the error never shows a password.
    pub fn check(&self) -> Result<(), String> {
        match self {
            Location::Postgres(url) => {
                postgres::check(url).map_err(|e| format!("cannot use {self}: {}", e.0))
            }
            Location::File(_) | Location::Memory(_) => Ok(()),
        }
    }
}

impl fmt::Display for Location {
    /// As it may be shown in a log line or an error: a PostgreSQL URL without its
    /// password or its parameters.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Location::File(path) => write!(f, "{}", path.display()),
            Location::Memory(_) => f.write_str(":memory:"),
            Location::Postgres(url) => f.write_str(&redacted(url)),
        }
    }
}

impl fmt::Debug for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// A PostgreSQL URL as it may be shown in a log line or an error: its password, and its
/// parameters (which may name one), hidden.
fn redacted(url: &str) -> String {
    // A build without PostgreSQL refuses the URL and shows none of it.
    if !postgres::AVAILABLE {
        return "a PostgreSQL URL".into();
    }
    // The credentials run from `://` to the last `@`; only the user before the first
    // `:` is shown. What follows the host is cut at the first `?`: parameters may name a
    // password too. A `?` before the last `@` is either in the password or starts
    // parameters that hold an `@`: either way nothing after the scheme is shown.
    let Some(scheme) = url.find("://").map(|i| i + 3) else {
        return "a PostgreSQL URL".into();
    };
    let last_at = url[scheme..].rfind('@');
    if last_at.is_some_and(|at| url[scheme..scheme + at].contains('?')) {
        return format!("{}…", &url[..scheme]);
    }
    let (userinfo, rest) = match last_at {
        Some(at) => (Some(&url[scheme..scheme + at]), &url[scheme + at + 1..]),
        None => (None, &url[scheme..]),
    };
    let mut shown = url[..scheme].to_owned();
    if let Some(userinfo) = userinfo {
        match userinfo.split_once(':') {
            Some((user, _)) => shown.push_str(&format!("{user}:***@")),
            None => shown.push_str(&format!("{userinfo}@")),
        }
    }
    match rest.split_once('?') {
        Some((host, _)) => shown.push_str(&format!("{host}?…")),
        None => shown.push_str(rest),
    }
    shown
}
