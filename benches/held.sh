#!/usr/bin/env bash
# Write latency while a webhook endpoint holds many events (issue 28, item 12):
#
#   benches/held.sh ROUNDS SECONDS HELD BINARY...
#
# Each round, for each binary (alternating, so that the machine's drift hits all alike): a
# fresh SQLite database with a token of principal `bench` and an active webhook endpoint
# of `bench` that never delivers (it posts to a closed port, then waits 30 days), then
# HELD events of `bench` written directly with SQL, stamped 8 days ago: past the default
# 7-day retention, within the default --webhook-hold, so the endpoint holds them all.
# The server (pinned to CPU 0) then takes 1,000 creates a second of `bench` from 8
# keep-alive clients (benches/held_probe.py, on CPU 1, open loop: a create's latency
# counts from its time in the schedule) for SECONDS, while the retention sweep runs every
# 2 s; prints the creates' count and their latency's p50, p99 and max (client side).
# Build the binaries with `cargo build --release --locked`. On a shared machine, run it
# under `chrt -f 10` (as root), so that other processes' load stays out of the figures:
#
#   chrt -f 10 benches/held.sh 3 20 1000000 ./plant-store-cbe0037 ./plant-store
set -euo pipefail
cd "$(dirname "$0")/.."
. benches/tokens.sh
ROUNDS=$1 SECS=$2 HELD=$3; shift 3
PORT=29300
for round in $(seq "$ROUNDS"); do
  for BIN in "$@"; do
    PORT=$((PORT + 1)); D=$(mktemp -d)
    TOK=$(bench_token "$BIN" bench "$D/p.db")
    "$BIN" webhook add bench "http://127.0.0.1:1/" --db "$D/p.db" >/dev/null
    python3 - "$D/p.db" "$HELD" <<'PY'
import sqlite3, sys, time
db, n = sys.argv[1], int(sys.argv[2])
c = sqlite3.connect(db)
at = int(time.time() * 1000) - 8 * 86_400_000
with c:
    c.executemany(
        "INSERT INTO events (principal, seq, id, kind, at, plant, name, tag) "
        "VALUES ('bench', ?, ?, 'plant.created', ?, ?, 'held', NULL)",
        ((i, "evt_%032x" % i, at, i) for i in range(1, n + 1)))
    c.execute("INSERT INTO event_logs (principal, last_seq, last_at) VALUES ('bench', ?, ?) "
              "ON CONFLICT (principal) DO UPDATE SET last_seq = excluded.last_seq, "
              "last_at = excluded.last_at", (n, at))
c.execute("PRAGMA wal_checkpoint(TRUNCATE)")
c.close()
PY
    taskset -c 0 env -u PLANT_STORE_TOKEN "$BIN" --addr "127.0.0.1:$PORT" --db "$D/p.db" \
      --webhook-schedule 30d --log-level warn >"$D/log" 2>&1 &
    PID=$!
    for _ in $(seq 200); do curl -s -o /dev/null "localhost:$PORT/healthz" && break; sleep 0.05; done
    # Let the endpoint make its one attempt and the first sweeps run.
    sleep 3
    echo "round $round held=$HELD $BIN $(taskset -c 1 python3 benches/held_probe.py "$PORT" "$TOK" "$SECS" 8 1000)"
    kill "$PID"; wait "$PID" 2>/dev/null || true
    held=$(sqlite3 "$D/p.db" "SELECT count(*) FROM events WHERE plant < 100000000")
    echo "  held events still kept: $held"
    rm -rf "$D"
  done
done
