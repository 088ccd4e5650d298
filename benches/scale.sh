#!/usr/bin/env bash
# plant-store on PostgreSQL beside SQLite: R, W and M for one instance on SQLite, one on
# PostgreSQL and two on one PostgreSQL database (docs/postgres.md).
#
#   benches/scale.sh [--seconds S] [--rounds N] [--scenarios "R W M"] [--baseline BIN]
#
# Builds plant-store with `--features postgres` (one binary for every setup, so only the
# backend differs), installs wrk if missing, and starts a throw-away PostgreSQL cluster
# (Debian's `postgresql` package; fsync and synchronous_commit on, as durable as SQLite's
# synchronous=FULL). Each round starts every setup afresh, in a rotating order, on a new
# database with 1,000 plants and a stored token (a database look-up per request):
#   sqlite  one instance, SQLite file           wrk: 64 connections
#   pg-1    one instance, PostgreSQL            wrk: 64 connections
#   pg-2    two instances, one PostgreSQL db    two wrk at once, 32 connections each
#           (what a load balancer spreading connections would give); req/s summed
#   base-1  with --baseline BIN: one instance of that binary (an older build with the
#           postgres feature) on PostgreSQL, as pg-1, in the same rounds
# Server side (plant-store and PostgreSQL) is pinned to CPU 0, wrk to CPU 1, as in
# benches/run.sh. Per line: median req/s, p50, p99 (the worse wrk's for pg-2),
# non-2xx, and CPU time per request of plant-store and of PostgreSQL.
set -euo pipefail
cd "$(dirname "$0")/.."
. benches/tokens.sh
SECS=10 ROUNDS=3 SCENARIOS="R W M" BASE=
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) SECS=$2; shift 2 ;;
    --rounds) ROUNDS=$2; shift 2 ;;
    --scenarios) SCENARIOS=$2; shift 2 ;;
    --baseline) BASE=$(realpath "$2"); shift 2 ;;
    *) echo "usage: benches/scale.sh [--seconds S] [--rounds N] [--scenarios LIST] [--baseline BIN]" >&2; exit 2 ;;
  esac
done
cargo build --release --locked -q --features postgres
BIN=${CARGO_TARGET_DIR:-$PWD/target}/release/plant-store
TMP=$(mktemp -d)
PGPORT=28590
cleanup() {
  kill $(jobs -p) 2>/dev/null || true
  pg_stop
  rm -rf "$TMP"
}
trap cleanup EXIT
PORT=28500 DBN=0
. benches/common.sh

