#!/usr/bin/env bash
# What test control costs (docs/performance.md, "Test control"):
#
#   benches/control.sh [BINARY] [ROUNDS]
#
# BINARY defaults to the release build (`cargo build --release` first). Prints, for a
# store seeded with 10,000 plants on :memory: and on a file, the medians of ROUNDS
# (default 200) `POST /_control/reset` and snapshot restores (the server's time from its
# access log, and the client's round trip), and the time from exec to the `listening on`
# line on :memory: with a 1,000-plant seed file (benches/control_probe.py).
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${1:-${CARGO_TARGET_DIR:-target}/release/plant-store}
exec python3 benches/control_probe.py "$BIN" "${2:-200}"
