-- plant-store schema, embedded in the binary and applied at start.
--
-- The file is a list of migrations. Each starts with a line "-- version N" and runs, in
-- one transaction, on a database whose PRAGMA user_version is below N; user_version is
-- then set to N. Never edit a released block: append a new one, and its PostgreSQL twin
-- to src/store/postgres/schema.sql.

-- version 1
-- Plants, keyed by owner and id: each principal has its own id space.
CREATE TABLE plants (
    principal TEXT    NOT NULL,
    id        INTEGER NOT NULL,
    name      TEXT    NOT NULL,
    tag       TEXT,
    PRIMARY KEY (principal, id)
) WITHOUT ROWID;

-- version 2
-- Bearer tokens made by `plant-store token add`. Only the SHA-256 of a token is kept.
CREATE TABLE tokens (
    public_id  TEXT    NOT NULL PRIMARY KEY,
    hash       BLOB    NOT NULL UNIQUE,
    principal  TEXT    NOT NULL,
    scope      TEXT    NOT NULL CHECK (scope IN ('read', 'read-write')),
    created_at INTEGER NOT NULL
);

-- version 3
-- A token may expire: seconds since the Unix epoch (UTC); NULL never expires.
ALTER TABLE tokens ADD COLUMN expires_at INTEGER;

-- version 4
-- Nothing on SQLite: this version adds PostgreSQL's write markers (src/store/postgres/schema.sql),
-- and the two files keep one numbering.

-- version 5
-- The change feed (docs/api.md, "Events"). A principal's log: its last seq and the time
-- of its newest event (milliseconds since the Unix epoch). The row outlives every event
-- retention removes, so seq never restarts and timestamps never go back.
CREATE TABLE event_logs (
    principal TEXT    NOT NULL PRIMARY KEY,
    last_seq  INTEGER NOT NULL,
    last_at   INTEGER NOT NULL
) WITHOUT ROWID;
-- One row per event, written in the transaction of its change: `plant` is the plant's id;
-- `name` and `tag` are the created plant's as stored (NULL for a deletion).
CREATE TABLE events (
    principal TEXT    NOT NULL,
    seq       INTEGER NOT NULL,
    id        TEXT    NOT NULL,
    kind      TEXT    NOT NULL CHECK (kind IN ('plant.created', 'plant.deleted')),
    at        INTEGER NOT NULL,
    plant     INTEGER NOT NULL,
    name      TEXT,
    tag       TEXT,
    PRIMARY KEY (principal, seq)
) WITHOUT ROWID;
-- The retention sweep removes the oldest first, and within one time by principal and
-- seq: `at` never goes back within a log, so what a sweep removes of a log is always a
-- prefix of it (never a hole).
CREATE INDEX events_by_age ON events (at, principal, seq);

-- version 6
-- Webhook endpoints (docs/api.md, "Webhooks"), made by `plant-store webhook add`. `secret`
-- is the signing key as shown once (`whsec_` + base64): deliveries need it, so the file
-- holds it. `delivered` is the endpoint's cursor: the last seq of its principal's log it
-- has delivered (at `add`, the log's last seq then); it only moves forward, by one, after a
-- 2xx. `failures` counts the failed attempts at the next event, `due` (milliseconds since
-- the Unix epoch) is when the next attempt may start; `lease_owner`/`lease_until` name the
-- process that makes the attempts now, so one process makes each attempt.
CREATE TABLE webhooks (
    id          TEXT    NOT NULL PRIMARY KEY,
    principal   TEXT    NOT NULL,
    url         TEXT    NOT NULL,
    secret      TEXT    NOT NULL,
    created_at  INTEGER NOT NULL,
    active      INTEGER NOT NULL CHECK (active IN (0, 1)),
    delivered   INTEGER NOT NULL,
    failures    INTEGER NOT NULL DEFAULT 0,
    due         INTEGER NOT NULL DEFAULT 0,
    last_error  TEXT,
    lease_owner TEXT    NOT NULL DEFAULT '',
    lease_until INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX webhooks_by_principal ON webhooks (principal, delivered);

-- version 7
-- Flash wear (docs/device.md, "Flash wear"): every page a commit changes is written to
-- the disk, so a create changes only its plant's page and its event's, and an event's row
-- is small (the fewer rows a page holds, the more often a page is split).
-- The sweep removes a log's prefix by its primary key (src/store/sqlite/sweep.rs) and
-- nothing reads events by age: events_by_age only cost each event a page written.
DROP INDEX events_by_age;
-- Events again, smaller: `id` is the 16 bytes its text (`evt_` and 32 hex digits) shows,
-- `kind` is 1 for plant.created and 2 for plant.deleted. Copied over, in one step.
ALTER TABLE events RENAME TO events_v6;
CREATE TABLE events (
    principal TEXT    NOT NULL,
    seq       INTEGER NOT NULL,
    id        BLOB    NOT NULL,
    kind      INTEGER NOT NULL CHECK (kind IN (1, 2)),
    at        INTEGER NOT NULL,
    plant     INTEGER NOT NULL,
    name      TEXT,
    tag       TEXT,
    PRIMARY KEY (principal, seq)
) WITHOUT ROWID;
INSERT INTO events SELECT principal, seq, unhex(substr(id, 5)),
    CASE kind WHEN 'plant.created' THEN 1 ELSE 2 END, at, plant, name, tag FROM events_v6;
DROP TABLE events_v6;
-- A log's last seq and time are its last event's: an event_logs row is no longer written
-- by each commit, only made with its principal's first event, and brought up to its last
-- event by the sweep before it removes events (so seq never restarts and times never go
-- back, with every event removed). A log as it is: the greater of its row and its last
-- event.
CREATE VIEW log_tails AS SELECT l.principal AS principal,
    max(l.last_seq, coalesce((SELECT max(e.seq) FROM events e WHERE e.principal = l.principal), 0))
        AS last_seq,
    coalesce((SELECT e.at FROM events e WHERE e.principal = l.principal AND e.seq > l.last_seq
              ORDER BY e.seq DESC LIMIT 1), l.last_at) AS last_at
    FROM event_logs l;

-- version 8
-- A file that test control has written (docs/testing.md, "A file of its own"): a row
-- each time a server with --test-control opens the file (`first_at`, milliseconds
-- since the Unix epoch; their count varies a --test-seed's event ids, which so never
-- repeat within the file's life). A server without test control refuses such a file unless
-- --allow-test-file accepts it: tokens minted under a known --test-seed would work there.
-- A backup, a snapshot and a compaction keep the row.
CREATE TABLE test_control (
    first_at INTEGER NOT NULL
);