cpu_of() { # pids... -> their utime+stime in ticks, children included for the postmaster
  local total=0 p
  for p in "$@"; do
    for t in $(ps -o pid= --ppid "$p" 2>/dev/null) "$p"; do
      total=$(( total + $(awk '{print $14 + $15}' "/proc/$t/stat" 2>/dev/null || echo 0) ))
    done
  done
  echo $total
}
setup() { # name -> starts it, seeds it; sets PIDS, PORTS, BENCH_TOKEN
  PIDS=() PORTS=() DBN=$((DBN + 1))
  local db n=1 BIN=$BIN
  case $1 in
    sqlite) db=$TMP/sqlite-$DBN.db ;;
    pg-1|pg-2|base-1) psql_ "CREATE DATABASE b$DBN" >/dev/null; db="postgres://postgres@127.0.0.1:$PGPORT/b$DBN" ;;
  esac
  [ "$1" = base-1 ] && BIN=$BASE
  [ "$1" = pg-2 ] && n=2
  BENCH_TOKEN=$(bench_token "$BIN" bench "$db"); export BENCH_TOKEN
  for _ in $(seq $n); do start_instance "$db"; done
  python3 benches/seed.py "${PORTS[0]}"
}
wrk_one() { # scenario port connections process -> wrk output
  local url=http://127.0.0.1:$2
  case $1 in
    R) taskset -c 1 wrk -t1 -c"$3" -d"${SECS}s" --latency -H "Authorization: Bearer $BENCH_TOKEN" "$url/plants?limit=10" ;;
    W) MIX=1 WRK_PROCESS=$4 taskset -c 1 wrk -t1 -c"$3" -d"${SECS}s" --latency -s benches/write.lua "$url" ;;
    M) MIX=10 WRK_PROCESS=$4 taskset -c 1 wrk -t1 -c"$3" -d"${SECS}s" --latency -s benches/write.lua "$url" ;;
  esac
}
measure() { # scenario -> "req/s p50 p99 non2xx us_plant_store us_postgres"
  local n=${#PORTS[@]} i c0 p0 wrks=()
  c0=$(cpu_of "${PIDS[@]}"); p0=$(cpu_of "$PGMASTER")
  for i in $(seq 0 $((n - 1))); do
    wrk_one "$1" "${PORTS[$i]}" $((64 / n)) "$i" >"$TMP/wrk-$i" &
    wrks+=($!)
  done
  wait "${wrks[@]}"
  local c1 p1; c1=$(cpu_of "${PIDS[@]}"); p1=$(cpu_of "$PGMASTER")
  python3 - "$n" "$TMP" "$((c1 - c0))" "$((p1 - p0))" "$(getconf CLK_TCK)" <<'PY'
import sys, re
n, tmp, cpu, pg, hz = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
def ms(v):
    m = re.match(r"([\d.]+)(us|ms|s)", v)
    if not m:
        sys.exit(f"cannot read a latency of {v!r} in:\n{out}")
    x = float(m.group(1))
    return x / 1000 if m.group(2) == "us" else x if m.group(2) == "ms" else x * 1000
rps = reqs = bad = 0; p50 = p99 = 0.0
for i in range(n):
    out = open(f"{tmp}/wrk-{i}").read()
    rps += float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    reqs += int(re.search(r"(\d+) requests in", out).group(1))
    p50 = max(p50, ms(re.search(r"^\s+50%\s+(\S+)", out, re.M).group(1)))
    p99 = max(p99, ms(re.search(r"^\s+99%\s+(\S+)", out, re.M).group(1)))
    m = re.search(r"Non-2xx or 3xx responses: (\d+)", out); bad += int(m.group(1)) if m else 0
    m = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
    bad += sum(map(int, m.groups())) if m else 0
us = lambda ticks: ticks * 1e6 / hz / max(reqs, 1)
print(f"{rps:.0f} {p50:.3f} {p99:.3f} {bad} {us(cpu):.1f} {us(pg):.1f}")
PY
}

NAMES=(sqlite pg-1 pg-2)
[ -n "$BASE" ] && NAMES+=(base-1)
for round in $(seq "$ROUNDS"); do
  k=$(( (round - 1) % ${#NAMES[@]} ))
  for name in "${NAMES[@]:k}" "${NAMES[@]:0:k}"; do
    setup "$name"
    for s in $SCENARIOS; do echo "$name $s $(measure "$s")" >>"$TMP/raw"; done
    kill "${PIDS[@]}"; wait "${PIDS[@]}" 2>/dev/null || true
  done
  echo "# round $round done" >&2
done

echo "# $(date -u +%F) $(nproc) CPUs, $(awk -F: '/model name/{print $2; exit}' /proc/cpuinfo | xargs); PostgreSQL $("$PGBIN/postgres" --version | awk '{print $3}'); median of $ROUNDS rounds, ${SECS}s each, 64 connections in all; server side on CPU 0, wrk on CPU 1"
python3 - "$TMP/raw" <<'PY'
import sys, statistics as st
rows = {}
for line in open(sys.argv[1]):
    name, scen, *v = line.split()
    rows.setdefault((name, scen), []).append([float(x) for x in v])
med = {k: [st.median(c) for c in zip(*vs)] for k, vs in rows.items()}
for (name, scen), m in med.items():
    print(f"{name:7} {scen}  req/s={m[0]:.0f} p50_ms={m[1]:.3f} p99_ms={m[2]:.3f} non2xx={m[3]:.0f} "
          f"cpu_us_per_req plant-store={m[4]:.1f} postgres={m[5]:.1f}")
for scen in ("R", "W", "M"):
    if ("sqlite", scen) in med:
        for other in ("pg-1", "pg-2", "base-1"):
            if (other, scen) in med:
                print(f"ratio {scen} {other}/sqlite = {med[(other, scen)][0] / med[('sqlite', scen)][0]:.2f}")
    if ("base-1", scen) in med and ("pg-1", scen) in med:
        print(f"ratio {scen} pg-1/base-1 = {med[('pg-1', scen)][0] / med[('base-1', scen)][0]:.2f}")
PY
