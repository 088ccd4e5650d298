#!/usr/bin/env bash
# Webhook deliveries (docs/performance.md, "Webhooks"):
#
#   benches/webhooks.sh [--rounds N] [--seconds S] [--baseline BINARY]
#
# Builds the default release binary, installs wrk and python3 if missing, and measures,
# the server on CPU 0, the receiver (benches/webhook_probe.py, which answers at once) and
# the clients on CPU 1:
#   drain   1,000 events committed while the endpoint is disabled (its receiver answered
#           410 to the first), then `webhook enable`: ms from the first delivery to the
#           1,000th, and from the `enable` command to the 1,000th
#   lag     300 creates 20 ms apart: each first attempt's arrival minus its event's
#           commit time (p50, p99, max)
#   W, M    wrk (2 threads, 64 connections, S seconds, default 10) against a fresh
#           instance with no endpoint ("none") and one with an endpoint subscribed to
#           the principal wrk writes as ("hook"), alternated for N rounds (default 3);
#           after "hook", the backlog left and the rate at which it drains; with
#           --baseline, a build without webhooks ("base") in the same rounds
set -euo pipefail
cd "$(dirname "$0")/.."
. benches/tokens.sh
ROUNDS=3 SECS=10 BASE=
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) ROUNDS=$2; shift 2 ;;
    --seconds) SECS=$2; shift 2 ;;
    --baseline) BASE=$(realpath "$2"); shift 2 ;;
    *) echo "usage: benches/webhooks.sh [--rounds N] [--seconds S] [--baseline BINARY]" >&2; exit 2 ;;
  esac
done
need=()
command -v wrk >/dev/null || need+=(wrk)
command -v python3 >/dev/null || need+=(python3)
if [ ${#need[@]} -gt 0 ]; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
cargo build --release --locked -q
BIN=${CARGO_TARGET_DIR:-$PWD/target}/release/plant-store
TMP=$(mktemp -d)
PORT=29300 RPORT=29400
cleanup() {
  kill $(jobs -p) 2>/dev/null || true
  rm -rf "$TMP"
}
trap cleanup EXIT
probe() { taskset -c 1 python3 benches/webhook_probe.py "$@"; }
now_ms() { date +%s%3N; }
until_true() { # tries command...: polls every 10 ms
  local tries=$1; shift
  for _ in $(seq "$tries"); do "$@" && return; sleep 0.01; done
  echo "gave up waiting for: $*" >&2; exit 1
}
fresh() { # name [binary] -> DB, TOK, PID, PORT: one instance with a stored token for `bench`
  DB=$TMP/$1.db PORT=$((PORT + 1))
  local bin=${2:-$BIN}
  TOK=$(bench_token "$bin" bench "$DB")
  env -u PLANT_STORE_TOKEN taskset -c 0 "$bin" --addr "127.0.0.1:$PORT" --db "$DB" --log-level warn \
    >"$TMP/out-$PORT" 2>"$TMP/err-$PORT" &
  PID=$!
  until_true 500 curl -s -o /dev/null "http://127.0.0.1:$PORT/healthz"
}
stop() { kill "$PID" "${RPID:-}" 2>/dev/null || true; wait "$PID" 2>/dev/null || true; RPID=; }
receiver() { # log [gone-first] -> RPID, RPORT
  RPORT=$((RPORT + 1))
  # Not through `probe`: $! is then the receiver itself, which cleanup can stop.
  taskset -c 1 python3 benches/webhook_probe.py receive "$RPORT" "$1" ${2:-} >/dev/null 2>&1 &
  RPID=$!
  until_true 500 bash -c "exec 3<>/dev/tcp/127.0.0.1/$RPORT" 2>/dev/null
}
metric() { curl -s "http://127.0.0.1:$PORT/metrics" | awk -v m="$1" '$1 == m {print $2}'; }
# Predicates for until_true (which runs them anew each time).
endpoints_are() { test "$(metric "plant_store_webhook_endpoints{state=\"$1\"}")" = "$2"; }
none_pending() { test "$(metric plant_store_webhook_pending_events)" = 0; }
subscribe() { # log [gone-first]: a receiver and an endpoint for `bench`, seen by the server
  receiver "$@"
  HOOK=$("$BIN" webhook add bench "http://127.0.0.1:$RPORT/hook" --db "$DB" | head -n1)
  until_true 300 endpoints_are active 1
}
arrived() { [ "$(awk -v s="$2" '$2 == s' "$1" | wc -l)" -ge "${3:-1}" ]; }

fresh drain
subscribe "$TMP/drain.log" gone-first
probe create "$PORT" "$TOK" 1 0
until_true 500 endpoints_are disabled 1
probe create "$PORT" "$TOK" 999 0
t0=$(now_ms)
"$BIN" webhook enable "$HOOK" --db "$DB" >/dev/null
until_true 3000 arrived "$TMP/drain.log" 1000
t1=$(now_ms)
echo "drain    1,000 events: first to last $(probe span "$TMP/drain.log" 1 1000) ms, from enable $((t1 - t0)) ms"
stop

fresh lag
subscribe "$TMP/lag.log"
probe create "$PORT" "$TOK" 300 20
until_true 500 arrived "$TMP/lag.log" 300
echo "lag      $(probe lag "$TMP/lag.log")"
stop

for round in $(seq "$ROUNDS"); do
  for scen in W M; do
    mix=1; [ "$scen" = M ] && mix=10
    modes="none hook"; [ -n "$BASE" ] && modes="base none hook"
    for mode in $modes; do
      bin=$BIN; [ "$mode" = base ] && bin=$BASE
      fresh "$scen-$mode-$round" "$bin"
      BENCH_TOKEN=$TOK taskset -c 1 python3 benches/seed.py "$PORT"
      [ "$mode" = hook ] && subscribe "$TMP/$scen-$round.log"
      out=$(BENCH_TOKEN=$TOK MIX=$mix taskset -c 1 wrk -t2 -c64 -d"${SECS}s" -s benches/write.lua "http://127.0.0.1:$PORT")
      line="round $round $scen $mode req/s=$(awk '/Requests\/sec/{print $2}' <<<"$out")"
      if [ "$mode" = hook ]; then
        left=$(metric plant_store_webhook_pending_events) d0=$(metric 'plant_store_webhook_attempts_total{outcome="delivered"}')
        t0=$(now_ms)
        until_true 30000 none_pending
        t1=$(now_ms) d1=$(metric 'plant_store_webhook_attempts_total{outcome="delivered"}')
        line="$line delivered-during=$d0 backlog=$left drained-in=$((t1 - t0))ms drain-rate=$(awk -v n="$((d1 - d0))" -v ms="$((t1 - t0))" 'BEGIN{printf "%.0f/s", n * 1000 / (ms > 0 ? ms : 1)}')"
      fi
      echo "$line"
      stop
    done
  done
done
