#!/usr/bin/env bash
# How soon a journal listing that waits is answered (docs/performance.md, "Test
# control"):
#
#   benches/journal_wait.sh [BINARY] [TRIES]
#
# BINARY defaults to the release build (`cargo build --release` first). TRIES times
# (default 100), a `GET /_control/requests?wait=5s&min=1&path=…` is parked, then a
# request it waits for is sent on another connection: the time from the client's
# receipt of that request's answer to its receipt of the listing, median, p99 and most
# (benches/journal_wait_probe.py).
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${1:-${CARGO_TARGET_DIR:-target}/release/plant-store}
exec python3 benches/journal_wait_probe.py "$BIN" "${2:-100}"
