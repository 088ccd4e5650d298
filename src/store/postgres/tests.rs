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
    let c = target(
        "postgres://u:p@h/db?options=-c%20statement_timeout%3D2s%20-c%20synchronous_commit%3Doff",
    )
    .unwrap()
    .config;
    assert_eq!(
        c.get_options(),
        Some(
            "-c statement_timeout=10s -c statement_timeout=2s -c synchronous_commit=off -c synchronous_commit=on"
        )
    );
    assert_eq!(c.get_connect_timeout(), Some(&CONNECT_TIMEOUT));
    assert_eq!(c.get_application_name(), Some("plant-store"));
    let c = target("postgres://h/db?connect_timeout=2").unwrap().config;
    assert_eq!(c.get_connect_timeout(), Some(&Duration::from_secs(2)));
    assert!(target("postgres://h/db?sslmode=bogus").is_err());
}

#[test]
fn keepalive_notices_a_vanished_peer_unless_the_url_says_otherwise() {
    let c = target("postgres://h/db").unwrap().config;
    assert!(c.get_keepalives());
    assert_eq!(c.get_keepalives_idle(), KEEPALIVE_IDLE);
    assert_eq!(c.get_keepalives_interval(), Some(KEEPALIVE_INTERVAL));
    assert_eq!(c.get_keepalives_retries(), Some(KEEPALIVE_RETRIES));
    let c = target("postgres://h/db?keepalives_idle=60&keepalives_interval=9&keepalives_retries=1")
        .unwrap()
        .config;
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
    let token = Owner::Token {
        hash: [0x5a; 32],
        now: 1_700_000_000,
    };
    let batch = [
        job(Change::Create {
            owner: Owner::Principal("b".into()),
            id: -1,
            name: "x'); DROP TABLE plants; --".into(),
            tag: None,
        }),
        job(Change::Delete {
            owner: Owner::Principal("a".into()),
            id: 9,
        }),
        job(Change::Create {
            owner: Owner::Principal("a".into()),
            id: 2,
            name: "\0\u{0}é".into(),
            tag: Some(String::new()),
        }),
        job(Change::Delete {
            owner: token.clone(),
            id: 3,
        }),
    ];
    let marker = Marker {
        at: 1_700_000_000_000,
        nonce: [0xab; 16],
    };
    let ids: Vec<String> = (0..4).map(|i| format!("evt_0{i}")).collect();
    let mut order: Vec<usize> = (0..batch.len()).collect();
    order.sort_by_key(|&i| key(&batch[i].change));
    // The token's change first (its principal is not known yet), then by principal.
    assert_eq!(order, [3, 2, 1, 0]);
    let sql = group_sql(&batch, &order, &marker, Some(42), &ids);
    assert!(!sql.contains("DROP"), "{sql}");
    let (a, b, t) = (
        "convert_from(decode('61', 'hex'), 'UTF8')",
        "convert_from(decode('62', 'hex'), 'UTF8')",
        "(CASE WHEN left(current_setting('plant_store.t0'), 1) = '=' THEN substr(current_setting('plant_store.t0'), 2) END)",
    );
    let principals = format!(
        " FROM (SELECT DISTINCT p FROM (VALUES ({t}), ({a}), ({b})) v (p)) d WHERE p IS NOT NULL"
    );
    let (nul_e, drop) = (
        "decode('0000c3a9', 'hex'), decode('', 'hex')",
        "decode('7827293b2044524f50205441424c4520706c616e74733b202d2d', 'hex'), NULL",
    );
    assert_eq!(
        sql,
        format!(
            "BEGIN;\n\
             SELECT set_config('plant_store.outcomes', '', true);\n\
             SELECT set_config('plant_store.t0', coalesce((SELECT CASE WHEN scope NOT IN ('read', 'read-write') THEN '!u' WHEN expires_at <= 1700000000 THEN '!e' WHEN scope = 'read' THEN '!r' || principal ELSE '=' || principal END FROM tokens WHERE hash = decode('{}', 'hex')), '!u'), true);\n\
             INSERT INTO event_logs (principal, last_seq, last_at) SELECT p, 0, 0{principals} ORDER BY p COLLATE \"C\" ON CONFLICT (principal) DO UPDATE SET last_seq = event_logs.last_seq;\n\
             EXECUTE plant_store_delete({t}, 3, 1700000000000, 'evt_03');\n\
             EXECUTE plant_store_create({a}, 2, {nul_e}, 1700000000000, 'evt_02');\n\
             EXECUTE plant_store_delete({a}, 9, 1700000000000, 'evt_01');\n\
             EXECUTE plant_store_create({b}, -1, {drop}, 1700000000000, 'evt_00');\n\
             SELECT pg_notify('plant_store_events', CASE WHEN length(p) > 1000 THEN '' ELSE p END){principals};\n\
             SELECT length(set_config('plant_store.outcomes', current_setting('plant_store.outcomes') || ';' || encode(convert_to(current_setting('plant_store.t0'), 'UTF8'), 'hex'), true));\n\
             DELETE FROM plant_store_groups WHERE (at, nonce) IN (SELECT at, nonce FROM plant_store_groups WHERE at < 42 ORDER BY at LIMIT 1000);\n\
             INSERT INTO plant_store_groups (at, nonce, outcomes) VALUES (1700000000000, decode('{}', 'hex'), current_setting('plant_store.outcomes')) RETURNING outcomes;\n\
             COMMIT;",
            "5a".repeat(32),
            "ab".repeat(16)
        )
    );
    // The prepared statements append the events the feed names.
    assert!(PREPARE.contains(&format!("'{CREATED}'")) && PREPARE.contains(&format!("'{DELETED}'")));
    // Digits in the group's order (the token's delete, a's create of 2, a's delete of 9,
    // b's create), then what the token was found to be, in hex.
    let hex = |t: &str| t.bytes().map(|b| format!("{b:02x}")).collect::<String>();
    let owned = |applied| Outcome::Owned {
        principal: "c;d".into(),
        applied,
    };
    let answered = outcomes(&batch, &order, &format!("1100;{}", hex("=c;d"))).unwrap();
    assert_eq!(
        answered,
        [
            Outcome::Conflict,
            Outcome::NotFound,
            Outcome::Created,
            owned(true)
        ]
    );
    let refused = |found: &str| outcomes(&batch, &order, &format!("0100;{}", hex(found)));
    assert_eq!(
        refused("!u").unwrap()[3],
        Outcome::Refused(Refusal::Unknown)
    );
    assert_eq!(
        refused("!e").unwrap()[3],
        Outcome::Refused(Refusal::Expired)
    );
    assert_eq!(
        refused("!rc").unwrap()[3],
        Outcome::Refused(Refusal::ReadOnly("c".into()))
    );
    assert_eq!(
        refused("=c").unwrap()[3],
        Outcome::Owned {
            principal: "c".into(),
            applied: false
        }
    );
    // A principal that looks like a refusal is still a principal.
    assert_eq!(
        refused("=!u").unwrap()[3],
        Outcome::Owned {
            principal: "!u".into(),
            applied: false
        }
    );
    for bad in [
        "010",
        "0100;63", // no `=`: neither a principal nor a refusal
        "0100;",
        "01x0;63",
        "0100",
        "01001;63",
        "0100;63;63",
        "0100;6",
        "0100;zz",
        "1100;2175",
        "0100;217a",
    ] {
        assert!(outcomes(&batch, &order, bad).is_err(), "{bad}");
    }
}

