#!/usr/bin/env bash
# The test suite (default: everything not marked slow), on both cores.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
py="$("$root/scripts/venv.sh" test)"
cd "$root"
exec "$py" -m pytest -n 2 -q "$@"
