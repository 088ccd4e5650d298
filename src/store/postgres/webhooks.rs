//! Webhook endpoints on PostgreSQL: the `webhook` subcommands' statements, and the
//! deliveries' read of every endpoint (as `sqlite/webhooks.rs`).

use crate::store::postgres::conn::{Conn, migrate, require_current, target};
use crate::store::seam::{Endpoint, EndpointRecord, StoreResult, WebhookAdmin};
use postgres::Client;

/// Every endpoint with its principal's last seq and the time of its next event.
pub const ENDPOINTS: &str = r#"SELECT w.id, w.principal, w.url, w.secret, w.active, w.delivered,
     w.failures, w.due, w.lease_owner, w.lease_until, coalesce(l.last_seq, 0),
     (SELECT e.at FROM events e WHERE e.principal = w.principal AND e.seq = w.delivered + 1),
     (extract(epoch from clock_timestamp()) * 1000)::bigint
     FROM webhooks w LEFT JOIN event_logs l ON l.principal = w.principal ORDER BY w.id COLLATE "C""#;

/// Every endpoint, as the deliveries see it.
pub fn endpoints(c: &mut Conn) -> Result<Vec<Endpoint>, postgres::Error> {
    c.query(ENDPOINTS, &[])?
        .iter()
        .map(|r| {
            Ok(Endpoint {
                id: r.try_get(0)?,
                principal: r.try_get(1)?,
                url: r.try_get(2)?,
                secret: r.try_get(3)?,
                active: r.try_get::<_, i32>(4)? == 1,
                delivered: r.try_get(5)?,
                failures: i64::from(r.try_get::<_, i32>(6)?),
                due_ms: r.try_get(7)?,
                lease_owner: r.try_get(8)?,
                lease_until_ms: r.try_get(9)?,
                last_seq: r.try_get(10)?,
                next_at_ms: r.try_get(11)?,
                now_ms: r.try_get(12)?,
            })
        })
        .collect()
}

/// Webhook administration: one connection, each call its own transaction.
pub struct Webhooks {
    client: Client,
}

impl Webhooks {
    /// `read_only` (a list): never migrated; refused unless at this binary's version.
    pub fn open(url: &str, read_only: bool) -> StoreResult<Webhooks> {
        let mut client = target(url)?.connect()?;
        if read_only {
            require_current(&mut client)?;
        } else {
            migrate(&mut client)?;
        }
        Ok(Webhooks { client })
    }
}

impl WebhookAdmin for Webhooks {
    /// The secret never appears in a statement or a bind parameter, which PostgreSQL's
    /// log shows (`log_statement = 'mod'` logs every INSERT with its parameters): the row
    /// is inserted without it, and the secret goes in through `COPY … FROM STDIN`, whose
    /// data no log setting shows, in the same transaction (docs/postgres.md).
    fn add(&mut self, record: &EndpointRecord, secret: &str) -> StoreResult<i64> {
        use std::io::Write;
        // `whsec_` and base64: no tab, newline or backslash to escape for COPY's text form.
        if secret
            .bytes()
            .any(|b| matches!(b, b'\t' | b'\n' | b'\r' | b'\\'))
        {
            return Err(crate::store::seam::StoreError(
                "the secret has a character COPY would need escaped".into(),
            ));
        }
        let mut tx = self.client.transaction()?;
        let row = tx.query_one(
            "INSERT INTO webhooks (id, principal, url, secret, created_at, active, delivered)
             VALUES ($1, $2, $3, '', $4, 1,
                     coalesce((SELECT last_seq FROM event_logs WHERE principal = $2), 0))
             RETURNING delivered",
            &[
                &record.id,
                &record.principal,
                &record.url,
                &record.created_at,
            ],
        )?;
        tx.batch_execute(
            "CREATE TEMPORARY TABLE plant_store_new_secret (id text NOT NULL, secret text NOT NULL) ON COMMIT DROP",
        )?;
        let mut copy = tx.copy_in("COPY plant_store_new_secret (id, secret) FROM STDIN")?;
        copy.write_all(format!("{}\t{secret}\n", record.id).as_bytes())
            .map_err(|e| crate::store::seam::StoreError(format!("cannot send the secret: {e}")))?;
        copy.finish()?;
        let set = tx.execute(
            "UPDATE webhooks w SET secret = s.secret FROM plant_store_new_secret s WHERE w.id = s.id",
            &[],
        )?;
        if set != 1 {
            return Err(crate::store::seam::StoreError(
                "the endpoint's secret was not stored".into(),
            ));
        }
        let delivered: i64 = row.try_get(0)?;
        tx.commit()?;
        Ok(delivered)
    }

    fn list(&mut self) -> StoreResult<Vec<EndpointRecord>> {
        let rows = self.client.query(
            r#"SELECT w.id, w.principal, w.url, w.created_at, w.active, w.delivered,
                      coalesce(l.last_seq, 0), w.failures, w.last_error
               FROM webhooks w LEFT JOIN event_logs l ON l.principal = w.principal
               ORDER BY w.created_at, w.id COLLATE "C""#,
            &[],
        )?;
        rows.iter()
            .map(|r| {
                Ok(EndpointRecord {
                    id: r.try_get(0)?,
                    principal: r.try_get(1)?,
                    url: r.try_get(2)?,
                    created_at: r.try_get(3)?,
                    active: r.try_get::<_, i32>(4)? == 1,
                    delivered: r.try_get(5)?,
                    last_seq: r.try_get(6)?,
                    failures: i64::from(r.try_get::<_, i32>(7)?),
                    last_error: r.try_get(8)?,
                })
            })
            .collect()
    }

    fn remove(&mut self, id: &str) -> StoreResult<bool> {
        Ok(self
            .client
            .execute("DELETE FROM webhooks WHERE id = $1", &[&id])?
            > 0)
    }

    /// As on SQLite (`sqlite/webhooks.rs`, `ENABLE`).
    fn enable(&mut self, id: &str) -> StoreResult<Option<(i64, i64)>> {
        let mut tx = self.client.transaction()?;
        let Some(before) = tx.query_opt(
            "SELECT delivered FROM webhooks WHERE id = $1 FOR UPDATE",
            &[&id],
        )?
        else {
            return Ok(None);
        };
        let after = tx.query_one(
            "UPDATE webhooks w SET active = 1, failures = 0, due = 0,
                 lease_owner = '', lease_until = 0,
                 delivered = greatest(delivered, coalesce(
                   (SELECT min(seq) - 1 FROM events e WHERE e.principal = w.principal),
                   (SELECT last_seq FROM event_logs l WHERE l.principal = w.principal),
                   delivered))
             WHERE id = $1 RETURNING delivered",
            &[&id],
        )?;
        let (before, after): (i64, i64) = (before.try_get(0)?, after.try_get(0)?);
        tx.commit()?;
        Ok(Some((before, after)))
    }
}