#[test]
fn webhook_rows_are_locked_after_every_principal_s_in_id_order_with_the_database_s_clock() {
    let claim = |endpoint: &str| Change::Claim {
        endpoint: endpoint.into(),
        owner: "o'".into(),
        delivered: 4,
        failures: 1,
        last_seq: 9,
        lease_ms: 15_000,
        renew: false,
    };
    let batch = [
        job(claim("wh_b")),
        job(Change::Settle {
            endpoint: "wh_a".into(),
            owner: "o'".into(),
            seq: 7,
            attempt: Attempt::Failed {
                failures: 2,
                wait_ms: 5000,
                error: "x'); --".into(),
                active: false,
            },
        }),
        // A principal named like an endpoint still takes its rows first.
        job(Change::Delete {
            owner: Owner::Principal("wh_z".into()),
            id: 1,
        }),
        job(Change::Release {
            endpoint: "wh_0".into(),
            owner: "o'".into(),
        }),
    ];
    let mut order: Vec<usize> = (0..batch.len()).collect();
    order.sort_by_key(|&i| key(&batch[i].change));
    assert_eq!(order, [2, 3, 1, 0]);
    let marker = Marker {
        at: 1,
        nonce: [0; 16],
    };
    let ids = vec![String::new(), String::new(), "evt_00".into(), String::new()];
    let sql = group_sql(&batch, &order, &marker, None, &ids);
    assert!(!sql.contains("); --") && !sql.contains("'o''"), "{sql}");
    let now = "(extract(epoch from clock_timestamp()) * 1000)::bigint";
    let hex = |t: &str| {
        format!(
            "convert_from(decode('{}', 'hex'), 'UTF8')",
            t.bytes().map(|b| format!("{b:02x}")).collect::<String>()
        )
    };
    let (owner, a, b) = (hex("o'"), hex("wh_a"), hex("wh_b"));
    for part in [
        format!(
            "WITH r AS (UPDATE webhooks SET lease_until = 0 WHERE id = {} AND lease_owner = {owner} RETURNING 1)",
            hex("wh_0")
        ),
        format!(
            "WITH r AS (UPDATE webhooks SET failures = 2, due = {now} + 5000, last_error = {}, active = 0, lease_until = 0 WHERE id = {a} AND lease_owner = {owner} AND delivered = 6 RETURNING 1)",
            hex("x'); --")
        ),
        format!(
            "WITH r AS (UPDATE webhooks SET lease_owner = {owner}, lease_until = {now} + 15000 WHERE id = {b} AND active = 1 AND delivered = 4 AND failures = 1 AND coalesce((SELECT l.last_seq FROM event_logs l WHERE l.principal = webhooks.principal), 0) >= 9 AND due <= {now} AND (lease_until < {now} OR lease_owner = {owner}) RETURNING 1)"
        ),
    ] {
        assert!(sql.contains(&part), "{part}\nnot in\n{sql}");
    }
    // Digits in the group's order: the delete, the release, the settle, the claim.
    let answered = outcomes(&batch, &order, "0110").unwrap();
    assert_eq!(
        answered,
        [
            Outcome::Updated(false),
            Outcome::Updated(true),
            Outcome::NotFound,
            Outcome::Updated(true)
        ]
    );
}

