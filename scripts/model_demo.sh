#!/usr/bin/env bash
# The whole-model workflow (ONNX -> tecomp tune-model -> export -> tc.load in a fresh process
# without onnx, checked against ONNX Runtime) and the messages of a user's usual errors, on this
# machine: scripts/model_demo.sh [WORKDIR] [--trials N]. Sets up .venv with the onnx, tune and
# bench extras (onnxruntime is the check) on its first run.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
py="$("$root/scripts/venv.sh" "onnx,tune,bench")"
exec "$py" "$root/scripts/model_demo.py" "$@"
