#!/usr/bin/env bash
# Installs psijax with its test dependencies into .venv and runs the test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
.venv/bin/python -m pip install --quiet -c scripts/constraints.txt pip
# --no-compile: the tests import a fraction of what pip would byte-compile (16 s of a 37 s
# install); Python compiles what they import on first use (below)
.venv/bin/python -m pip install --quiet --no-compile -c scripts/constraints.txt -e ".[test]"
.venv/bin/ruff check .
# Each test worker and CLI subprocess imports jax, scipy, pyscf and matplotlib anew. With
# PYTHONDONTWRITEBYTECODE set (some machines' default), every one of them compiled those
# modules from source, 6 s a process: the first process now writes their bytecode, under
# .venv only (nothing beside the sources), and the rest read it.
export PYTHONPYCACHEPREFIX="$PWD/.venv/pycache"
unset PYTHONDONTWRITEBYTECODE
set +e
.venv/bin/python -m pytest -q -p no:cacheprovider -n 2 --dist worksteal "$@"
status=$?
set -e
if [ "$status" -eq 5 ]; then
  echo "pytest collected no tests: that is a failure" >&2
  exit 1
fi
exit "$status"
