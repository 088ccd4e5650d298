"""Creates of plants at a fixed RATE per second, from CLIENTS keep-alive connections,
for SECONDS; prints the count and the latency's p50, p99 and max in ms (used by
benches/held.sh). Open loop: each create has its time in the schedule, and its latency
counts from that time, so a create that waited behind a stalled one counts its wait too.

    python3 benches/held_probe.py PORT TOKEN SECONDS CLIENTS RATE
"""
import http.client, sys, threading, time

port, token, secs = int(sys.argv[1]), sys.argv[2], float(sys.argv[3])
clients, rate = int(sys.argv[4]), float(sys.argv[5])
lat, lock = [], threading.Lock()
start = time.perf_counter() + 0.1


def client(n):
    c = http.client.HTTPConnection("127.0.0.1", port)
    mine, i = [], 0
    while True:
        due = start + (i * clients + n) / rate
        if due > start + secs:
            break
        i += 1
        wait = due - time.perf_counter()
        if wait > 0:
            time.sleep(wait)
        pid = 100_000_000 + n * 10_000_000 + i
        c.request("POST", "/plants", '{"id":%d,"name":"p"}' % pid,
                  {"Authorization": "Bearer " + token, "Content-Type": "application/json"})
        r = c.getresponse()
        r.read()
        mine.append(time.perf_counter() - due)
        if r.status != 200:
            raise SystemExit("status %d" % r.status)
    with lock:
        lat.extend(mine)


threads = [threading.Thread(target=client, args=(n,)) for n in range(clients)]
for t in threads:
    t.start()
for t in threads:
    t.join()
lat.sort()
q = lambda p: lat[min(len(lat) - 1, int(p * len(lat)))] * 1000
print("writes=%d p50=%.2fms p99=%.2fms max=%.2fms" % (len(lat), q(0.50), q(0.99), lat[-1] * 1000))
