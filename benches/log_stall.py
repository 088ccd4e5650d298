#!/usr/bin/env python3
"""A log nobody reads against a log to /dev/null:

    python3 benches/log_stall.py BINARY [ROUNDS]     (default 3 rounds)

Each round starts BINARY twice, alternating, at `--log-level info` (an access line per
request): once with standard error to /dev/null, once with standard error a pipe that
nothing ever reads (a test fixture's `stderr=PIPE`). Each time it sends 10,000
`GET /plants?limit=10` over 4 keep-alive connections (2,500 each, one after another),
checks that every one is answered 200 within 3 s, and prints the latency percentiles
seen by the client, `plant_store_log_lines_dropped_total` from /metrics, and how long
SIGTERM took to end the process (the log is given at most 1 s). docs/performance.md, "A log
nobody reads", has the figures. Standard library only.
"""
import http.client
import os
import subprocess
import sys
import threading
import time

BIN = sys.argv[1]
ROUNDS = int(sys.argv[2]) if len(sys.argv) > 2 else 3
TOKEN = "bench-token-0123456789"
REQUESTS, CONNECTIONS = 10_000, 4


def start(stderr):
    env = dict(os.environ, PLANT_STORE_TOKEN=TOKEN)
    env.pop("GLIBC_TUNABLES", None)
    p = subprocess.Popen(
        [BIN, "--addr", "127.0.0.1:0", "--db", ":memory:", "--log-level", "info"],
        env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=stderr)
    line = p.stdout.readline().decode()
    host, port = line.strip().rsplit("/", 1)[-1].split(":")
    return p, host, int(port)


def load(host, port):
    """Latencies in microseconds of REQUESTS answered requests."""
    latencies, errors = [], []

    def client():
        c = http.client.HTTPConnection(host, port, timeout=3)
        mine = []
        try:
            for _ in range(REQUESTS // CONNECTIONS):
                t = time.perf_counter()
                c.request("GET", "/plants?limit=10", headers={"Authorization": "Bearer " + TOKEN})
                r = c.getresponse()
                r.read()
                mine.append((time.perf_counter() - t) * 1e6)
                if r.status != 200:
                    errors.append(r.status)
        except Exception as e:  # a stall: the timeout
            errors.append(repr(e))
        latencies.extend(mine)

    threads = [threading.Thread(target=client) for _ in range(CONNECTIONS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return latencies, errors


def dropped(host, port):
    try:
        c = http.client.HTTPConnection(host, port, timeout=3)
        c.request("GET", "/metrics")
        text = c.getresponse().read().decode()
    except OSError as e:
        return "no /metrics (%r)" % e
    for line in text.splitlines():
        if line.startswith("plant_store_log_lines_dropped_total "):
            return int(float(line.split()[1]))
    return "no count in /metrics"


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


for r in range(1, ROUNDS + 1):
    for mode in ("devnull", "pipe"):
        stderr = subprocess.DEVNULL if mode == "devnull" else subprocess.PIPE
        p, host, port = start(stderr)
        t0 = time.perf_counter()
        lat, errors = load(host, port)
        took = time.perf_counter() - t0
        gone = dropped(host, port)
        t = time.perf_counter()
        p.terminate()
        try:
            code = p.wait(timeout=30)
            stop = "%.2f s" % (time.perf_counter() - t)
        except subprocess.TimeoutExpired:
            p.kill()
            code, stop = p.wait(), "never (killed after 30 s)"
        print("round %d %-7s: %d answered, %d errors%s; p50 %.0f us, p99 %.0f us, max %.0f us; "
              "%.1f s; %s lines dropped; SIGTERM to exit %s, status %s"
              % (r, mode, len(lat), len(errors), (" " + str(errors[:3])) if errors else "",
                 pct(lat, 0.5), pct(lat, 0.99), max(lat), took, gone, stop, code), flush=True)
