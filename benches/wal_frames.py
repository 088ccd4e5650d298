#!/usr/bin/env python3
"""Where a SQLite database's write-ahead log frames go: benches/wal_frames.py DB

Reads DB-wal (left by a server stopped with kill -9, so that no final checkpoint emptied
it): the frames of its current generation (the header's salts) up to the last commit
frame, and names each frame's page by its table or index (SQLite's dbstat, on a copy of
DB and its log). Prints the page size, the commits, the frames per commit, and the frames
per table or index. benches/flash.sh measures the bytes; this says which pages they are.
"""
import collections, os, shutil, sqlite3, struct, sys, tempfile

db = sys.argv[1]
data = open(db + "-wal", "rb").read()
magic, _, page_size, _, salt1, salt2 = struct.unpack(">6I", data[:24])
assert magic in (0x377F0682, 0x377F0683), "not a WAL file"
frames, commits, pending = [], [], []
off = 32
while off + 24 + page_size <= len(data):
    pgno, commit, s1, s2 = struct.unpack(">4I", data[off:off + 16])
    if (s1, s2) != (salt1, salt2):
        break
    pending.append(pgno)
    if commit:
        commits.append(pending)
        frames.extend(pending)
        pending = []
    off += 24 + page_size

with tempfile.TemporaryDirectory() as tmp:
    for suffix in ("", "-wal"):
        shutil.copy(db + suffix, os.path.join(tmp, "db" + suffix))
    c = sqlite3.connect(os.path.join(tmp, "db"))
    owner = {p: n for n, p in c.execute("SELECT name, pageno FROM dbstat")}
    owner[1] = "page 1 (header, sqlite_schema)"

print("page size %d, frame %d bytes; %d commits, %d frames: %.2f frames per commit"
      % (page_size, page_size + 24, len(commits), len(frames), len(frames) / max(1, len(commits))))
for name, n in collections.Counter(owner.get(p, "free") for p in frames).most_common():
    print("  %-34s %6d frames, %.2f per commit" % (name, n, n / max(1, len(commits))))
