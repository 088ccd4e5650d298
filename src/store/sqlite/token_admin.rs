//! `token add`, `token list` and `token revoke` on a SQLite file.

use crate::store::location::Location;
use crate::store::seam::{Scope, StoreError, StoreResult, TokenAdmin, TokenRecord};
use crate::store::sqlite::control;
use crate::store::sqlite::held::Held;
use rusqlite::Connection;
use std::sync::Arc;

/// Token administration on a SQLite file; `read_only` (for `token list`): opened
/// read-only, never migrated.
pub fn tokens(location: &Location, read_only: bool) -> StoreResult<Box<dyn TokenAdmin>> {
    if let Location::Memory(_) = location {
        return Err(StoreError(
            "tokens need a database file, not :memory:".into(),
        ));
    }
    let (conn, held) = location.open_admin(read_only)?;
    Ok(Box::new(Tokens { conn, _held: held }))
}

/// Token administration on a SQLite file.
struct Tokens {
    conn: Connection,
    /// Kept until after `conn` is closed (declared after it): `held.rs`.
    _held: Option<Arc<Held>>,
}

impl TokenAdmin for Tokens {
    fn add(&mut self, record: &TokenRecord, hash: &[u8; 32]) -> StoreResult<()> {
        let token = crate::store::admin::NewToken {
            public_id: record.public_id.clone(),
            hash: *hash,
            principal: record.principal.clone(),
            scope: record.scope.as_str(),
            created_at: record.created_at,
            expires_at: record.expires_at,
            place: String::new(),
        };
        Ok(control::insert_token(&self.conn, &token)?)
    }

    fn list(&mut self) -> StoreResult<Vec<TokenRecord>> {
        let mut st = self.conn.prepare(
            "SELECT public_id, principal, scope, created_at, expires_at FROM tokens
             ORDER BY created_at, public_id",
        )?;
        let rows = st.query_map([], |r| {
            Ok(TokenRecord {
                public_id: r.get(0)?,
                principal: r.get(1)?,
                scope: Scope::parse(&r.get::<_, String>(2)?).unwrap_or(Scope::Read),
                created_at: r.get(3)?,
                expires_at: r.get(4)?,
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    fn revoke(&mut self, public_id: &str) -> StoreResult<bool> {
        Ok(self
            .conn
            .execute("DELETE FROM tokens WHERE public_id = ?1", [public_id])?
            > 0)
    }
}
