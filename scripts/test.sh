#!/usr/bin/env bash
# Installs psijax with its test dependencies into .venv and runs the test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
.venv/bin/python -m pip install --quiet -c scripts/constraints.txt pip
.venv/bin/python -m pip install --quiet -c scripts/constraints.txt -e ".[test]"
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
