//! Token administration on PostgreSQL.

use crate::store::postgres::conn::{migrate, require_current, target};
use crate::store::seam::{Scope, StoreResult, TokenAdmin, TokenRecord};
use postgres::Client;

/// Token administration on PostgreSQL: one connection, each call its own transaction.
pub struct Tokens {
    client: Client,
}

impl Tokens {
    /// `read_only` (a list): never migrated; refused unless at this binary's version.
    pub fn open(url: &str, read_only: bool) -> StoreResult<Tokens> {
        let mut client = target(url)?.connect()?;
        if read_only {
            require_current(&mut client)?;
        } else {
            migrate(&mut client)?;
        }
        Ok(Tokens { client })
    }
}

impl TokenAdmin for Tokens {
    fn add(&mut self, record: &TokenRecord, hash: &[u8; 32]) -> StoreResult<()> {
        self.client.execute(
            "INSERT INTO tokens (public_id, hash, principal, scope, created_at, expires_at)
             VALUES ($1, $2, $3, $4, $5, $6)",
            &[
                &record.public_id,
                &&hash[..],
                &record.principal,
                &record.scope.as_str(),
                &record.created_at,
                &record.expires_at,
            ],
        )?;
        Ok(())
    }

    /// Ordered as on SQLite: identifiers by their bytes (`COLLATE "C"`), not by the
    /// database's locale.
    fn list(&mut self) -> StoreResult<Vec<TokenRecord>> {
        let rows = self.client.query(
            r#"SELECT public_id, principal, scope, created_at, expires_at FROM tokens
               ORDER BY created_at, public_id COLLATE "C""#,
            &[],
        )?;
        rows.iter()
            .map(|r| {
                let scope: &str = r.try_get(2)?;
                Ok(TokenRecord {
                    public_id: r.try_get(0)?,
                    principal: r.try_get(1)?,
                    scope: Scope::parse(scope).unwrap_or(Scope::Read),
                    created_at: r.try_get(3)?,
                    expires_at: r.try_get(4)?,
                })
            })
            .collect()
    }

    fn revoke(&mut self, public_id: &str) -> StoreResult<bool> {
        Ok(self
            .client
            .execute("DELETE FROM tokens WHERE public_id = $1", &[&public_id])?
            > 0)
    }
}
