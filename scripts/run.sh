#!/usr/bin/env bash
# Installs psijax into .venv and runs the main job: LiH (R = 3.015 bohr) with the
# default settings, printing the energy with its error bar next to the exact value.
# Extra arguments go to `psijax train`, e.g. `bash scripts/run.sh --system H2`.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet -e .
exec .venv/bin/psijax train --out runs/lih --force "$@"
