use super::conn::*;
use super::group::*;
use crate::store::seam::*;
use std::time::Duration;

#[test]
fn the_migrations_in_postgresql_s_dialect_are_numbered_as_sqlite_s() {
    crate::store::schema::assert_numbered(SCHEMA);
}

#[test]
fn the_url_may_set_the_statement_timeout_but_not_turn_synchronous_commit_off() {
    let c = config(
        "postgres://u:p@h/db?options=-c%20statement_timeout%3D2s%20-c%20synchronous_commit%3Doff",
    )
    .unwrap();
    assert_eq!(
        c.get_options(),
        Some(
            "-c statement_timeout=10s -c statement_timeout=2s -c synchronous_commit=off -c synchronous_commit=on"
        )
    );
    assert_eq!(c.get_connect_timeout(), Some(&CONNECT_TIMEOUT));
    assert_eq!(c.get_application_name(), Some("plant-store"));
    let c = config("postgres://h/db?connect_timeout=2").unwrap();
    assert_eq!(c.get_connect_timeout(), Some(&Duration::from_secs(2)));
    assert!(config("postgres://h/db?sslmode=bogus").is_err());
}

#[test]
fn keepalive_notices_a_vanished_peer_unless_the_url_says_otherwise() {
    let c = config("postgres://h/db").unwrap();
    assert!(c.get_keepalives());
    assert_eq!(c.get_keepalives_idle(), KEEPALIVE_IDLE);
    assert_eq!(c.get_keepalives_interval(), Some(KEEPALIVE_INTERVAL));
    assert_eq!(c.get_keepalives_retries(), Some(KEEPALIVE_RETRIES));
    let c = config("postgres://h/db?keepalives_idle=60&keepalives_interval=9&keepalives_retries=1")
        .unwrap();
    assert_eq!(c.get_keepalives_idle(), Duration::from_secs(60));
    assert_eq!(c.get_keepalives_interval(), Some(Duration::from_secs(9)));
    assert_eq!(c.get_keepalives_retries(), Some(1));
}

fn job(change: Change) -> Job {
    Job {
        change,
        done: Box::new(|_| {}),
    }
}

#[test]
fn a_group_is_one_query_with_every_string_as_hex() {
    let batch = [
        job(Change::Create {
            principal: "b".into(),
            id: -1,
            name: "x'); DROP TABLE plants; --".into(),
            tag: None,
        }),
        job(Change::Delete {
            principal: "a".into(),
            id: 9,
        }),
        job(Change::Create {
            principal: "a".into(),
            id: 2,
            name: "\0\u{0}é".into(),
            tag: Some(String::new()),
        }),
    ];
    let marker = Marker {
        at: 1_700_000_000_000,
        nonce: [0xab; 16],
    };
    let sql = group_sql(&batch, &[1, 2, 0], &marker, Some(42));
    assert!(!sql.contains("DROP"), "{sql}");
    let record = ") SELECT length(set_config('plant_store.outcomes', current_setting('plant_store.outcomes') || count(*), true)) FROM r;";
    assert_eq!(
        sql,
        format!(
            "BEGIN;\n\
             SELECT set_config('plant_store.outcomes', '', true);\n\
             WITH r AS (DELETE FROM plants WHERE principal = convert_from(decode('61', 'hex'), 'UTF8') AND id = 9 RETURNING 1{record}\n\
             WITH r AS (INSERT INTO plants (principal, id, name, tag) VALUES (convert_from(decode('61', 'hex'), 'UTF8'), 2, decode('0000c3a9', 'hex'), decode('', 'hex')) ON CONFLICT DO NOTHING RETURNING 1{record}\n\
             WITH r AS (INSERT INTO plants (principal, id, name, tag) VALUES (convert_from(decode('62', 'hex'), 'UTF8'), -1, decode('7827293b2044524f50205441424c4520706c616e74733b202d2d', 'hex'), NULL) ON CONFLICT DO NOTHING RETURNING 1{record}\n\
             DELETE FROM plant_store_groups WHERE (at, nonce) IN (SELECT at, nonce FROM plant_store_groups WHERE at < 42 ORDER BY at LIMIT 1000);\n\
             INSERT INTO plant_store_groups (at, nonce, outcomes) VALUES (1700000000000, decode('{}', 'hex'), current_setting('plant_store.outcomes')) RETURNING outcomes;\n\
             COMMIT;",
            "ab".repeat(16)
        )
    );
    // Digits in the group's order (delete, then the creates of a/2 and b/-1).
    let answered = outcomes(&batch, &[1, 2, 0], "010").unwrap();
    assert_eq!(
        answered,
        [Outcome::Conflict, Outcome::NotFound, Outcome::Created]
    );
    assert!(outcomes(&batch, &[1, 2, 0], "01").is_err());
    assert!(outcomes(&batch, &[1, 2, 0], "01x").is_err());
}
