#!/usr/bin/env bash
# The compatibility legs of CI: the tests marked `compat` (the Laplacian compatibility
# matrix, a short training with a checkpoint round trip, the 2-process run) in an
# environment this script creates from the package registry.
#
#   bash scripts/compat.sh newest   # .venv-newest: newest CPython 3.13/3.12, newest releases
#   bash scripts/compat.sh floor    # .venv-floor: CPython 3.11, every floor of pyproject.toml
#
# Extra arguments go to pytest. Exit codes: pytest's (5, "no tests collected", becomes 1);
# 2 for a bad argument; 3 when the leg's interpreter is missing (one line says which).
set -euo pipefail
cd "$(dirname "$0")/.."

leg="${1:-}"
case "$leg" in
  newest) wanted=(3.13 3.12) ;;
  floor) wanted=(3.11) ;;
  *)
    echo "usage: bash scripts/compat.sh newest|floor [pytest args]" >&2
    exit 2
    ;;
esac
shift

# The interpreter: on PATH, else one installed by pyenv.
python=""
for v in "${wanted[@]}"; do
  for candidate in "$(command -v "python$v" || true)" \
    "${PYENV_ROOT:-$HOME/.pyenv}"/versions/"$v"*/bin/"python$v"; do
    if [ -x "$candidate" ] && "$candidate" -c "import venv" 2>/dev/null; then
      python="$candidate"
      break 2
    fi
  done
done
if [ -z "$python" ]; then
  echo "compat $leg: no CPython $(IFS=/; echo "${wanted[*]}") found on PATH or under pyenv; install one (e.g. pyenv install ${wanted[0]}) to run this leg" >&2
  exit 3
fi

# CPU seconds (user + system) of the commands this script has waited for so far, in $cpu
# (`times` must run in this shell, not in a command substitution).
count_cpu() {
  times >"$venv/times.txt"
  cpu=$(tail -1 "$venv/times.txt" | awk '{ for (i = 1; i <= 2; i++) {
    split($i, t, "m"); sub("s", "", t[2]); n += 60 * t[1] + t[2] } printf "%d", n }')
}

start=$(date +%s)
venv=".venv-$leg"
"$python" -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --upgrade pip
if [ "$leg" = newest ]; then
  "$venv/bin/python" -m pip install --quiet --no-compile --upgrade --upgrade-strategy eager \
    -e ".[test]"
else
  # Every ">=" floor of pyproject.toml pinned exactly (and jaxlib to jax's), so the floors
  # tested are the floors declared.
  constraints="$venv/floors.txt"
  "$venv/bin/python" - >"$constraints" <<'EOF'
import re
import tomllib

with open("pyproject.toml", "rb") as f:
    deps = tomllib.load(f)["project"]["dependencies"]
for dep in deps:
    name, floor = re.fullmatch(r"([A-Za-z0-9_.-]+)>=([0-9][^,;\s]*)", dep.strip()).groups()
    print(f"{name}=={floor}")
    if name == "jax":
        print(f"jaxlib=={floor}")
EOF
  "$venv/bin/python" -m pip install --quiet --no-compile -c "$constraints" -e ".[test]"
fi
installed=$(date +%s)
count_cpu
cpu_installed=$cpu

"$venv/bin/python" - <<'EOF'
import platform
from importlib.metadata import version

names = ["jax", "jaxlib", "folx", "orbax-checkpoint", "numpy", "scipy", "optax", "pyscf"]
print(f"compat: python {platform.python_version()}, "
      + ", ".join(f"{n} {version(n)}" for n in names))
EOF

# Bytecode written once, under the venv, for every worker and subprocess (scripts/test.sh)
export PYTHONPYCACHEPREFIX="$PWD/$venv/pycache"
unset PYTHONDONTWRITEBYTECODE
set +e
"$venv/bin/python" -m pytest -q -p no:cacheprovider -n 2 -m compat "$@"
status=$?
set -e
end=$(date +%s)
count_cpu
echo "compat $leg: install $((installed - start)) s; tests $((end - installed)) s wall," \
  "$((cpu - cpu_installed)) s CPU; load average $(cut -d' ' -f1-3 /proc/loadavg); exit $status"
if [ "$status" -eq 5 ]; then
  echo "pytest collected no tests: that is a failure" >&2
  exit 1
fi
exit "$status"
