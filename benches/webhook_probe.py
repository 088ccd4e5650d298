"""Webhook probes for benches/webhooks.sh.

  webhook_probe.py receive PORT LOG [gone-first]
      A local receiver that answers every POST at once (200, keep-alive; with gone-first
      its first answer is 410). Appends "arrival_ms seq event_timestamp_ms" per request
      to LOG.
  webhook_probe.py create PORT TOKEN N GAP_MS
      N creates over one keep-alive connection, GAP_MS apart (0: back to back).
  webhook_probe.py lag LOG
      p50, p99 and max of arrival - event timestamp (the commit), in ms.
  webhook_probe.py span LOG FIRST LAST
      ms from the arrival of seq FIRST to that of seq LAST (their last arrivals).
"""
import calendar
import http.client
import json
import os
import socket
import sys
import threading
import time


def event_ms(ts):
    # 2026-11-25T16:42:16.234Z
    whole, frac = ts[:-1].split(".")
    return calendar.timegm(time.strptime(whole, "%Y-%m-%dT%H:%M:%S")) * 1000 + int(frac)


def receive(port, log, gone_first):
    out = open(log, "a", buffering=1)
    lock = threading.Lock()
    gone = [gone_first]

    def serve(conn):
        buf = b""
        while True:
            while b"\r\n\r\n" not in buf:
                data = conn.recv(65536)
                if not data:
                    return
                buf += data
            head, buf = buf.split(b"\r\n\r\n", 1)
            length = 0
            for line in head.split(b"\r\n")[1:]:
                k, _, v = line.partition(b":")
                if k.strip().lower() == b"content-length":
                    length = int(v)
            while len(buf) < length:
                data = conn.recv(65536)
                if not data:
                    return
                buf += data
            body, buf = buf[:length], buf[length:]
            now = time.time() * 1000
            event = json.loads(body)
            with lock:
                out.write("%.3f %d %d\n" % (now, event["seq"], event_ms(event["timestamp"])))
                status = b"410 Gone" if gone[0] else b"200 OK"
                gone[0] = False
            conn.sendall(b"HTTP/1.1 " + status + b"\r\ncontent-length: 0\r\n\r\n")

    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("127.0.0.1", port))
    srv.listen(64)
    while True:
        conn, _ = srv.accept()
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        threading.Thread(target=serve, args=(conn,), daemon=True).start()


def create(port, token, n, gap_ms):
    c = http.client.HTTPConnection("127.0.0.1", port)
    base = int(time.time() * 1000) % 100000 * 100000
    for i in range(n):
        c.request("POST", "/plants", '{"id":%d,"name":"hook-%d"}' % (base + i, i),
                  {"Authorization": "Bearer " + token, "Content-Type": "application/json"})
        r = c.getresponse()
        r.read()
        assert r.status == 200, r.status
        if gap_ms:
            time.sleep(gap_ms / 1000)


def rows(log):
    return [line.split() for line in open(log)]


def lag(log):
    lags = sorted(float(a) - int(ts) for a, _, ts in rows(log))
    pick = lambda q: lags[min(len(lags) - 1, int(q * len(lags)))]
    print("n=%d p50=%.1fms p99=%.1fms max=%.1fms" % (len(lags), pick(0.5), pick(0.99), lags[-1]))


def span(log, first, last):
    at = {}
    for a, seq, _ in rows(log):
        at[int(seq)] = float(a)
    print("%.0f" % (at[last] - at[first]))


if __name__ == "__main__":
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == "receive":
        receive(int(args[0]), args[1], len(args) > 2 and args[2] == "gone-first")
    elif cmd == "create":
        create(int(args[0]), args[1], int(args[2]), float(args[3]))
    elif cmd == "lag":
        lag(args[0])
    elif cmd == "span":
        span(args[0], int(args[1]), int(args[2]))