#[test]
fn sslmode_and_sslrootcert_are_taken_out_of_the_url_and_read_as_libpq_reads_them() {
    use super::tls::{Mode, Settings, split};
    let settings = |mode, root: Option<&str>| Settings {
        mode,
        root_cert: root.map(str::to_owned),
    };
    let cases = [
        (
            "postgres://h/db",
            "postgres://h/db",
            settings(Mode::Prefer, None),
        ),
        (
            "postgres://h/db?sslmode=disable",
            "postgres://h/db",
            settings(Mode::Disable, None),
        ),
        (
            "postgres://h/db?connect_timeout=2&sslmode=verify-ca&sslrootcert=%2Ftmp%2Fca%20x.pem&application_name=a",
            "postgres://h/db?connect_timeout=2&application_name=a",
            settings(Mode::VerifyCa, Some("/tmp/ca x.pem")),
        ),
        (
            "postgres://h/db?sslmode=require",
            "postgres://h/db",
            settings(Mode::Require, None),
        ),
        (
            "postgres://h/db?sslrootcert=system",
            "postgres://h/db",
            settings(Mode::VerifyFull, Some("system")),
        ),
    ];
    // A raw `?` in the password: the parameters start after the credentials, as the
    // client reads them (it was taken for the start of the parameters, and require lost).
    let (rest, settings) = split("postgres://u:pa?ss@h/db?sslmode=require").unwrap();
    assert_eq!(rest, "postgres://u:pa?ss@h/db");
    assert_eq!(settings.mode, Mode::Require);
    let (_, settings) =
        split("postgres://u:x?sslmode=disable@h/db?sslmode=verify-ca&sslrootcert=%2Fca").unwrap();
    assert_eq!(settings.mode, Mode::VerifyCa);
    // Keys are decoded as the client decodes them.
    assert_eq!(
        split("postgres://h/db?ssl%6Dode=require").unwrap().1.mode,
        Mode::Require
    );
    for (url, rest, expected) in cases {
        assert_eq!(split(url).unwrap(), (rest.to_owned(), expected), "{url}");
    }
    for bad in [
        "postgres://h/db?sslmode=verify",
        "postgres://h/db?sslmode=allow",
        "postgres://h/db?sslmode=require&sslrootcert=system",
        "postgres://h/db?sslrootcert=%2",
        "postgres://h/db?sslrootcert=%zz",
        "postgres://h/db?sslmode=verify-full&sslmode=disable",
        "postgres://h/db?sslrootcert=%2Fa&sslrootcert=%2Fb",
    ] {
        assert!(split(bad).is_err(), "{bad}");
    }
    // Anything that asks for TLS is TLS or nothing for the client.
    use postgres::config::SslMode;
    assert_eq!(Mode::Prefer.client_mode(), SslMode::Prefer);
    for mode in [Mode::Require, Mode::VerifyCa, Mode::VerifyFull] {
        assert_eq!(mode.client_mode(), SslMode::Require);
    }
}

