"""What the journal holds and what listing it costs; run by benches/journal_memory.sh:

    python3 benches/journal_memory_probe.py BINARY N
"""

import http.client
import sys
import threading
import time

from journal_wait_probe import CONTROL, start

LIMITS = ["--journal-size", "1000000", "--journal-bytes", "1073741824"]


def rss_kib(p):
    with open(f"/proc/{p.pid}/status") as f:
        return next(int(l.split()[1]) for l in f if l.startswith("VmRSS"))


def fill(port, path, n):
    c = http.client.HTTPConnection("127.0.0.1", port)
    for _ in range(n):
        c.request("GET", path)
        c.getresponse().read()


def per_entry(binary, path, n):
    """RSS per entry over n requests for `path` (after 200 to warm up); the server stays."""
    p, port = start(binary, *LIMITS)
    fill(port, "/healthz", 200)
    before = rss_kib(p)
    fill(port, path, n)
    return p, port, (rss_kib(p) - before) * 1024 / n


def main():
    binary, n = sys.argv[1], int(sys.argv[2])
    p, _, small = per_entry(binary, "/x", 5 * n)
    p.terminate()
    p.wait()
    p, port, big = per_entry(binary, "/" + "p" * 2100 + "?" + "q" * 2100, n)
    print(f"RSS per entry: {small:.0f} bytes for GET /x ({5 * n} entries), "
          f"{big:.0f} bytes with a 4 KB target ({n} entries)")
    done, slowest = False, [0.0]

    def poll():
        h = http.client.HTTPConnection("127.0.0.1", port)
        while not done:
            t = time.perf_counter()
            h.request("GET", "/healthz")
            h.getresponse().read()
            slowest[0] = max(slowest[0], time.perf_counter() - t)

    poller = threading.Thread(target=poll)
    poller.start()
    time.sleep(0.2)
    c = http.client.HTTPConnection("127.0.0.1", port)
    t = time.perf_counter()
    c.request("GET", "/_control/requests", headers={"Authorization": "Bearer " + CONTROL})
    body = c.getresponse().read()
    took = time.perf_counter() - t
    done = True
    poller.join()
    print(f"listing {n} entries: {len(body) / 1e6:.0f} MB in {took:.2f} s; "
          f"slowest /healthz meanwhile {slowest[0] * 1000:.1f} ms")
    p.terminate()
    p.wait()


if __name__ == "__main__":
    main()
