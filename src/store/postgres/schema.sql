-- plant-store schema for PostgreSQL (the `postgres` feature): the migrations of
-- plants.sql, version for version, in PostgreSQL's dialect. Each "-- version N" block
-- runs in one transaction that holds an advisory lock, on a database whose
-- plant_store_schema.version is below N. Never edit a released block: append a new one.
--
-- text cannot hold U+0000, which a plant's name or tag may contain, so they are bytea
-- holding the UTF-8 bytes exactly (convert_from(name, 'UTF8') shows one without NUL).

-- version 1
CREATE TABLE plants (
    principal text   NOT NULL,
    id        bigint NOT NULL,
    name      bytea  NOT NULL,
    tag       bytea,
    PRIMARY KEY (principal, id)
);

-- version 2
CREATE TABLE tokens (
    public_id  text   NOT NULL PRIMARY KEY,
    hash       bytea  NOT NULL UNIQUE,
    principal  text   NOT NULL,
    scope      text   NOT NULL CHECK (scope IN ('read', 'read-write')),
    created_at bigint NOT NULL
);

-- version 3
ALTER TABLE tokens ADD COLUMN expires_at bigint;

-- version 4
-- One row per group of writes, written in the group's own transaction. When the answer to
-- a group's COMMIT is lost, the writer looks its marker up after reconnecting, to learn
-- whether the group took effect and what each change did: `outcomes` has a digit per
-- change, in the group's order (1 applied; 0 not: a conflict, or no such plant). Rows
-- older than an hour are removed as groups go by.
CREATE TABLE plant_store_groups (
    at       bigint NOT NULL,
    nonce    bytea  NOT NULL,
    outcomes text   NOT NULL,
    PRIMARY KEY (at, nonce)
);

-- version 5
-- The change feed: as in plants.sql. Writers take a principal's event_logs row before
-- any of its plants' rows, so the row's lock orders that principal's events by commit.
CREATE TABLE event_logs (
    principal text   NOT NULL PRIMARY KEY,
    last_seq  bigint NOT NULL,
    last_at   bigint NOT NULL
);
CREATE TABLE events (
    principal text   NOT NULL,
    seq       bigint NOT NULL,
    id        text   NOT NULL,
    kind      text   NOT NULL CHECK (kind IN ('plant.created', 'plant.deleted')),
    at        bigint NOT NULL,
    plant     bigint NOT NULL,
    name      bytea,
    tag       bytea,
    PRIMARY KEY (principal, seq)
);
-- The retention sweep removes the oldest first, and within one time by principal and
-- seq: `at` never goes back within a log, so what a sweep removes of a log is always a
-- prefix of it (never a hole).
CREATE INDEX events_by_age ON events (at, principal, seq);

-- version 6
-- Webhook endpoints: as in plants.sql.
CREATE TABLE webhooks (
    id          text    NOT NULL PRIMARY KEY,
    principal   text    NOT NULL,
    url         text    NOT NULL,
    secret      text    NOT NULL,
    created_at  bigint  NOT NULL,
    active      integer NOT NULL CHECK (active IN (0, 1)),
    delivered   bigint  NOT NULL,
    failures    integer NOT NULL DEFAULT 0,
    due         bigint  NOT NULL DEFAULT 0,
    last_error  text,
    lease_owner text    NOT NULL DEFAULT '',
    lease_until bigint  NOT NULL DEFAULT 0
);
CREATE INDEX webhooks_by_principal ON webhooks (principal, delivered);

-- version 7
-- As in plants.sql: nothing reads events by age (the sweep goes by the primary key).
-- SQLite's other version 7 changes have no twin: here each group takes and updates its
-- principals' event_logs rows, whose locks order their events by commit (no log_tails),
-- and events keep their id and kind as text (the server's pages and write-ahead log are
-- PostgreSQL's own).
DROP INDEX events_by_age;

-- version 8
-- Nothing on PostgreSQL: SQLite's version 8 marks a file that test control has written,
-- and test control is SQLite's only.
