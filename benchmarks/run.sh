#!/usr/bin/env bash
# Runs a benchmark in its own environment (benchmarks/.venv: tecomp + torch CPU + threadpoolctl),
# so that torch never becomes a dependency of tecomp. Usage: benchmarks/run.sh cpu_schedules.py [args]
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
venv="$here/.venv"
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q --upgrade pip
  "$venv/bin/pip" install -q -e "$here/..[test]" threadpoolctl "torch==2.13.0"
fi
script="$1"; shift
# Some machines set these for old OpenBLAS builds; they slow a current one. Unset for the peers.
exec env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE "$venv/bin/python" "$here/$script" "$@"
