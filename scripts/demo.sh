#!/usr/bin/env bash
# The main job: tune matmul on this CPU (a few minutes), build the best kernel, check it against
# numpy and report its speed beside numpy's. Extra arguments go to `tecomp tune`.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
py="$("$root/scripts/venv.sh")"
exec "$py" -m tecomp.cli tune matmul --shape 512 512 512 --trials 96 "$@"
