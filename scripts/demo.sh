#!/usr/bin/env bash
# The main job: tune matmul 512^3 on this CPU with the learned (XGBoost) cost model, build the best
# kernel, check it against numpy, and time it beside numpy (OpenBLAS) and torch (MKL), each at 1 and
# 2 threads, in one interleaved run. The first run sets up benchmarks/.venv (tecomp with its tune
# and bench extras, and torch CPU): a few minutes once. Extra arguments go to `tecomp tune`.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
log="$(mktemp -d)/matmul512.jsonl"   # a fresh log: the demo always tunes
exec "$root/benchmarks/run.sh" -m tecomp.cli tune matmul --shape 512 512 512 --trials 96 \
  --cost-model xgb --log "$log" "$@"
