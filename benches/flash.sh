#!/usr/bin/env bash
# Bytes written to the storage per create (flash wear), write-ahead log and checkpoints
# included:
#
#   benches/flash.sh BINARY [N] [ROUNDS]      (N creates per phase, default 1000; 3 rounds)
#
# MAKER=OLD_BINARY makes each database file (its token) with another binary, so that BINARY
# serves a file as that release made it (its page size) and migrates it. PAGES=4096 gives
# each file, once filled, pages of that size (as a release before 1 KiB pages made them:
# `sqlite3`'s VACUUM, docs/operating.md) and starts BINARY on it again, which rewrites such
# a file with 1 KiB pages at start ("Flash wear").
# Each round starts the binary afresh on a new file (a stored token, 1,000 plants made
# first and not counted), then makes N creates one at a time over one connection, then N
# creates by 16 writers at once (16 connections, N/16 each), and prints, for each phase,
# the server's `write_bytes` from /proc/PID/io (what the process caused to be sent to the
# storage: every page it dirtied, counted once per time it is dirtied) divided by N, and
# how much the `-wal` file grew. The last lines are the medians. docs/device.md,
# "Flash wear", has the figures.
set -euo pipefail
cd "$(dirname "$0")/.."
. benches/tokens.sh
BIN=$1 N=${2:-1000} ROUNDS=${3:-3} PORT=29700
lone=() many=()
for r in $(seq "$ROUNDS"); do
  PORT=$((PORT + 1)); D=$(mktemp -d)
  TOK=$(bench_token "${MAKER:-$BIN}" bench "$D/p.db")
  serve() {
    env -u PLANT_STORE_TOKEN "$BIN" serve --addr "127.0.0.1:$PORT" --db "$D/p.db" --log-level warn >/dev/null 2>&1 &
    PID=$!
    for _ in $(seq 100); do curl -s -o /dev/null "localhost:$PORT/healthz" && break; sleep 0.05; done
  }
  serve
  fill_plants "$PORT" "$TOK"
  if [ -n "${PAGES:-}" ]; then
    kill "$PID"; wait "$PID" 2>/dev/null || true
    sqlite3 "$D/p.db" "PRAGMA journal_mode=DELETE; PRAGMA page_size=$PAGES; VACUUM; PRAGMA journal_mode=WAL;" >/dev/null
    echo "round $r: served again after VACUUM to $(od -An -tu1 -j16 -N2 "$D/p.db" | awk '{print $1 * 256 + $2}')-byte pages"
    serve
  fi
  out=$(python3 - "$PORT" "$TOK" "$PID" "$N" "$D/p.db-wal" <<'PY'
import http.client, os, sys, threading
port, tok, pid, n, wal = int(sys.argv[1]), sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
def written():
    for line in open("/proc/%s/io" % pid):
        if line.startswith("write_bytes:"):
            return int(line.split()[1])
def walsize():
    return os.path.getsize(wal) if os.path.exists(wal) else 0
def creates(first, count):
    c = http.client.HTTPConnection("127.0.0.1", port)
    for i in range(first, first + count):
        c.request("POST", "/plants", '{"id":%d,"name":"plant-%d","tag":"green"}' % (i, i),
                  {"Authorization": "Bearer " + tok, "Content-Type": "application/json"})
        r = c.getresponse(); r.read()
        assert r.status == 200, r.status
def phase(name, writers, first):
    b0, w0 = written(), walsize()
    ts = [threading.Thread(target=creates, args=(first + k * n, n // writers)) for k in range(writers)]
    for t in ts: t.start()
    for t in ts: t.join()
    made = writers * (n // writers)
    print("%s %.0f %d" % (name, (written() - b0) / made, walsize() - w0))
phase("lone", 1, 10**6)
phase("16", 16, 10**7)
PY
)
  kill "$PID"; wait "$PID" 2>/dev/null || true; rm -rf "$D"
  l=$(awk '$1 == "lone" {print $2}' <<<"$out"); m=$(awk '$1 == "16" {print $2}' <<<"$out")
  echo "round $r: one at a time ${l} bytes/create (wal grew $(awk '$1 == "lone" {print $3}' <<<"$out")), 16 writers ${m} bytes/create (wal grew $(awk '$1 == "16" {print $3}' <<<"$out"))"
  lone+=("$l") many+=("$m")
done
median() { printf '%s\n' "$@" | sort -n | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }
echo "median bytes per create, one at a time: $(median "${lone[@]}")"
echo "median bytes per create, 16 writers: $(median "${many[@]}")"
