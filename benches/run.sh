#!/usr/bin/env bash
# plant-store benchmark: one command, from a clone of the project alone.
#
#   benches/run.sh [--seconds S] [--rounds N] [--peers] [--musl] [--baseline REV]
#                  [--scenarios "R W M R512 R2000"]
#
# Builds plant-store in release mode, installs wrk if missing (apt-get), then for each
# round starts each server afresh pinned to CPU 0, seeds 1,000 plants, and runs wrk pinned
# to CPU 1 with 64 keep-alive connections:
#   R  GET /plants?limit=10          W  POST with unique ids (every 200 durable)
#   M  9 of 10 requests R, 1 W
#   R512, R2000  R over 512 and 2,000 closed-loop connections (refusals show as non2xx)
# plant-store authenticates with a token made by `plant-store token add` (a database
# look-up per request, as most deployments do); `plant-store-env` is the same binary with
# the PLANT_STORE_TOKEN environment token, R only. The peers use their environment token.
# It prints one line per server and scenario (median over rounds of req/s, p50, p99; peak
# RSS), the ratios to the peers, and plant-store's own extras: stripped binary size, time
# from start to the `listening on` line (median of 20), and a 1,000,000-plant GET /plants
# read slowly while writes go on (RSS peak, rows, write latency).
# --peers also builds and runs the peers in benches/peers: tinyhttp-ceiling (tiny_http
# answering one fixed body, no database: the ceiling of this shape) and axum-plants (the
# same interface on axum + tokio + rusqlite), in the same harness, alternating with
# plant-store in every round.
# --musl adds `plant-store-musl`, the static x86_64 build (scripts/build-static), and
# --baseline REV adds `plant-store@REV`, built from that git revision: both with a stored
# token, like plant-store, alternating with it in every round. --scenarios limits the
# scenarios of plant-store and these two.
set -euo pipefail
cd "$(dirname "$0")/.."
. benches/tokens.sh
SECS=10 ROUNDS=3 PEERS=0 MUSL=0 BASELINE="" SCENARIOS="R W M R512 R2000"
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) SECS=$2; shift 2 ;;
    --rounds) ROUNDS=$2; shift 2 ;;
    --peers) PEERS=1; shift ;;
    --musl) MUSL=1; shift ;;
    --baseline) BASELINE=$2; shift 2 ;;
    --scenarios) SCENARIOS=$2; shift 2 ;;
    *) echo "usage: benches/run.sh [--seconds S] [--rounds N] [--peers] [--musl] [--baseline REV] [--scenarios LIST]" >&2; exit 2 ;;
  esac
done
command -v wrk >/dev/null || { apt-get update -qq && apt-get install -y -qq wrk >/dev/null; }
command -v python3 >/dev/null || { apt-get update -qq && apt-get install -y -qq python3 >/dev/null; }
cargo build --release --locked -q
BIN=${CARGO_TARGET_DIR:-$PWD/target}/release/plant-store
TMP=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$TMP"' EXIT
export BENCH_TOKEN=bench-token PLANT_STORE_TOKEN=bench-token
PORT=28400

declare -A CMD BINS
NAMES=(plant-store plant-store-env)
BINS[plant-store]=$BIN BINS[plant-store-env]=$BIN
if [ $MUSL = 1 ]; then
  scripts/build-static x86_64 >&2
  NAMES+=(plant-store-musl)
  BINS[plant-store-musl]=${CARGO_TARGET_DIR:-$PWD/target}/x86_64-unknown-linux-musl/release/plant-store
fi
if [ -n "$BASELINE" ]; then
  git worktree add -q --detach "$TMP/baseline" "$BASELINE"
  (cd "$TMP/baseline" && CARGO_TARGET_DIR="$TMP/baseline-target" cargo build --release --locked -q)
  git worktree remove --force "$TMP/baseline"
  NAMES+=("plant-store@$BASELINE")
  BINS[plant-store@$BASELINE]=$TMP/baseline-target/release/plant-store
fi
for name in "${NAMES[@]}"; do
  CMD[$name]="${BINS[$name]} --addr 127.0.0.1:\$PORT --db \$DB --log-level info"
done
if [ $PEERS = 1 ]; then
  for p in tinyhttp-ceiling axum-plants; do
    CARGO_TARGET_DIR="$TMP/peers" cargo build --release --locked -q --manifest-path "benches/peers/$p/Cargo.toml"
  done
  NAMES+=(tinyhttp-ceiling axum-plants)
  CMD[tinyhttp-ceiling]="$TMP/peers/release/tinyhttp-ceiling --port \$PORT"
  CMD[axum-plants]="$TMP/peers/release/axum-plants --port \$PORT --db \$DB"
