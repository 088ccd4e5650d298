//! The black-box test suite: one crate, one module per area. Every test starts the real
//! binary through `support::TestServer` and talks HTTP to it. It runs on SQLite, or on
//! PostgreSQL with `PLANT_STORE_TEST_BACKEND=postgres` (`scripts/test` runs both).

mod api;
mod arrival;
mod backups;
mod clock;
mod connections;
mod control;
mod control_clock;
mod control_guide;
mod control_restore;
mod control_same_bytes;
mod control_seeded;
mod control_store;
mod control_suite;
mod documents;
mod durability;
mod event_streams;
mod events;
mod faults;
mod faults_later;
mod files;
mod framing;
mod lists;
mod logs;
mod lost_commit;
mod metrics;
mod options;
mod panics;
mod plants;
mod read_only_root;
mod robustness;
mod scale_out;
mod service;
mod static_build;
mod store_faults;
mod support;
mod tls;
mod tokens;
mod webhooks;
