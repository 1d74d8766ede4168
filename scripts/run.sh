#!/usr/bin/env bash
# Installs psijax into .venv and runs the main job: LiH (R = 3.015 bohr) with the
# default settings, printing the energy with its error bar next to the exact value.
# Extra arguments go to `psijax train`, e.g. `bash scripts/run.sh --system H2`.
#
# Each system gets its own directory: runs/lih by default, runs/h2 for --system H2
# (--out DIR chooses another). A previous run there is never deleted without asking:
#   - a finished run: the script says so in one line, with the commands that continue it
#     or start it over (`bash scripts/run.sh --force`), and exits;
#   - an unfinished run (killed, crashed, pre-empted): the script resumes it.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${PSIJAX_SKIP_INSTALL:-}" ]; then # set it to reuse the .venv as it is
  python3 -m venv .venv
  .venv/bin/python -m pip install --quiet -c scripts/constraints.txt pip
  .venv/bin/python -m pip install --quiet -c scripts/constraints.txt -e .
fi

system="" out="" config="" force=0 resume=0 dry=0
args=("$@")
for ((i = 0; i < ${#args[@]}; i++)); do
  next="${args[i + 1]:-}"
  case "${args[i]}" in
    --system) system="$next" ;;
    --system=*) system="${args[i]#--system=}" ;;
    --out) out="$next" ;;
    --out=*) out="${args[i]#--out=}" ;;
    --config) config="$next" ;;
    --config=*) config="${args[i]#--config=}" ;;
    --force) force=1 ;;
    --dry-run) dry=1 ;;
    --resume | --resume=* | -h | --help | --version) resume=1 ;;
  esac
done
if [ "$resume" -eq 1 ]; then # the user says what to do
  exec .venv/bin/psijax train "$@"
fi
if [ -z "$system" ] && [ -n "$config" ]; then # a config file may name the system
  system=$(.venv/bin/python -c 'import sys; from psijax import config
print(config.read_values(sys.argv[1]).get("system", ""))' "$config" 2>/dev/null || true)
fi
if [ -z "$out" ]; then
  slug=$(printf '%s' "${system:-LiH}" | tr '[:upper:]' '[:lower:]' |
    sed -E 's#.*/##; s/\.xyz$//; s/[^a-z0-9]+/-/g; s/^-+//; s/-+$//' | cut -c1-40)
  out="runs/${slug:-run}"
fi

if [ "$dry" -eq 1 ]; then # writes nothing; shows what the run would do there
  exec .venv/bin/psijax train --out "$out" "$@"
fi
if [ "$force" -eq 0 ] && [ -f "$out/summary.json" ]; then
  .venv/bin/python - "$out" <<'EOF'
import json, shlex, sys
out = sys.argv[1]
s = json.load(open(f"{out}/summary.json"))
q = shlex.quote(out)
print(f"{out} holds a finished run ({s['system']}, E = {s['energy_text']} Ha after "
      f"{s['steps']} steps); continue it with: .venv/bin/psijax train --resume {q} "
      f"--steps {2 * s['steps']}, or start over with: bash scripts/run.sh --force "
      f"(deletes it) or --out ANOTHER_DIR")
EOF
  exit 0
fi
if [ "$force" -eq 0 ] && [ -f "$out/config.json" ]; then
  echo "$out holds an unfinished run: resuming it (bash scripts/run.sh --force starts over)" >&2
  exec .venv/bin/psijax train --resume "$out" "$@"
fi
exec .venv/bin/psijax train --out "$out" "$@"