fi

start() { # name -> starts the server, sets PID; waits until it answers
  PORT=$((PORT + 1)); DB=$TMP/db-$PORT/plants.db; mkdir -p "$(dirname "$DB")"
  local cmd; cmd=$(PORT=$PORT DB=$DB eval echo "${CMD[$1]}")
  BENCH_TOKEN=bench-token
  if [ "$1" != plant-store-env ] && [ -n "${BINS[$1]:-}" ]; then
    # A stored token: the server looks it up in the database on every request.
    BENCH_TOKEN=$(bench_token "${BINS[$1]}" bench "$DB")
    cmd="env -u PLANT_STORE_TOKEN $cmd"
  fi
  export BENCH_TOKEN
  taskset -c 0 $cmd >"$TMP/$1.out" 2>"$TMP/$1.err" &
  PID=$!
  for _ in $(seq 100); do
    curl -s -o /dev/null "http://127.0.0.1:$PORT/plants" -H "Authorization: Bearer $BENCH_TOKEN" && return
    sleep 0.05
  done
  echo "$1 did not start" >&2; cat "$TMP/$1.err" >&2; exit 1
}
seed() { python3 benches/seed.py "$PORT"; } # 1,000 plants over one keep-alive connection
measure() { # scenario -> one line of numbers
  local out
  case $1 in
    R) out=$(taskset -c 1 wrk -t2 -c64 -d"${SECS}s" --latency -H "Authorization: Bearer $BENCH_TOKEN" "http://127.0.0.1:$PORT/plants?limit=10") ;;
    R512|R2000) out=$(ulimit -n 20000; taskset -c 1 wrk -t2 -c"${1#R}" -d"${SECS}s" --timeout 10s --latency -H "Authorization: Bearer $BENCH_TOKEN" "http://127.0.0.1:$PORT/plants?limit=10") ;;
    W) out=$(MIX=1 taskset -c 1 wrk -t2 -c64 -d"${SECS}s" --latency -s benches/write.lua "http://127.0.0.1:$PORT") ;;
    M) out=$(MIX=10 taskset -c 1 wrk -t2 -c64 -d"${SECS}s" --latency -s benches/write.lua "http://127.0.0.1:$PORT") ;;
  esac
  local rps p50 p99 bad
  rps=$(awk '/Requests\/sec/{print $2}' <<<"$out")
  p50=$(awk '$1=="50%"{print $2}' <<<"$out"); p99=$(awk '$1=="99%"{print $2}' <<<"$out")
  bad=$(awk '/Non-2xx/{print $5}' <<<"$out")
  err=$(awk '/Socket errors/{gsub(",",""); print $4+$6+$8+$10}' <<<"$out")
  echo "$rps $(ms "$p50") $(ms "$p99") ${bad:-0} $(awk '/VmHWM/{print $2}' /proc/$PID/status) ${err:-0}"
}
ms() { awk -v v="$1" 'BEGIN{ if (v ~ /us$/) printf "%.3f", v/1000; else if (v ~ /ms$/) printf "%.3f", v+0; else printf "%.3f", v*1000 }'; }

for round in $(seq "$ROUNDS"); do
  # Each round starts one server further on: a server's place in the round must not
  # count (the later ones in a round measured slower on this machine).
  k=$(( (round - 1) % ${#NAMES[@]} ))
  for name in "${NAMES[@]:k}" "${NAMES[@]:0:k}"; do
    start "$name"
    case $name in
      plant-store | plant-store-musl | plant-store@*) scen=$SCENARIOS ;;
      axum-plants) scen="R W M R512" ;;
      *) scen="R" ;;
    esac
    [ "$name" = tinyhttp-ceiling ] || seed
    for s in $scen; do echo "$name $s $(measure $s)" >>"$TMP/raw"; done
    kill "$PID"; wait "$PID" 2>/dev/null || true
  done
  echo "# round $round done" >&2
done

echo "# $(date -u +%F) $(nproc) CPUs, $(awk -F: '/model name/{print $2; exit}' /proc/cpuinfo | xargs); median of $ROUNDS rounds, ${SECS}s each, 64 connections"
python3 - "$TMP/raw" <<'PY'
import sys, statistics as st
rows = {}
for line in open(sys.argv[1]):
    name, scen, *v = line.split()
    rows.setdefault((name, scen), []).append([float(x) for x in v])
