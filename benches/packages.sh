#!/usr/bin/env bash
# What the packages cost a test author (docs/packages.md; figures in docs/performance.md, "Test control"):
#
#   benches/packages.sh [TESTS]
#
# Uses this machine's wheel and npm tarballs in dist/ (scripts/package python and npm
# write them). In a fresh venv: `pip install --no-index` of the wheel (pytest and
# requests from PyPI), then, with no cargo on PATH, the wall time of the guide's 5-test
# pytest suite (tests/guide/suite.py), and the `plant_store` fixture's setup (reset and
# mint) over a file of TESTS tests (default 200): its median and 90th percentile as
# pytest reports each setup's duration, the first (which starts the server) left out.
# In a fresh directory: `npm install --offline` of the tarballs, then the wall time of
# the same 5 tests in `node --test` (tests/guide/suite.test.mjs). Prints each size too.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
n=${1:-200}
arch=$(uname -m)
npm_cpu=$(case $arch in x86_64) echo x64 ;; aarch64) echo arm64 ;; *) echo "$arch" ;; esac)
wheel=$(ls dist/plant_store-*"$arch"*.whl)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
nocargo=""
IFS=: read -ra dirs <<<"$PATH"
for d in "${dirs[@]}"; do [ -x "$d/cargo" ] || nocargo=${nocargo:+$nocargo:}$d; done
ls -l dist/ | awk 'NR > 1 { print $5, $9 }'

python3 -m venv "$work/venv"
"$work/venv/bin/pip" install -q --no-index "$wheel"
"$work/venv/bin/pip" install -q pytest requests
mkdir "$work/py"
cp tests/guide/suite.py tests/guide/seed.json "$work/py/"
cat >"$work/py/test_many.py" <<PY
import pytest

@pytest.mark.parametrize("i", range($n))
def test_one(plant_store, i):
    assert plant_store.token
PY
cat >"$work/py/conftest.py" <<'PY'
import statistics

setups = []

def pytest_runtest_logreport(report):
    if report.when == "setup" and report.nodeid.startswith("test_many.py"):
        setups.append(report.duration * 1000)

def pytest_sessionfinish(session):
    if len(setups) > 2:
        rest = sorted(setups[1:])
        print("\nplant_store setup over %d tests: median %.2f ms, p90 %.2f ms (first, with the start: %.1f ms)"
              % (len(rest), statistics.median(rest), rest[int(len(rest) * 0.9)], setups[0]))
PY
(
  cd "$work/py"
  export PATH=$work/venv/bin:$nocargo
  start=$(date +%s%N)
  pytest -q -p no:cacheprovider suite.py | tail -1
  echo "5-test pytest suite (tests/guide/suite.py): $(((($(date +%s%N) - start)) / 1000000)) ms wall"
  pytest -q -p no:cacheprovider -s test_many.py | grep -E 'plant_store setup|passed'
)

mkdir "$work/node"
cat >"$work/node/package.json" <<JSON
{ "private": true, "type": "module",
  "devDependencies": { "plant-store": "file:$(ls "$root"/dist/plant-store-[0-9]*.tgz)" },
  "overrides": { "@plant-store/linux-$npm_cpu": "file:$(ls "$root"/dist/plant-store-linux-$npm_cpu-*.tgz)" } }
JSON
cp tests/guide/suite.test.mjs tests/guide/seed.json "$work/node/"
(
  cd "$work/node"
  export PATH=$nocargo
  npm install -s --offline --no-audit --no-fund
  start=$(date +%s%N)
  node --test suite.test.mjs | grep -E '^# (pass|fail)'
  echo "5-test node --test suite (tests/guide/suite.test.mjs): $(((($(date +%s%N) - start)) / 1000000)) ms wall"
)
