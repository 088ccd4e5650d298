"""How soon a journal listing that waits is answered; run by benches/journal_wait.sh:

    python3 benches/journal_wait_probe.py BINARY [TRIES]

A server with test control on :memory:. Each try parks `GET
/_control/requests?wait=5s&min=1&path=/nowhere/N` on one kept-alive connection, lets it
settle (20 ms), then sends `GET /nowhere/N` (a 404) on another and notes when its
answer has been read; the figure is the time from then until the listing has been read
(never below 0: the entry is answered before the 404's first byte, so the listing may
come first). Each listing must hold that one entry, answered.
"""

import http.client
import json
import os
import re
import statistics
import subprocess
import sys
import threading
import time

CONTROL = "bench-control-token-0123456789"


def start(binary, *extra):
    """The binary with test control on :memory: (and `extra` arguments): (process, port)."""
    env = dict(os.environ, PLANT_STORE_CONTROL_TOKEN=CONTROL)
    env.pop("PLANT_STORE_TOKEN", None)
    p = subprocess.Popen(
        [binary, "serve", "--addr", "127.0.0.1:0", "--db", ":memory:", "--test-control",
         "--log-level", "warn", *extra],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", p.stdout.readline())
    if not m:
        p.kill()
        sys.exit("no `listening on` line")
    return p, int(m.group(1))


def main():
    binary = sys.argv[1]
    tries = int(sys.argv[2]) if len(sys.argv) > 2 else 100
    p, port = start(binary)
    waiter = http.client.HTTPConnection("127.0.0.1", port)
    client = http.client.HTTPConnection("127.0.0.1", port)
    ms = []
    try:
        for n in range(tries):
            got = {}

            def wait():
                waiter.request("GET", f"/_control/requests?wait=5s&min=1&path=/nowhere/{n}",
                               headers={"Authorization": "Bearer " + CONTROL})
                r = waiter.getresponse()
                body = r.read()
                got["at"] = time.perf_counter()
                got["listing"] = (r.status, json.loads(body))

            t = threading.Thread(target=wait)
            t.start()
            time.sleep(0.02)
            client.request("GET", f"/nowhere/{n}")
            r = client.getresponse()
            r.read()
            answered = time.perf_counter()
            t.join()
            status, listing = got["listing"]
            assert status == 200 and len(listing) == 1 and listing[0]["answered"], listing
            ms.append(max(0.0, (got["at"] - answered) * 1000))
    finally:
        p.terminate()
        p.wait()
    ms.sort()
    p99 = ms[-(-99 * len(ms) // 100) - 1]  # nearest rank
    print(f"listing that waits, from the awaited answer's receipt to the listing's: "
          f"median {statistics.median(ms):.2f} ms, p99 {p99:.2f} ms, most {ms[-1]:.2f} ms, "
          f"n={len(ms)}")


if __name__ == "__main__":
    main()
