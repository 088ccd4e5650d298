use super::*;

#[test]
fn migrations_are_numbered_in_order_from_one() {
    schema::assert_numbered(schema::SCHEMA);
}

#[test]
fn every_worker_shares_one_set_of_stream_readers() {
    let store = Store::open(
        &Location::parse(":memory:"),
        2,
        std::time::Duration::from_secs(60),
        Default::default(),
        Default::default(),
    )
    .unwrap();
    let (a, b) = (store.connect().unwrap(), store.connect().unwrap());
    assert!(Arc::ptr_eq(&a.readers().0, &b.readers().0));
    drop((a, b));
    store.close();
}

/// A location as a log line shows it.
fn shown(db: &str) -> String {
    Location::parse(db).to_string()
}

#[test]
fn a_password_never_reaches_a_log_line() {
    if !postgres::AVAILABLE {
        // A build without PostgreSQL refuses the URL and shows none of it.
        assert_eq!(shown("postgres://app:s3cret@h/db"), "a PostgreSQL URL");
        assert_eq!(shown("plants.db"), "plants.db");
        let refused = Store::open(
            &Location::parse("postgres://app:s3cret@h/db"),
            2,
            std::time::Duration::from_secs(60),
            Default::default(),
            Default::default(),
        );
        let err = refused.err().unwrap().to_string();
        assert!(
            err.contains("without the `postgres` cargo feature"),
            "{err}"
        );
        let err = Tokens::open(&Location::parse("postgres://h/db"), false)
            .err()
            .unwrap()
            .0;
        assert!(
            err.contains("without the `postgres` cargo feature"),
            "{err}"
        );
        return;
    }
    assert_eq!(
        shown("postgres://app:s3cret@db.example:5432/plants?sslmode=disable"),
        "postgres://app:***@db.example:5432/plants?…"
    );
    assert_eq!(
        shown("postgresql://h/db?user=app&password=s3cret"),
        "postgresql://h/db?…"
    );
    assert_eq!(shown("postgres://app@h"), "postgres://app@h");
    assert_eq!(shown("plants:x@y.db"), "plants:x@y.db");
    for url in [
        "postgres://app:pa?ss@h/db",
        "postgres://app:a?b@c?d@h:5432/db?x=1",
        "postgres://h/db?user=a@b&password=s3cret",
    ] {
        assert_eq!(shown(url), "postgres://…", "{url}");
    }
    assert_eq!(
        shown("postgres://app:p@ss/w:rd@h/db"),
        "postgres://app:***@h/db"
    );
    assert_eq!(
        format!("{:?}", Location::parse("postgres://app:s3cret@h/db")),
        "postgres://app:***@h/db"
    );
}

#[test]
fn urls_name_postgres_and_anything_else_is_sqlite() {
    assert!(matches!(
        Location::parse("postgres://u@h/db"),
        Location::Postgres(_)
    ));
    assert!(matches!(
        Location::parse("postgresql://h/db"),
        Location::Postgres(_)
    ));
    assert!(matches!(Location::parse("postgres.db"), Location::File(_)));
    assert!(matches!(Location::parse(":memory:"), Location::Memory(_)));
}

#[test]
fn each_change_gets_its_own_event_id_and_other_jobs_none() {
    let job = |change| Job {
        change,
        done: Box::new(|_| {}),
    };
    let delete = |id| Change::Delete {
        owner: Owner::Principal("a".into()),
        id,
    };
    let batch = [
        delete(1),
        Change::Probe,
        delete(2),
        Change::Sweep {
            before_ms: 0,
            future_ms: 0,
            hold_before_ms: 0,
        },
    ]
    .map(job);
    let ids = crate::store::ids::event_ids(&Default::default(), &batch).unwrap();
    assert_eq!(ids[1], "");
    assert_eq!(ids[3], "");
    for id in [&ids[0], &ids[2]] {
        let hex = id.strip_prefix("evt_").expect("evt_");
        assert_eq!(hex.len(), 32, "{id}");
        assert!(
            hex.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)),
            "{id}"
        );
    }
    assert_ne!(ids[0], ids[2]);
}

/// A commit's wait for the database is measured on the monotonic clock, which no step of
/// the wall clock moves.
#[test]
fn a_stalled_commit_is_measured_on_the_monotonic_clock() {
    use std::sync::atomic::Ordering;
    let health = super::writer::Health::default();
    let now = health.uptime_millis();
    health.committing_since.store(now, Ordering::Relaxed);
    assert!(health.stalled().is_ok());
    health.committing_since.store(
        now - super::writer::COMMIT_STALL_MS - 1000,
        Ordering::Relaxed,
    );
    assert!(health.stalled().is_err());
}

/// A sweep's cutoffs are the writer's reading as it commits the sweep, not what the
/// sweeping thread read before (on a test clock that a reset has since undone, say): a
/// sweep sent with cutoffs far ahead removes nothing younger than the retention.
#[test]
fn a_sweep_is_read_by_the_writer_as_it_commits() {
    let store = Store::open(
        &Location::parse(":memory:"),
        1,
        std::time::Duration::from_secs(3600),
        Default::default(),
        Default::default(),
    )
    .unwrap();
    let db = store.connect().unwrap();
    let create = Change::Create {
        owner: Owner::Principal("a".into()),
        id: 1,
        name: "x".into(),
        tag: None,
    };
    assert_eq!(db.write(create).unwrap(), Outcome::Created);
    let far = i64::MAX / 4;
    let sweep = Change::Sweep {
        before_ms: far,
        future_ms: far,
        hold_before_ms: far,
    };
    assert!(matches!(db.write(sweep).unwrap(), Outcome::Swept { .. }));
    assert_eq!(db.events_page("a", 0, 10, |_| {}).unwrap(), 1);
    drop(db);
    store.close();
}
