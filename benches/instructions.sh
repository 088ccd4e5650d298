#!/usr/bin/env bash
# Instructions per request, counted by valgrind's callgrind (repeatable to about 0.5%,
# whatever else the machine does):
#
#   benches/instructions.sh BINARY [N] [R|W]   (N requests, default 2000; R, the default:
#                                              GET /plants?limit=10; W: POST /plants)
#
# Runs the server under callgrind twice: 200 creates, then N sequential requests with a
# stored token, and the same without them; prints the difference divided by N. A
# sequential create commits alone (no group). With KEEP=DIR the two callgrind outputs
# are kept there (callgrind_annotate compares functions). ARGS adds arguments to the
# server's (such as `--test-control`, with PLANT_STORE_CONTROL_TOKEN set). Installs
# valgrind if missing.
set -euo pipefail
. "$(dirname "$0")/tokens.sh"
BIN=$1 N=${2:-2000} SCEN=${3:-R}
command -v valgrind >/dev/null || { apt-get update -qq && apt-get install -y -qq valgrind >/dev/null; }
run() { # reads -> total instructions
  local D PORT PID
  D=$(mktemp -d); PORT=$((29500 + RANDOM % 400))
  TOK=$(bench_token "$BIN" bench "$D/p.db")
  # The tunable is set so that a glibc build does not restart itself outside valgrind.
  env -u PLANT_STORE_TOKEN GLIBC_TUNABLES=glibc.malloc.tcache_count=0 valgrind --tool=callgrind \
    --callgrind-out-file="$D/cg.out" "$BIN" --addr "127.0.0.1:$PORT" --db "$D/p.db" --log-level info --workers 4 ${ARGS:-} >/dev/null 2>"$D/err" &
  PID=$!
  for _ in $(seq 300); do curl -s -o /dev/null "localhost:$PORT/healthz" && break; sleep 0.1; done
  python3 - "$PORT" "$TOK" "$1" "$SCEN" <<'PY'
import http.client, sys
port, tok, n, scen = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), sys.argv[4]
c = http.client.HTTPConnection("127.0.0.1", port)
h = {"Authorization": "Bearer " + tok}
for i in range(1, 201):
    c.request("POST", "/plants", '{"id":%d,"name":"plant-%d","tag":"green"}' % (i, i), dict(h, **{"Content-Type": "application/json"}))
    r = c.getresponse(); r.read()
for i in range(n):
    if scen == "W":
        c.request("POST", "/plants", '{"id":%d,"name":"plant-%d","tag":"green"}' % (1000 + i, i), dict(h, **{"Content-Type": "application/json"}))
    else:
        c.request("GET", "/plants?limit=10", headers=h)
    r = c.getresponse(); r.read(); assert r.status == 200
PY
  kill "$PID"; wait "$PID" 2>/dev/null || true
  awk '/^summary:/{print $2}' "$D/cg.out"
  if [ -n "${KEEP:-}" ]; then mkdir -p "$KEEP"; cp "$D/cg.out" "$KEEP/$(basename "$BIN")-$1.out"; fi
  rm -rf "$D"
}
base=$(run 0); with=$(run "$N")
echo "$BIN instructions_per_request=$(( (with - base) / N )) (totals $base and $with)"
