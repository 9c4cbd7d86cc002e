#!/usr/bin/env bash
# Run every test: ruff, the lit/FileCheck suites, then pytest (slow tests included).
set -uo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/.venv/bin:$PATH"
export CKIR_CACHE_DIR="${CKIR_CACHE_DIR:-$PWD/build/cache}"
status=0

echo "== ruff"
ruff check . || status=1

echo "== lit"
lit -sv tests/filecheck || status=1

echo "== pytest"
# two pytest-xdist workers (this machine kind has 2 vCPUs); each test file runs whole on one
# worker (--dist loadfile), so a file's module fixtures are built once and its tests never run
# next to each other.  CKIR_TEST_WORKERS=0 runs everything in this one process.
workers="${CKIR_TEST_WORKERS:-2}"
if [ "$workers" = 0 ]; then
  python -m pytest -q "$@"
else
  python -m pytest -q -n "$workers" --dist loadfile "$@"
fi
rc=$?
# pytest exit code 5 means "no tests collected": never a pass.
if [ $rc -eq 5 ]; then
  echo "pytest collected no tests: failing" >&2
  rc=1
fi
[ $rc -eq 0 ] || status=1

if [ $status -eq 0 ]; then echo "ALL TESTS PASSED"; else echo "TESTS FAILED"; fi
exit $status
