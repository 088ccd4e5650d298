"""Seeds 1,000 plants over one keep-alive connection: seed.py PORT (token: BENCH_TOKEN)."""
import http.client
import os
import sys

c = http.client.HTTPConnection("127.0.0.1", int(sys.argv[1]))
for i in range(1, 1001):
    c.request("POST", "/plants", '{"id":%d,"name":"plant-%d","tag":"green"}' % (i, i),
              {"Authorization": "Bearer " + os.environ["BENCH_TOKEN"],
               "Content-Type": "application/json"})
    r = c.getresponse()
    r.read()
    assert r.status in (200, 201), r.status
