#!/usr/bin/env bash
# Runs a benchmark in its own environment (benchmarks/.venv: tecomp with its tune and bench extras
# — xgboost, threadpoolctl, scipy, onnxruntime — plus torch CPU, transformers (BERT) and pytest
# for tests/bench), so that torch and ONNX Runtime never become dependencies of tecomp.
# Usage: benchmarks/run.sh cpu_schedules.py [args], or benchmarks/run.sh -m MODULE [args]
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
venv="$here/.venv"
stamp="$venv/.tecomp-bench-installed"
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
fi
if [ ! -f "$stamp" ] || [ "$here/../pyproject.toml" -nt "$stamp" ]; then
  "$venv/bin/pip" install -q --upgrade pip >&2
  # torch 2.13.0 CPU: the pin keeps pip from a multi-GB CUDA build
  "$venv/bin/pip" install -q -e "$here/..[tune,bench]" "torch==2.13.0" pytest transformers >&2
  touch "$stamp"
fi
script="$1"; shift
case "$script" in
  -m) script="-m $1"; shift ;;
  *) script="$here/$script" ;;
esac
# Some machines set these for old OpenBLAS builds; they slow a current one. Unset for the peers.
exec env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE "$venv/bin/python" $script "$@"
