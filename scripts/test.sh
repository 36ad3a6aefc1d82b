#!/usr/bin/env bash
# The lint and size checks (scripts/lint.sh), then the test suite (default: everything not marked
# slow), on both cores.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
py="$("$root/scripts/venv.sh" test)"
cd "$root"
bash scripts/lint.sh "$py"
# loadgroup: the tests of one xdist_group (a Ray cluster) share a worker, so one cluster starts
exec "$py" -m pytest -n 2 --dist loadgroup -q "$@"
