#!/usr/bin/env bash
# Idle and loaded RSS of a glibc build with malloc's per-thread caches on (glibc's
# default) and off (GLIBC_TUNABLES=glibc.malloc.tcache_count=0, as contrib/ sets it):
#
#   benches/rss.sh BINARY ROUNDS [R|W]
#
# Each round starts the binary afresh on a new file for each setting, reads VmRSS idle,
# makes 1,000 plants, runs `wrk -t2 -c64 -d8s` on GET /plants?limit=10 (R, the default)
# or on creates (W, benches/write.lua), and prints the idle RSS, the peak (VmHWM) and
# req/s. docs/performance.md, "Memory", has the figures.
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
#
#   benches/rss.sh --costs BINARY
#
# What a connection and a worker cost: RSS before and after 256 idle keep-alive
# connections (`--workers 2`), then, on a file of 20,000 plants, RSS at start and after
# 3 s of `wrk -t2 -c16` on `GET /plants?limit=100` with `--workers` 1, 2, 4 and 8.
set -euo pipefail
cd "$(dirname "$0")/.."
. benches/tokens.sh
rss() { awk '/VmRSS/{print $2}' "/proc/$1/status"; }
up() { for _ in $(seq 100); do curl -s -o /dev/null "localhost:$1/healthz" && break; sleep 0.05; done; sleep 1; }
if [ "$1" = --costs ]; then
  BIN=$2 PORT=29750 D=$(mktemp -d)
  TOK=$(bench_token "$BIN" bench "$D/p.db")
  env -u PLANT_STORE_TOKEN "$BIN" serve --addr "127.0.0.1:$PORT" --db "$D/p.db" --log-level warn \
    --max-connections 300 --workers 2 --read-timeout 120s >/dev/null 2>&1 &
  PID=$!; up $PORT
  python3 benches/rss_load.py "$PORT" "$TOK" "$PID" idle 256
  python3 benches/rss_load.py "$PORT" "$TOK" "$PID" fill 20000
  kill $PID; wait $PID 2>/dev/null || true
  printf 'wrk.headers["Authorization"] = "Bearer %s"\n' "$TOK" >"$D/r.lua"
  for w in 1 2 4 8; do
    PORT=$((PORT + 1))
    env -u PLANT_STORE_TOKEN "$BIN" serve --addr "127.0.0.1:$PORT" --db "$D/p.db" --log-level warn --workers $w >/dev/null 2>&1 &
    PID=$!; up $PORT; idle=$(rss $PID)
    wrk -t2 -c16 -d3s -s "$D/r.lua" "http://127.0.0.1:$PORT/plants?limit=100" >/dev/null
    sleep 1
    echo "--workers $w: ${idle} kB at start, $(rss $PID) kB after the reads (peak $(awk '/VmHWM/{print $2}' /proc/$PID/status) kB)"
    kill $PID; wait $PID 2>/dev/null || true
  done
  rm -rf "$D"
  exit 0
fi
if [ "$1" = --load ]; then
  BIN=$2 ROUNDS=$3 PORT=29700
  for r in $(seq "$ROUNDS"); do
    D=$(mktemp -d)
    TOK=$(bench_token "$BIN" bench "$D/p.db")
    WTOK=$(bench_token "$BIN" writer "$D/p.db")
    for phase in fill load; do
      PORT=$((PORT + 1))
      env -u PLANT_STORE_TOKEN "$BIN" serve --addr "127.0.0.1:$PORT" --db "$D/p.db" --log-level warn \
        --max-connections 256 --workers 2 --read-timeout 120s >/dev/null 2>&1 &
      PID=$!; up $PORT
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
BIN=$1 ROUNDS=$2 SCEN=${3:-R} PORT=29600
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
  if [ "$SCEN" = W ]; then
    rps=$(BENCH_TOKEN=$TOK MIX=1 wrk -t2 -c64 -d8s -s benches/write.lua "http://127.0.0.1:$PORT" | awk '/Requests\/sec/{print $2}')
  else
    rps=$(wrk -t2 -c64 -d8s -s "$D/r.lua" "http://127.0.0.1:$PORT/plants?limit=10" | awk '/Requests\/sec/{print $2}')
  fi
  sleep 1
  hwm=$(awk '/VmHWM/{print $2}' /proc/$PID/status); after=$(awk '/VmRSS/{print $2}' /proc/$PID/status)
  grep -qa tcache /proc/$PID/environ && env_seen=yes || env_seen=no
  echo "round $r $mode: idle ${idle0} kB, peak ${hwm} kB under 64-connection $SCEN, ${after} kB after; ${rps} req/s; env has tunable: $env_seen"
  kill $PID; wait $PID 2>/dev/null || true; rm -rf "$D"
 done
done
