# Sourced by the benchmarks: what each of them needs of a fresh database.
#
# bench_token BIN PRINCIPAL DB: makes a read-write token in DB (created when missing:
# `token add --create`, or, for a release older than --create, `token add`, which made
# the file itself) and prints it.
bench_token() {
  { "$1" token add "$2" --create --db "$3" 2>/dev/null || "$1" token add "$2" --db "$3"; } | tail -n1
}

# fill_plants PORT TOKEN: creates plants 1 to 1,000 through the API, one at a time.
fill_plants() {
  python3 - "$1" "$2" <<'PY'
import http.client, sys
c = http.client.HTTPConnection("127.0.0.1", int(sys.argv[1]))
for i in range(1, 1001):
    c.request("POST", "/plants", '{"id":%d,"name":"plant-%d","tag":"green"}' % (i, i),
              {"Authorization": "Bearer " + sys.argv[2], "Content-Type": "application/json"})
    r = c.getresponse(); r.read()
PY
}
