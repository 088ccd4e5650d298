"""The memory load of benches/rss.sh (issue 31), against a running server:

    python3 benches/rss_load.py PORT TOKEN PID fill N
    python3 benches/rss_load.py PORT TOKEN,WRITER PID load IDLE WRITERS SECONDS
    python3 benches/rss_load.py PORT TOKEN PID idle N

`idle` opens N keep-alive connections, each after one request, waits 3 s, and prints
VmRSS before and after, and the difference per connection.

`fill` creates plants 1 to N, each with a 256-character name and tag (about 540 bytes of
list JSON each: 20,000 make a 10.7 MB list), over 8 keep-alive connections.

`load` opens IDLE keep-alive connections (each makes one request, then waits), then for
SECONDS runs WRITERS connections that each create plants one after another (as WRITER's
principal, so the list does not grow), and one
`GET /plants` (the whole list) read slowly enough (2 MB/s) that it is still streaming
when the writers stop. VmRSS is sampled every 50 ms. It prints one line:
`peak_kb=… idle_conns=… writes=… list_bytes=… max_rss_kb=…` (peak_kb is VmHWM), and
one with /proc/PID/smaps's resident kB by kind at the largest sample.
"""

import http.client
import socket
import sys
import threading
import time

PORT, TOKENS, PID, WHAT = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
# TOKEN[,WRITER]: the list's principal, and the writers' (so that the list stays the size
# `fill` made).
TOKEN, WRITER = (TOKENS.split(",") + [TOKENS])[:2]
AUTH = {"Authorization": "Bearer " + TOKEN, "Content-Type": "application/json"}
LONG = "x" * 256


def status(field):
    with open(f"/proc/{PID}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def smaps_summary():
    """Resident kB of the process by kind, from /proc/PID/smaps: thread stacks (an
    anonymous mapping right above its guard page), the brk heap, other anonymous memory
    (malloc's mmap'd arenas and large blocks), and the binary's own pages."""
    kinds, prev_end, prev_guard = {}, None, False
    cur = None
    with open(f"/proc/{PID}/smaps") as f:
        for line in f:
            head = line.split()
            if "-" in head[0] and len(head) >= 5 and not head[0].endswith(":"):
                lo, hi = (int(x, 16) for x in head[0].split("-"))
                perms, path = head[1], head[5] if len(head) > 5 else ""
                if path == "[heap]":
                    cur = "heap (brk)"
                elif path.startswith("/"):
                    cur = "binary"
                elif path:
                    cur = "other " + path
                elif perms.startswith("rw") and prev_guard and prev_end == lo:
                    cur = "thread stacks"
                else:
                    cur = "anon (mmap)"
                prev_guard = perms.startswith("---") and hi - lo <= 64 * 1024
                prev_end = hi
            elif head[0] == "Rss:":
                kinds[cur] = kinds.get(cur, 0) + int(head[1])
    return " ".join(f"{k.replace(' ', '_')}={v}" for k, v in sorted(kinds.items()))


def create(conn, i, auth=AUTH):
    body = '{"id":%d,"name":"%s-%d","tag":"%s"}' % (i, LONG[:240], i, LONG)
    conn.request("POST", "/plants", body, auth)
    r = conn.getresponse()
    r.read()
    return r.status


def fill(n):
    def part(k):
        c = http.client.HTTPConnection("127.0.0.1", PORT)
        for i in range(1 + k, n + 1, 8):
            st = create(c, i)
            assert st == 200, st
        c.close()

    ts = [threading.Thread(target=part, args=(k,)) for k in range(8)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()


def hold(n):
    """n keep-alive connections, each after one answered request, held open."""
    held = []
    for _ in range(n):
        s = socket.create_connection(("127.0.0.1", PORT))
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        got = b""
        while b"\r\n\r\n" not in got:
            got += s.recv(4096)
        held.append(s)
    return held


def load(idle, writers, seconds):
    held = hold(idle)
    stop = time.monotonic() + seconds
    writes = [0] * writers

    auth = dict(AUTH, Authorization="Bearer " + WRITER)

    def writer(k):
        c = http.client.HTTPConnection("127.0.0.1", PORT)
        i = 10_000_000 + k * 1_000_000
        while time.monotonic() < stop:
            i += 1
            if create(c, i, auth) == 200:
                writes[k] += 1
        c.close()

    listed = [0]

    def lister():
        s = socket.create_connection(("127.0.0.1", PORT))
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
        s.sendall(
            b"GET /plants HTTP/1.1\r\nHost: x\r\nConnection: close\r\nAuthorization: Bearer "
            + TOKEN.encode()
            + b"\r\n\r\n"
        )
        # 2 MB/s: 32 KiB every 16 ms.
        while True:
            b = s.recv(32 * 1024)
            if not b:
                break
            listed[0] += len(b)
            time.sleep(0.016)
        s.close()

    ts = [threading.Thread(target=writer, args=(k,)) for k in range(writers)]
    ts.append(threading.Thread(target=lister))
    for t in ts:
        t.start()
    top, at_top = 0, ""
    while any(t.is_alive() for t in ts):
        now = status("VmRSS")
        if now > top:
            top, at_top = now, smaps_summary()
        time.sleep(0.05)
    for t in ts:
        t.join()
    peak = status("VmHWM")
    for s in held:
        s.close()
    print(
        f"peak_kb={peak} idle_conns={len(held)} writes={sum(writes)} "
        f"list_bytes={listed[0]} max_rss_kb={top}"
    )
    print(f"at max_rss, kB by kind: {at_top}")


def idle(n):
    before = status("VmRSS")
    held = hold(n)
    time.sleep(3)
    after = status("VmRSS")
    print(f"{n} idle connections: {before} -> {after} kB, {(after - before) / n:.1f} kB each")
    for s in held:
        s.close()


if WHAT == "idle":
    idle(int(sys.argv[5]))
elif WHAT == "fill":
    fill(int(sys.argv[5]))
else:
    load(int(sys.argv[5]), int(sys.argv[6]), float(sys.argv[7]))
