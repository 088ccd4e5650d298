#!/usr/bin/env bash
# What the journal holds and what listing it costs (docs/performance.md, "Test
# control"):
#
#   benches/journal_memory.sh [BINARY] [N]
#
# BINARY defaults to the release build. With test control and room for a million
# entries: the server's RSS per entry over 5×N small requests, and over N requests with
# a 4 KB target; then the time to list those N entries while another connection polls
# /healthz, and the slowest /healthz meanwhile (benches/journal_memory_probe.py; N
# defaults to 20,000).
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${1:-${CARGO_TARGET_DIR:-target}/release/plant-store}
exec python3 benches/journal_memory_probe.py "$BIN" "${2:-20000}"
