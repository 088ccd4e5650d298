use super::*;
use crate::store::seam::{Change, Outcome, Owner, SWEEP_ROWS};
use crate::store::{Db, Store};
use reads::LIST_PAGE;

fn create(
    db: &Db,
    principal: &str,
    id: i64,
    name: String,
    tag: Option<String>,
) -> StoreResult<Outcome> {
    db.write(Change::Create {
        owner: Owner::Principal(principal.to_owned()),
        id,
        name,
        tag,
    })
}

fn delete(db: &Db, principal: &str, id: i64) -> StoreResult<Outcome> {
    db.write(Change::Delete {
        owner: Owner::Principal(principal.to_owned()),
        id,
    })
}

#[test]
fn group_commit_answers_each_change_and_isolates_principals() {
    let store = Store::open(
        &Location::parse(":memory:"),
        1,
        std::time::Duration::from_secs(60),
        Default::default(),
        Default::default(),
    )
    .unwrap();
    let db = store.connect().unwrap();
    assert_eq!(
        create(&db, "a", 7, "x".into(), None).unwrap(),
        Outcome::Created
    );
    assert_eq!(
        create(&db, "a", 7, "y".into(), None).unwrap(),
        Outcome::Conflict
    );
    assert_eq!(
        create(&db, "b", 7, "z".into(), Some("t".into())).unwrap(),
        Outcome::Created
    );
    let mut seen = Vec::new();
    db.list_page("a", i64::MIN, 10, |id, name, tag| {
        seen.push((id, name.to_owned(), tag.map(str::to_owned)))
    })
    .unwrap();
    assert_eq!(seen, vec![(7, "x".to_owned(), None)]);
    assert_eq!(delete(&db, "b", 7).unwrap(), Outcome::Deleted);
    assert_eq!(delete(&db, "b", 7).unwrap(), Outcome::NotFound);
    assert_eq!(delete(&db, "a", 8).unwrap(), Outcome::NotFound);
    drop(db);
    store.close();
}

#[test]
fn the_list_statement_is_compiled_once() {
    let location = Location::parse(":memory:");
    let (writer, _) = location.open_writer().unwrap();
    writer
        .execute(
            "INSERT INTO plants (principal, id, name, tag) VALUES ('a', 1, 'x', NULL)",
            [],
        )
        .unwrap();
    let reads = WorkerReads {
        conn: location.open(true).unwrap(),
        file: None,
    };
    for from in 0..50 {
        reads.list_page("a", from, 10, &mut |_, _, _| {}).unwrap();
    }
    let st = reads.conn.prepare_cached(LIST_PAGE).unwrap();
    assert_eq!(st.get_status(rusqlite::StatementStatus::RePrepare), 0);
    assert_eq!(st.get_status(rusqlite::StatementStatus::Run), 50);
}