#[test]
fn a_root_certificate_that_is_missing_or_holds_none_is_refused_before_connecting() {
    let dir = std::env::temp_dir().join(format!("plant-store-tls-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let empty = dir.join("empty.pem");
    std::fs::write(&empty, "not a certificate\n").unwrap();
    let missing = dir.join("missing.pem");
    for (root, says) in [(&empty, "no certificate in it"), (&missing, "missing.pem")] {
        let url = format!(
            "postgres://h/db?sslmode=verify-full&sslrootcert={}",
            root.display()
        );
        let e = target(&url).err().expect(&url);
        assert!(e.0.contains(says), "{}", e.0);
    }
    // verify-* with no root certificate anywhere says how to name one; require without
    // one encrypts and checks nothing, as libpq.
    use super::tls::{Mode, Settings, connector_at_home};
    let none = |mode| Settings {
        mode,
        root_cert: None,
    };
    for mode in [Mode::VerifyCa, Mode::VerifyFull] {
        let e = connector_at_home(&none(mode), Some(dir.clone()))
            .err()
            .unwrap();
        assert!(e.0.contains("sslrootcert=FILE"), "{}", e.0);
    }
    assert!(connector_at_home(&none(Mode::Require), Some(dir.clone())).is_ok());
    // ~/.postgresql/root.crt is read when it exists, and refused when it holds none.
    std::fs::create_dir_all(dir.join(".postgresql")).unwrap();
    std::fs::write(dir.join(".postgresql/root.crt"), "not a certificate\n").unwrap();
    for mode in [Mode::Require, Mode::VerifyCa, Mode::VerifyFull] {
        let e = connector_at_home(&none(mode), Some(dir.clone()))
            .err()
            .unwrap();
        assert!(e.0.contains("root.crt: no certificate in it"), "{}", e.0);
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
