#!/usr/bin/env bash
# The change feed under load (docs/performance.md, "The change feed"):
#
#   benches/feed.sh [--streams N] [--seconds S]
#
# Builds plant-store with `--features postgres` (one binary for every setup), installs
# wrk, python3 and PostgreSQL if missing, and measures, server side on CPU 0 and the
# clients on CPU 1:
#   lag        one SQLite instance, no other load: commit-to-delivery of 300 events, one
#              every 20 ms, on one stream (benches/feed_probe.py lag)
#   idle-N     N streams (default 1,000; --max-streams-per-principal is raised for them)
#              open for another principal, then wrk's M mix
#              (9 GETs to a POST, 64 connections, --latency) for S seconds (default 10)
#              with the lag probe beside it: wrk's p50 and p99, the lag, and the
#              server's RSS with the streams open and its peak
#   fanout-N   the same, the N streams for the principal wrk writes as: every event goes
#              to every stream
#   pg-2       two instances on one PostgreSQL database, the lag probe writing through
#              one and reading its stream from the other (the LISTEN/NOTIFY path)
set -euo pipefail
cd "$(dirname "$0")/.."
. benches/tokens.sh
STREAMS=1000 SECS=10
while [ $# -gt 0 ]; do
  case "$1" in
    --streams) STREAMS=$2; shift 2 ;;
    --seconds) SECS=$2; shift 2 ;;
    *) echo "usage: benches/feed.sh [--streams N] [--seconds S]" >&2; exit 2 ;;
  esac
done
cargo build --release --locked -q --features postgres
BIN=${CARGO_TARGET_DIR:-$PWD/target}/release/plant-store
TMP=$(mktemp -d)
PGPORT=28690 PORT=28600
cleanup() {
  kill $(jobs -p) 2>/dev/null || true
  pg_stop
  rm -rf "$TMP"
}
trap cleanup EXIT
. benches/common.sh
ulimit -n "$(ulimit -Hn)"
probe() { taskset -c 1 python3 benches/feed_probe.py "$@"; }
kib() { awk -v k="$2" '$1 == k":" {print $2}' "/proc/$1/status"; }

fresh() { # -> one SQLite instance with 1,000 plants; BENCH_TOKEN, WATCH_TOKEN
  PIDS=() PORTS=()
  local db=$TMP/feed-$PORT.db
  BENCH_TOKEN=$(bench_token "$BIN" bench "$db"); export BENCH_TOKEN
  WATCH_TOKEN=$("$BIN" token add watch --db "$db" | tail -n1)
  start_instance "$db" --max-streams-per-principal $((STREAMS + 1))
  python3 benches/seed.py "${PORTS[0]}"
}
stop() { kill "${PIDS[@]}"; wait "${PIDS[@]}" 2>/dev/null || true; }

fresh
echo "lag      $(probe lag "${PORTS[0]}" "${PORTS[0]}" "$BENCH_TOKEN" 300 20)"
stop

under_load() { # name principal-of-the-streams (watch or bench)
  fresh
  local port=${PORTS[0]} pid=${PIDS[0]} token=$BENCH_TOKEN
  [ "$2" = watch ] && token=$WATCH_TOKEN
  mkfifo "$TMP/hold-in"
  probe hold "$port" "$token" "$STREAMS" <"$TMP/hold-in" >"$TMP/hold-out" &
  local holder=$!
  exec 7>"$TMP/hold-in"
  for _ in $(seq 600); do grep -q '^open' "$TMP/hold-out" 2>/dev/null && break; sleep 0.1; done
  grep -q '^open' "$TMP/hold-out" || { echo "the streams did not open" >&2; exit 1; }
  local rss_open; rss_open=$(kib "$pid" VmRSS)
  MIX=10 taskset -c 1 wrk -t1 -c64 -d"${SECS}s" --latency -s benches/write.lua "http://127.0.0.1:$port" >"$TMP/wrk" &
  local wrk=$!
  local lag; lag=$(probe lag "$port" "$port" "$BENCH_TOKEN" $((SECS * 40)) 20)
  wait "$wrk"
  local peak; peak=$(kib "$pid" VmHWM)
  local open_now; open_now=$(curl -s "http://127.0.0.1:$port/metrics" | awk '/^plant_store_event_streams_open /{print $2}')
  exec 7>&-
  wait "$holder"
  local p50 p99 rps
  p50=$(awk '$1 == "50%" {print $2}' "$TMP/wrk"); p99=$(awk '$1 == "99%" {print $2}' "$TMP/wrk")
  rps=$(awk '/Requests\/sec/{print $2}' "$TMP/wrk")
  echo "$1 M req/s=$rps p50=$p50 p99=$p99 | $lag | rss_kib with the streams open=$rss_open peak=$peak | streams open after=$open_now | $(cat "$TMP/hold-out" | tail -n1)"
  rm -f "$TMP/hold-in"
  stop
}
under_load "idle-$STREAMS  " watch
under_load "fanout-$STREAMS" bench

psql_ "CREATE DATABASE feed" >/dev/null
DB="postgres://postgres@127.0.0.1:$PGPORT/feed"
PIDS=() PORTS=()
BENCH_TOKEN=$(bench_token "$BIN" bench "$DB")
start_instance "$DB"; start_instance "$DB"
echo "pg-2     $(probe lag "${PORTS[0]}" "${PORTS[1]}" "$BENCH_TOKEN" 300 20) (written through one instance, read from the other)"
stop
echo "# $(date -u +%F) $(nproc) CPUs; $STREAMS streams; server side on CPU 0, clients on CPU 1"
