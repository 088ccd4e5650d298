# Sourced by benches/scale.sh and benches/feed.sh. Installs what is missing (wrk,
# python3, Debian's postgresql), starts a throw-away PostgreSQL cluster in $TMP/pg on
# $PGPORT (fsync and synchronous_commit on), pinned to CPU 0, stopped by pg_stop, and
# defines psql_ (one statement as the superuser) and start_instance. Sets PGBIN and
# PGMASTER. The caller sets BIN, TMP, PGPORT and PORT first.
need=()
command -v wrk >/dev/null || need+=(wrk)
command -v python3 >/dev/null || need+=(python3)
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || need+=(postgresql)
if [ ${#need[@]} -gt 0 ]; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
PGBIN=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n1)
as_pg() { if [ "$(id -u)" = 0 ]; then runuser -u nobody -- "$@"; else "$@"; fi; }
pg_stop() { as_pg "$PGBIN/pg_ctl" -D "$TMP/pg/data" -m immediate stop >/dev/null 2>&1 || true; }
chmod 755 "$TMP"
mkdir "$TMP/pg"; [ "$(id -u)" = 0 ] && chown nobody "$TMP/pg"
as_pg "$PGBIN/initdb" -D "$TMP/pg/data" -U postgres -A trust -E UTF8 --locale=C >/dev/null
as_pg taskset -c 0 "$PGBIN/pg_ctl" -D "$TMP/pg/data" -l "$TMP/pg/log" -w \
  -o "-p $PGPORT -k $TMP/pg -c listen_addresses=127.0.0.1 -c max_connections=100" start >/dev/null
PGMASTER=$(head -n1 "$TMP/pg/data/postmaster.pid")
psql_() { "$PGBIN/psql" -X -q -A -t -h 127.0.0.1 -p "$PGPORT" -U postgres -d postgres -c "$1"; }
start_instance() { # db [flags...] -> starts one plant-store on CPU 0, appends its pid and port
  local db=$1; shift
  PORT=$((PORT + 1))
  env -u PLANT_STORE_TOKEN taskset -c 0 "$BIN" --addr 127.0.0.1:$PORT --db "$db" --log-level warn "$@" \
    >"$TMP/out-$PORT" 2>"$TMP/err-$PORT" &
  PIDS+=($!) PORTS+=($PORT)
  for _ in $(seq 100); do
    curl -s -o /dev/null "http://127.0.0.1:$PORT/healthz" && return
    sleep 0.05
  done
  echo "plant-store did not start" >&2; cat "$TMP/err-$PORT" >&2; exit 1
}
