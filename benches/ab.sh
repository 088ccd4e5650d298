#!/usr/bin/env bash
# Alternating A/B of plant-store binaries, one scenario at a time:
#
#   benches/ab.sh ROUNDS SECONDS R|W|M BINARY...
#
# Each round starts each binary afresh (pinned to CPU 0, a stored token, 1,000 plants),
# runs wrk on CPU 1 over 64 connections (R: GET /plants?limit=10; W: creates; M: nine
# such reads to a create), and
# prints its req/s and the server's CPU time per request (user + system, from
# /proc/PID/stat), then the same split by thread name (from /proc/PID/task/*/stat:
# workers, the commit thread, ...; threads that ended before the last look, the
# connection threads and answer writers, are counted together as "ended"). Compare binaries
# within a round: this machine's speed drifts.
set -euo pipefail
cd "$(dirname "$0")/.."
. benches/tokens.sh
ROUNDS=$1 SECS=$2 SCEN=$3; shift 3
# The ports used count up from AB_PORT (default 29100): another run at once needs its own.
PORT=${AB_PORT:-29100}
for round in $(seq "$ROUNDS"); do
  for BIN in "$@"; do
    PORT=$((PORT + 1)); D=$(mktemp -d)
    TOK=$(bench_token "$BIN" bench "$D/p.db")
    taskset -c 0 env -u PLANT_STORE_TOKEN "$BIN" --addr "127.0.0.1:$PORT" --db "$D/p.db" --log-level info >/dev/null 2>&1 &
    PID=$!
    for _ in $(seq 600); do curl -s -o /dev/null "localhost:$PORT/healthz" && break; sleep 0.05; done
    fill_plants "$PORT" "$TOK"
    # CPU ticks by thread name, summed over the threads of that name.
    threads() { for t in /proc/"$PID"/task/*/stat; do sed 's/.*(\(.*\)) [A-Z] /\1 /' "$t"; done | awk '{sub(/-[0-9]+$/, "", $1); c[$1] += $12 + $13} END {for (n in c) print n, c[n]}' | sort; }
    before=$(threads)
    t0=$(awk '{print $14 + $15}' "/proc/$PID/stat")
    if [ "$SCEN" = W ] || [ "$SCEN" = M ]; then
      mix=1; [ "$SCEN" = M ] && mix=10
      out=$(BENCH_TOKEN=$TOK MIX=$mix taskset -c 1 wrk -t2 -c64 -d"${SECS}s" -s benches/write.lua "http://127.0.0.1:$PORT")
    else
      out=$(taskset -c 1 wrk -t2 -c64 -d"${SECS}s" -H "Authorization: Bearer $TOK" "http://127.0.0.1:$PORT/plants?limit=10")
    fi
    t1=$(awk '{print $14 + $15}' "/proc/$PID/stat")
    rps=$(awk '/Requests\/sec/{print $2}' <<<"$out"); n=$(awk '/requests in/{print $1}' <<<"$out")
    echo "round $round $SCEN $BIN req/s=$rps cpu_us_per_request=$(awk -v a="$t0" -v b="$t1" -v n="$n" -v hz="$(getconf CLK_TCK)" 'BEGIN{printf "%.1f", (b - a) * 1e6 / hz / n}')"
    echo "  by thread, us per request: $(join -a 2 -e 0 -o 0,1.2,2.2 <(echo "$before") <(threads) | awk -v n="$n" -v hz="$(getconf CLK_TCK)" -v all="$((t1 - t0))" '{d = $3 - $2; seen += d; printf "%s=%.1f ", $1, d * 1e6 / hz / n} END {printf "ended(connections, answer writers)=%.1f", (all - seen) * 1e6 / hz / n}')"
    kill "$PID"; wait "$PID" 2>/dev/null || true; rm -rf "$D"
  done
done