med = {}
for (name, scen), vs in rows.items():
    m = [st.median(col) for col in zip(*vs)]
    med[(name, scen)] = m
    print(f"{name:16} {scen:5} req/s={m[0]:.0f} p50_ms={m[1]:.3f} p99_ms={m[2]:.3f} non2xx={m[3]:.0f} socket_errors={m[5]:.0f} rss_peak_kb={m[4]:.0f}")
for scen in ("R", "W", "M", "R512"):
    for other in sorted({n for n, _ in rows if n == "plant-store-musl" or n.startswith("plant-store@")}):
        if (other, scen) in med and ("plant-store", scen) in med:
            a, b = med[("plant-store", scen)], med[(other, scen)]
            print(f"ratio {scen} plant-store/{other} = {a[0] / b[0]:.3f} (p99 {a[2] / b[2]:.2f}x)")
    for ours in ("plant-store", "plant-store-env"):
        ps = med.get((ours, scen))
        for peer in ("axum-plants", "tinyhttp-ceiling"):
            if ps and (peer, scen) in med:
                print(f"ratio {scen} {ours}/{peer} = {ps[0] / med[(peer, scen)][0]:.2f} (p99 {ps[2] / med[(peer, scen)][2]:.2f}x)")
PY

# plant-store's own extras.
echo "plant-store binary_bytes=$(stat -c %s "$BIN")"
for i in $(seq 20); do
  rm -rf "$TMP/st"; mkdir "$TMP/st"
  t0=$(date +%s%N)
  "$BIN" --addr 127.0.0.1:0 --db "$TMP/st/p.db" --log-level off >"$TMP/st/out" 2>/dev/null &
  p=$!
  until [ -s "$TMP/st/out" ]; do :; done
  echo $(( ($(date +%s%N) - t0) / 1000 ))
  kill $p; wait $p 2>/dev/null || true
done | sort -n | awk '{a[NR]=$1} END{printf "plant-store startup_to_listening_ms median=%.2f max=%.2f (empty database, 20 runs)\n", a[int((NR+1)/2)]/1000, a[NR]/1000}'

start plant-store-env
kill "$PID"; wait "$PID" 2>/dev/null || true
python3 - "$DB" <<'PY'
import sqlite3, sys
c = sqlite3.connect(sys.argv[1])
c.executemany("INSERT INTO plants (principal, id, name, tag) VALUES ('default', ?, ?, 'green')",
              ((i, "plant-%d" % i) for i in range(1, 1000001)))
c.commit()
PY
PORT=$((PORT - 1)); start plant-store-env
python3 - "$PORT" "$PID" <<'PY'
import http.client, sys, threading, time
port, pid = int(sys.argv[1]), sys.argv[2]
hdr = {"Authorization": "Bearer " + __import__("os").environ["BENCH_TOKEN"]}
done = threading.Event()
lat = []
def writer():
    c = http.client.HTTPConnection("127.0.0.1", port)
    i = 2000000
    while not done.is_set():
        i += 1
        t = time.perf_counter()
        c.request("POST", "/plants", '{"id":%d,"name":"w"}' % i, dict(hdr, **{"Content-Type": "application/json"}))
        r = c.getresponse(); r.read()
        assert r.status == 200, r.status
        lat.append(time.perf_counter() - t)
        time.sleep(0.01)
w = threading.Thread(target=writer); w.start()
c = http.client.HTTPConnection("127.0.0.1", port)
t = time.perf_counter()
c.request("GET", "/plants", headers=hdr)
r = c.getresponse()
total, rows = 0, 0
while True:
    chunk = r.read(64 * 1024)       # a slow reader: 64 KiB, then a pause
    if not chunk: break
    total += len(chunk); rows += chunk.count(b'"name"')
    time.sleep(0.002)
secs = time.perf_counter() - t
done.set(); w.join()
hwm = [l.split()[1] for l in open("/proc/%s/status" % pid) if l.startswith("VmHWM")][0]
lat.sort()
print("plant-store stream_1M rows=%d bytes=%d secs=%.1f rss_peak_kb=%s writes_during=%d write_p50_ms=%.2f write_max_ms=%.2f"
      % (rows, total, secs, hwm, len(lat), lat[len(lat)//2]*1000, lat[-1]*1000))
PY
