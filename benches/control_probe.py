"""What test control costs (docs/performance.md, "Test control"); run by
benches/control.sh:

    python3 benches/control_probe.py BINARY [ROUNDS]

- reset and restore: a server with test control seeded with 10,000 plants (`--seed`),
  on `:memory:` and on a file; ROUNDS times (default 200) a plant is created, then
  `POST /_control/reset`; then a snapshot is taken and ROUNDS times a plant is created,
  then `POST /_control/snapshots/{id}/restore`. The server's own time for each (its
  access log line's duration) and the client's round trip, medians and 95th percentiles.
- ready: ROUNDS times, from just before the process is started to its `listening on`
  line, on `:memory:` with a 1,000-plant seed file; median and 95th percentile.
"""

import http.client
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time

CONTROL = "bench-control-token-0123456789"


def seed_file(path, plants, principals=10):
    per = plants // principals
    doc = {
        "plants": {
            f"p{n}": [
                {"id": i, "name": f"plant-{n}-{i}", "tag": "green"}
                for i in range(1, per + 1)
            ]
            for n in range(principals)
        }
    }
    with open(path, "w") as f:
        json.dump(doc, f)


def start(binary, db, seed, extra=()):
    env = dict(os.environ)
    env.pop("PLANT_STORE_TOKEN", None)
    env["PLANT_STORE_CONTROL_TOKEN"] = CONTROL
    began = time.perf_counter()
    p = subprocess.Popen(
        [binary, "serve", "--addr", "127.0.0.1:0", "--db", db, "--test-control",
         "--seed", seed, "--log-level", "info", *extra],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = p.stdout.readline()
    ready = time.perf_counter() - began
    m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", line)
    if not m:
        p.kill()
        sys.exit(f"no `listening on` line: {line!r} {p.stderr.read()}")
    return p, int(m.group(1)), ready


class Log:
    """The server's log, read as it comes: the durations of its access lines."""

    def __init__(self, p):
        self.lines = []
        self.t = threading.Thread(target=self.read, args=(p,), daemon=True)
        self.t.start()

    def read(self, p):
        for line in p.stderr:
            self.lines.append(line)

    def durations(self, method, path_re):
        out = []
        pat = re.compile(rf"{method} {path_re} 204 \d+ (\d+)us")
        for line in list(self.lines):
            m = pat.search(line)
            if m:
                out.append(int(m.group(1)) / 1000)
        return out


def figures(label, ms):
    ms = sorted(ms)
    p95 = ms[int(0.95 * (len(ms) - 1))]
    print(f"  {label}: median {statistics.median(ms):.2f} ms, p95 {p95:.2f} ms, n={len(ms)}")


def reset_and_restore(binary, db, seed, rounds):
    p, port, _ = start(binary, db, seed)
    log = Log(p)
    c = http.client.HTTPConnection("127.0.0.1", port)

    def call(method, path, body=None, token=CONTROL):
        headers = {"Authorization": "Bearer " + token}
        if body is not None:
            headers["Content-Type"] = "application/json"
        t = time.perf_counter()
        c.request(method, path, body, headers)
        r = c.getresponse()
        data = r.read()
        return r.status, data, (time.perf_counter() - t) * 1000

    status, data, _ = call("POST", "/_control/tokens", '{"principal":"p0"}')
    assert status == 201, data
    token = json.loads(data)["token"]
    client = {"reset": [], "restore": []}
    for i in range(rounds):
        s, data, _ = call("POST", "/plants", '{"id":%d,"name":"x"}' % (100000 + i), token=token)
        assert s == 200, data
        s, data, ms = call("POST", "/_control/reset")
        assert s == 204, data
        client["reset"].append(ms)
        # The reset removed the token: mint it again (as a test would).
        s, data, _ = call("POST", "/_control/tokens", '{"principal":"p0"}')
        token = json.loads(data)["token"]
    s, data, _ = call("POST", "/_control/snapshots")
    assert s == 201, data
    snap = json.loads(data)["id"]
    for i in range(rounds):
        s, data, _ = call("POST", "/plants", '{"id":%d,"name":"x"}' % (200000 + i), token=token)
        assert s == 200, data
        s, data, ms = call("POST", f"/_control/snapshots/{snap}/restore")
        assert s == 204, data
        client["restore"].append(ms)
    time.sleep(0.3)
    print(f"{db if db == ':memory:' else 'a file'}, 10,000 plants:")
    figures("reset, server", log.durations("POST", r"/_control/reset"))
    figures("reset, client round trip", client["reset"])
    figures("restore, server", log.durations("POST", r"/_control/snapshots/\S+/restore"))
    figures("restore, client round trip", client["restore"])
    p.terminate()
    p.wait()


def ready(binary, seed, rounds):
    times = []
    for _ in range(rounds):
        p, _, t = start(binary, ":memory:", seed, ("--log-level", "warn"))
        times.append(t * 1000)
        p.terminate()
        p.wait()
    print(":memory: with a 1,000-plant seed file, exec to `listening on`:")
    figures("ready", times)


def main():
    binary = sys.argv[1]
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 200
    with tempfile.TemporaryDirectory() as d:
        big, small = os.path.join(d, "10k.json"), os.path.join(d, "1k.json")
        seed_file(big, 10_000)
        seed_file(small, 1_000)
        reset_and_restore(binary, ":memory:", big, rounds)
        reset_and_restore(binary, os.path.join(d, "p.db"), big, rounds)
        ready(binary, small, rounds)


if __name__ == "__main__":
    main()
