#!/usr/bin/env bash
# psijax's GPU measurements on a machine with JAX's CUDA build, in one call:
#
#   bash scripts/gpu.sh OUT_DIR [SECONDS] [--only PARTS]   # more arguments go to gpu_run.py
#
# Installs what the machine lacks from wheels in .whl/ (folx and pyscf, made elsewhere with
# `pip download --no-deps --only-binary=:all: --python-version 3.12 ... -d .whl folx pyscf`
# where the GPU machine has no package index), then runs benchmarks/gpu_run.py within
# SECONDS (default 540): the compat tests that run on one device, the precision tables,
# step times and memory, and an N2 run for the time left. Results and logs in
# OUT_DIR/gpu.tar.gz, with the N2 run's checkpoint (gpu/n2_run): to continue that run in a
# later GPU session, unpack it here as .gpu-n2/run, carry .gpu-n2 with .whl and pass
# `--run-dir .gpu-n2`.
set -uo pipefail
cd "$(dirname "$0")/.."
out="${1:?usage: bash scripts/gpu.sh OUT_DIR [SECONDS]}"
budget="${2:-540}"
mkdir -p "$out"
python=$(command -v python3)
if compgen -G ".whl/*.whl" >/dev/null; then
  "$python" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/psijax-site .whl/*.whl || exit 1
  export PYTHONPATH="/tmp/psijax-site:${PYTHONPATH:-}"
fi
export PYTHONPATH="$PWD:${PYTHONPATH:-}"
# several processes share the GPU (the tests beside the precision tables); each takes
# memory as it needs it, and the peak figures are what a step used; up to 90% of it (JAX's
# default share is 75%: N2 at production sizes then formed its jacobian in two blocks)
export XLA_PYTHON_CLIENT_PREALLOCATE=false XLA_PYTHON_CLIENT_MEM_FRACTION=0.9
export PYTHONUNBUFFERED=1
"$python" benchmarks/gpu_run.py --out "$out/gpu" --budget "$budget" "${@:3}"
status=$?
# one archive: a device machine's output folder may give back only a few files
tar -czf "$out/gpu.tar.gz" -C "$out" gpu && rm -rf "$out/gpu"
exit $status
