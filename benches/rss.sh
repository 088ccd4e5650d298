#!/usr/bin/env bash
# Idle and loaded RSS of a glibc build with malloc's per-thread caches on (glibc's
# default) and off (GLIBC_TUNABLES=glibc.malloc.tcache_count=0, as contrib/ sets it):
#
#   benches/rss.sh BINARY ROUNDS
#
# Each round starts the binary afresh on a new file for each setting, reads VmRSS idle,
# makes 1,000 plants, runs `wrk -t2 -c64 -d8s` on GET /plants?limit=10, and prints the
# idle RSS, the peak (VmHWM) and req/s. docs/operating.md, "Memory", has the figures.
set -euo pipefail
cd "$(dirname "$0")/.."
. benches/tokens.sh
BIN=$1 ROUNDS=$2 PORT=29600
for r in $(seq "$ROUNDS"); do
 for mode in default tcache0; do
  PORT=$((PORT+1)); D=$(mktemp -d)
  TOK=$(bench_token "$BIN" bench "$D/p.db")
  if [ $mode = tcache0 ]; then export GLIBC_TUNABLES=glibc.malloc.tcache_count=0; else unset GLIBC_TUNABLES; fi
  env -u PLANT_STORE_TOKEN "$BIN" serve --addr "127.0.0.1:$PORT" --db "$D/p.db" --log-level warn >/dev/null 2>&1 &
  PID=$!; unset GLIBC_TUNABLES
  for _ in $(seq 100); do curl -s -o /dev/null "localhost:$PORT/healthz" && break; sleep 0.05; done
  sleep 0.5; idle0=$(awk '/VmRSS/{print $2}' /proc/$PID/status)
  fill_plants "$PORT" "$TOK"
  cat > "$D/r.lua" <<LUA
wrk.headers["Authorization"] = "Bearer $TOK"
LUA
  rps=$(wrk -t2 -c64 -d8s -s "$D/r.lua" "http://127.0.0.1:$PORT/plants?limit=10" | awk '/Requests\/sec/{print $2}')
  sleep 1
  hwm=$(awk '/VmHWM/{print $2}' /proc/$PID/status); after=$(awk '/VmRSS/{print $2}' /proc/$PID/status)
  grep -qa tcache /proc/$PID/environ && env_seen=yes || env_seen=no
  echo "round $r $mode: idle ${idle0} kB, peak ${hwm} kB under 64-connection R, ${after} kB after; ${rps} req/s; env has tunable: $env_seen"
  kill $PID; wait $PID 2>/dev/null || true; rm -rf "$D"
 done
done