#[test]
fn a_full_disk_fails_writes_and_health_until_space_is_freed() {
    let dir = std::env::temp_dir().join(format!("plant-store-full-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let location = Location::File(dir.join("full.db"));
    let (conn, held) = location.open_writer().unwrap();
    // A database that may not grow past 12 KiB more: a disk that fills up.
    let (pages, size): (i64, i64) = conn
        .query_row(
            "SELECT page_count, page_size FROM pragma_page_count, pragma_page_size",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    conn.query_row(
        &format!("PRAGMA max_page_count = {}", pages + 12 * 1024 / size),
        [],
        |_| Ok(()),
    )
    .unwrap();
    let (database, writer) = Database::with_writer(location, conn, held, None).unwrap();
    let opened = Opened {
        streams: std::sync::Arc::new(database.streams()),
        backend: Box::new(database),
        writer: Box::new(writer),
    };
    let store = Store::start(
        opened,
        Default::default(),
        std::time::Duration::from_secs(60).into(),
        Default::default(),
        Default::default(),
    )
    .unwrap();
    let db = store.connect().unwrap();
    // Fill it with ever smaller rows until not even a one-byte name fits.
    let mut created = 0;
    for size in [1000, 100, 10, 1] {
        let err = loop {
            match create(&db, "a", created, "x".repeat(size), None) {
                Ok(Outcome::Created) => created += 1,
                Ok(other) => panic!("{other:?}"),
                Err(e) => break e,
            }
            assert!(created < 100_000, "the database never filled up");
        };
        assert!(err.0.contains("full"), "{err}");
    }
    assert!(
        db.check().is_err(),
        "health must fail while nothing can be written"
    );
    let mut listed = 0;
    db.list_page("a", i64::MIN, 1000, |_, _, _| listed += 1)
        .unwrap();
    assert_eq!(listed, created, "the refused write left nothing behind");
    // Space comes back (another connection, with no page limit, removes the plants; a
    // delete through the store appends an event, which may need pages the full file has
    // not): health recovers by itself, and writes work again.
    let other = rusqlite::Connection::open(dir.join("full.db")).unwrap();
    other.busy_timeout(BUSY_TIMEOUT).unwrap();
    other.execute("DELETE FROM plants", []).unwrap();
    drop(other);
    assert_eq!(
        create(&db, "a", 0, "y".into(), None).unwrap(),
        Outcome::Created
    );
    db.check().unwrap();
    drop(db);
    store.close();
    let _ = std::fs::remove_dir_all(dir);
}

/// A change given by its token is made for the token's principal, or refused by
/// `writer_of`'s rule (unknown, expired, then read-only), and appends an event only when
/// made.
#[test]
fn a_change_given_by_its_token_is_made_for_its_principal_or_refused() {
    use crate::store::seam::{Refusal, Scope, TokenRecord};
    let dir = std::env::temp_dir().join(format!("plant-store-owner-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let location = Location::File(dir.join("owner.db"));
    let store = Store::open(
        &location,
        1,
        std::time::Duration::from_secs(60),
        Default::default(),
        Default::default(),
    )
    .unwrap();
    let mut tokens = crate::store::Tokens::open(&location, false).unwrap();
    let now = 1_700_000_000;
    for (n, scope, expires_at) in [
        (1u8, Scope::ReadWrite, None),
        (2, Scope::Read, None),
        (3, Scope::ReadWrite, Some(now)),
        (4, Scope::ReadWrite, Some(now + 1)),
    ] {
        let record = TokenRecord {
            public_id: format!("id{n}"),
            principal: format!("p{n}"),
            scope,
            created_at: 0,
            expires_at,
        };
        tokens.add(&record, &[n; 32]).unwrap();
    }
    let db = store.connect().unwrap();
    let create = |n: u8, id| {
        db.write(Change::Create {
            owner: Owner::Token { hash: [n; 32], now },
            id,
            name: "x".into(),
            tag: None,
        })
        .unwrap()
    };
    let owned = |p: &str, applied| Outcome::Owned {
        principal: p.into(),
        applied,
    };
    assert_eq!(create(1, 7), owned("p1", true));
    assert_eq!(create(1, 7), owned("p1", false));
    assert_eq!(create(4, 7), owned("p4", true), "expires after now");
    assert_eq!(
        create(2, 8),
        Outcome::Refused(Refusal::ReadOnly("p2".into()))
    );
    assert_eq!(create(3, 8), Outcome::Refused(Refusal::Expired));
    assert_eq!(create(9, 8), Outcome::Refused(Refusal::Unknown));
    let delete = db.write(Change::Delete {
        owner: Owner::Token { hash: [1; 32], now },
        id: 7,
    });
    assert_eq!(delete.unwrap(), owned("p1", true));
    let seqs = |p: &str| {
        let mut seqs = Vec::new();
        db.events_page(p, 0, 10, |e| seqs.push(e.seq)).unwrap();
        seqs
    };
    assert_eq!((seqs("p1"), seqs("p4")), (vec![1, 2], vec![1]));
    for p in ["p2", "p3"] {
        assert!(seqs(p).is_empty(), "{p} has events");
        let mut plants = 0;
        db.list_page(p, i64::MIN, 10, |_, _, _| plants += 1)
            .unwrap();
        assert_eq!(plants, 0, "{p} has plants");
    }
    drop(db);
    store.close();
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_panic_on_a_lent_reader_gives_its_place_back() {
    let store = Store::open(
        &Location::parse(":memory:"),
        1,
        std::time::Duration::from_secs(60),
        Default::default(),
        Default::default(),
    )
    .unwrap();
    let db = store.connect().unwrap();
    create(&db, "a", 1, "x".into(), None).unwrap();
    let readers = db.readers();
    // Without the place given back, the third look would wait for ever for a reader.
    let (done, listed) = std::sync::mpsc::channel();
    let lent = readers.clone();
    std::thread::spawn(move || {
        for _ in 0..=crate::store::seam::STREAM_READERS {
            let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                lent.list_page("a", 0, 10, |_, _, _| panic!("a row's consumer panicked"))
            }));
            assert!(panicked.is_err());
        }
        let _ = done.send(lent.list_page("a", 0, 10, |_, _, _| {}));
    });
    let seen = listed
        .recv_timeout(std::time::Duration::from_secs(5))
        .expect("a reader is free again");
    assert_eq!(seen.unwrap(), 1);
    drop((db, readers));
    store.close();
}

/// The sweep removes a prefix of each log by seq: up to the last event past the cutoff
/// once the first is past it or stamped ahead, never past an active endpoint's cursor
/// (unless the endpoint held its next event past the hold: then it is disabled), and at
/// most `SWEEP_ROWS` in all.
#[test]
fn the_sweep_removes_prefixes_by_seq_around_cursors_and_stamps_ahead() {
    let conn = Connection::open_in_memory().unwrap();
    migrate(&conn, |_| Ok(())).unwrap();
    let (old, young, ahead) = (100, 500, 1000);
    let log = |p: &str, ats: &[i64]| {
        for (i, at) in ats.iter().enumerate() {
            conn.execute(
                "INSERT INTO events VALUES (?1, ?2, ?3, 2, ?4, 1, NULL, NULL)",
                rusqlite::params![p, i as i64 + 1, format!("{p}{i}").into_bytes(), at],
            )
            .unwrap();
        }
        // As a log's first event leaves its row (plants.sql, version 7).
        conn.execute("INSERT INTO event_logs VALUES (?1, 1, 0)", [p])
            .unwrap();
    };
    log("a", &[ahead, old, young, young]);
    log("b", &[old; 5]);
    log("c", &[young, old]);
    log("cc", &[old, young, old]);
    log("d", &[old; 2500]);
    conn.execute(
        "INSERT INTO webhooks (id, principal, url, secret, created_at, active, delivered)
         VALUES ('wh_b', 'b', 'http://x/', 's', 0, 1, 2)",
        [],
    )
    .unwrap();
    let seqs = |p: &str| -> Vec<i64> {
        let mut st = conn
            .prepare("SELECT seq FROM events WHERE principal = ?1 ORDER BY seq")
            .unwrap();
        st.query_map([p], |r| r.get(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap()
    };
    let sweep = |hold_before| sweep::sweep(&conn, 200, 600, hold_before).unwrap();
    assert_eq!(sweep(0), Outcome::Swept { more: true });
    assert_eq!(seqs("a"), [3, 4], "the one stamped ahead goes with seq 2");
    assert_eq!(seqs("b"), [3, 4, 5], "kept for the endpoint at 2");
    assert_eq!(seqs("c"), [1, 2], "the first is young: kept");
    assert_eq!(
        seqs("cc"),
        [2, 3],
        "one stamped behind waits for the young before it"
    );
    assert_eq!(seqs("d").len(), 2500 - (SWEEP_ROWS as usize - 5));
    // The endpoint's next event is older than the hold allows: it is disabled, and the
    // rest of b goes, as does the rest of d.
    assert_eq!(sweep(150), Outcome::Swept { more: false });
    assert_eq!(seqs("b"), Vec::<i64>::new());
    assert_eq!(seqs("d"), Vec::<i64>::new());
    // With every event removed, a log still ends where it did.
    let last = |p: &str| -> i64 {
        conn.query_row(
            "SELECT last_seq FROM log_tails WHERE principal = ?1",
            [p],
            |r| r.get(0),
        )
        .unwrap()
    };
    assert_eq!((last("b"), last("d"), last("a")), (5, 2500, 4));
    let (active, error): (i64, String) = conn
        .query_row(
            "SELECT active, last_error FROM webhooks WHERE id = 'wh_b'",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert_eq!(
        (active, error.as_str()),
        (
            0,
            "the event at seq 3 was held past the retention and --webhook-hold: disabled"
        )
    );
}

/// Every connection keeps SQLite's temporary data in memory, so it never writes a
/// temporary file (docs/device.md, "A read-only root"); a lent one has the small
/// lookaside (`LOOKASIDE_SLOTS`) instead of SQLite's 48 KiB.
#[test]
fn connections_keep_temporary_data_in_memory_and_lent_ones_a_small_lookaside() {
    let dir = std::env::temp_dir().join(format!("plant-store-temp-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let location = Location::File(dir.join("t.db"));
    drop(location.open(false).unwrap());
    for (conn, small) in [
        (location.open(false).unwrap(), false),
        (location.open(true).unwrap(), false),
        (location.open_lent().unwrap(), true),
    ] {
        let temp: i64 = conn
            .query_row("PRAGMA temp_store", [], |r| r.get(0))
            .unwrap();
        assert_eq!(temp, 2, "temp_store=MEMORY");
        let (mut used, mut most) = (0, 0);
        // SAFETY: the open connection's handle, and two ints to write.
        let rc = unsafe {
            rusqlite::ffi::sqlite3_db_status(
                conn.handle(),
                rusqlite::ffi::SQLITE_DBSTATUS_LOOKASIDE_USED,
                &mut used,
                &mut most,
                0,
            )
        };
        assert_eq!(rc, 0);
        // 6 slots of 1,200 bytes and 18 of 128 (SQLite splits the 9,600 bytes so); more
        // with SQLite's default.
        assert_eq!(most <= 24, small, "{most} lookaside slots in use at most");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
