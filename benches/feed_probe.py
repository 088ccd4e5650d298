#!/usr/bin/env python3
"""Clients of the change feed for benches/feed.sh (standard library only).

  feed_probe.py hold PORT TOKEN N
      Opens N event streams (GET /events, Accept: text/event-stream) as TOKEN, prints
      "open N" once every head is read, then reads and drops what they send until
      standard input closes; prints "held N streams, E events, C closed early".
  feed_probe.py lag WRITE_PORT READ_PORT TOKEN COUNT INTERVAL_MS
      Opens one stream on READ_PORT after the last event so far, makes COUNT plants
      through WRITE_PORT one every INTERVAL_MS, and takes each event's delivery lag: the
      time it arrived on the stream minus its `timestamp` (the commit's time, taken
      before the commit, so the lag includes the commit itself). Prints
      "lag_ms n=… p50=… p99=… max=… missing=…".
"""
import http.client
import json
import os
import resource
import selectors
import socket
import sys
import threading
import time
from datetime import datetime, timezone


def open_stream(port, token, after=None):
    s = socket.create_connection(("127.0.0.1", port))
    extra = f"Last-Event-ID: {after}\r\n" if after is not None else ""
    s.sendall(
        (
            f"GET /events HTTP/1.1\r\nHost: bench\r\nAccept: text/event-stream\r\n"
            f"Authorization: Bearer {token}\r\n{extra}\r\n"
        ).encode()
    )
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = s.recv(4096)
        if not chunk:
            sys.exit("a stream closed before its head")
        head += chunk
    status = head.split(b" ", 2)[1]
    if status != b"200":
        sys.exit(f"a stream was answered {status.decode()}: {head!r}")
    return s, head.split(b"\r\n\r\n", 1)[1]


def hold(port, token, n):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    sel = selectors.DefaultSelector()
    for _ in range(n):
        s, _ = open_stream(port, token)
        s.setblocking(False)
        sel.register(s, selectors.EVENT_READ)
    print(f"open {n}", flush=True)
    done = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.read(), done.set()), daemon=True).start()
    events = closed = 0
    while not done.is_set():
        for key, _ in sel.select(timeout=0.2):
            try:
                data = key.fileobj.recv(1 << 16)
            except BlockingIOError:
                continue
            if not data:
                sel.unregister(key.fileobj)
                closed += 1
                continue
            events += data.count(b"\nevent: ")
    print(f"held {n} streams, {events} events, {closed} closed early", flush=True)


def last_seq(port, token):
    c = http.client.HTTPConnection("127.0.0.1", port)
    after = 0
    while True:
        c.request("GET", f"/events?after={after}&limit=1000", headers={"Authorization": f"Bearer {token}"})
        page = json.loads(c.getresponse().read())
        if not page:
            return after
        after = page[-1]["seq"]


def commit_time(stamp):
    return datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=timezone.utc).timestamp()


def lag(write_port, read_port, token, count, interval_ms):
    after = last_seq(read_port, token)
    s, buf = open_stream(read_port, token, after)
    lags = []

    def read():
        nonlocal buf
        while len(lags) < count:
            while b"\n\n" not in buf:
                chunk = s.recv(1 << 16)
                if not chunk:
                    return
                buf += chunk
            arrived = time.time()
            message, buf = buf.split(b"\n\n", 1)
            for line in message.split(b"\n"):
                if line.startswith(b"data: "):
                    event = json.loads(line[6:])
                    lags.append((arrived - commit_time(event["timestamp"])) * 1000)

    reader = threading.Thread(target=read)
    reader.start()
    c = http.client.HTTPConnection("127.0.0.1", write_port)
    base = int(time.time() * 1000) * 1000 + os.getpid() % 1000
    for i in range(count):
        c.request(
            "POST",
            "/plants",
            json.dumps({"id": base + i, "name": f"lag-{i}"}),
            {"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
        )
        r = c.getresponse()
        r.read()
        if r.status != 200:
            sys.exit(f"a create was answered {r.status}")
        time.sleep(interval_ms / 1000)
    reader.join(timeout=10)
    got = sorted(lags)
    if not got:
        sys.exit("no event arrived")
    pct = lambda p: got[min(len(got) - 1, int(p * len(got)))]
    print(
        f"lag_ms n={len(got)} p50={pct(0.5):.1f} p99={pct(0.99):.1f} max={got[-1]:.1f} missing={count - len(got)}",
        flush=True,
    )


if __name__ == "__main__":
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == "hold":
        hold(int(args[0]), args[1], int(args[2]))
    elif cmd == "lag":
        lag(int(args[0]), int(args[1]), args[2], int(args[3]), float(args[4]))
    else:
        sys.exit(__doc__)
