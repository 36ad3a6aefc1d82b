#!/usr/bin/env bash
# The main job: build a kernel on this CPU, check it against numpy and report its speed.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
py="$("$root/scripts/venv.sh")"
exec "$py" -m tecomp.cli run matmul --shape 1024 1024 1024 --schedule hand "$@"
