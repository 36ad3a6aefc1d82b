#!/usr/bin/env bash
# Creates (once) the project's virtual environment in .venv and installs tecomp into it with the
# extras given as arguments. Sourced by the other scripts; prints the venv's python path.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
extras="${1:-}"
py="${PYTHON:-python3}"
if [ ! -x "$root/.venv/bin/python" ]; then
  "$py" -m venv "$root/.venv" >&2
fi
stamp="$root/.venv/.tecomp-installed-${extras:-core}"
if [ ! -f "$stamp" ] || [ "$root/pyproject.toml" -nt "$stamp" ]; then
  "$root/.venv/bin/python" -m pip install -q --upgrade pip >&2
  spec="$root"
  [ -n "$extras" ] && spec="$root[$extras]"
  "$root/.venv/bin/python" -m pip install -q -e "$spec" >&2
  touch "$stamp"
fi
echo "$root/.venv/bin/python"
