#!/usr/bin/env bash
# Idle and loaded RSS of a glibc build with malloc's per-thread caches on (glibc's
# default) and off (GLIBC_TUNABLES=glibc.malloc.tcache_count=0, as contrib/ sets it):
#
#   benches/rss.sh BINARY ROUNDS
#
# Each round starts the binary afresh on a new file for each setting, reads VmRSS idle,
# makes 1,000 plants, runs `wrk -t2 -c64 -d8s` on GET /plants?limit=10, and prints the
# idle RSS, the peak (VmHWM) and req/s. docs/operating.md, "Memory", has the figures.
#
#   benches/rss.sh --load BINARY ROUNDS
#
# Issue 31's load, on a server started with `--max-connections 256 --workers 2`
# (`--read-timeout 120s` so that idle connections stay open): each round makes a new
# file with 20,000 plants of 256-character names and tags (a 10.7 MB list), restarts the
# server on it, and reads idle RSS at start (new file) and after the restart; then holds
# 239 idle keep-alive connections while 16 writers create plants for 10 s and one
# `GET /plants` streams the whole list at 2 MB/s (256 connections in all, the cap), and
# prints the peak (VmHWM), the resident memory by kind at the largest sample
# (benches/rss_load.py), and RSS 2 s after every connection closed. Nothing else runs in
# the process's environment: glibc's thread caches stay on unless GLIBC_TUNABLES says so.
set -euo pipefail
cd "$(dirname "$0")/.."
. benches/tokens.sh
if [ "$1" = --load ]; then
  BIN=$2 ROUNDS=$3 PORT=29700
  rss() { awk '/VmRSS/{print $2}' "/proc/$1/status"; }
  for r in $(seq "$ROUNDS"); do
    D=$(mktemp -d)
    TOK=$(bench_token "$BIN" bench "$D/p.db")
    WTOK=$(bench_token "$BIN" writer "$D/p.db")
    for phase in fill load; do
      PORT=$((PORT + 1))
      env -u PLANT_STORE_TOKEN "$BIN" serve --addr "127.0.0.1:$PORT" --db "$D/p.db" --log-level warn \
        --max-connections 256 --workers 2 --read-timeout 120s >/dev/null 2>&1 &
      PID=$!
      for _ in $(seq 100); do curl -s -o /dev/null "localhost:$PORT/healthz" && break; sleep 0.05; done
      sleep 1
      if [ $phase = fill ]; then
        idle0=$(rss $PID)
        python3 benches/rss_load.py "$PORT" "$TOK" "$PID" fill 20000
      else
        idle1=$(rss $PID)
        out=$(python3 benches/rss_load.py "$PORT" "$TOK,$WTOK" "$PID" load 239 16 10)
        sleep 2
        after=$(rss $PID)
      fi
      kill $PID; wait $PID 2>/dev/null || true
    done
    echo "round $r: idle ${idle0} kB (new file), ${idle1} kB (20,000 plants); after the load ${after} kB"
    echo "  $out" | sed '2s/^/  /'
    rm -rf "$D"
  done
  exit 0
fi
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
