#!/usr/bin/env bash
# Installs psijax with its test dependencies into .venv and runs the test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
.venv/bin/python -m pip install --quiet -c scripts/constraints.txt pip
# --no-compile: the tests import a fraction of what pip would byte-compile (16 s of a 37 s
# install); Python compiles what they import on first use
.venv/bin/python -m pip install --quiet --no-compile -c scripts/constraints.txt -e ".[test]"
.venv/bin/ruff check .
set +e
.venv/bin/python -m pytest -q -p no:cacheprovider -n 2 --dist worksteal "$@"
status=$?
set -e
if [ "$status" -eq 5 ]; then
  echo "pytest collected no tests: that is a failure" >&2
  exit 1
fi
exit "$status"
