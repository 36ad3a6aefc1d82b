#!/usr/bin/env bash
# The fast checks CI runs before the tests: ruff (lint and import order, configured in
# pyproject.toml) and no module under tecomp/ past 450 lines (split a long one by idea).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
py="${1:-$root/.venv/bin/python}"
cd "$root"
"$py" -m ruff check --quiet tecomp tests scripts benchmarks
long="$(find tecomp -name '*.py' -exec wc -l {} + | awk '$2 != "total" && $1 > 450 {print "  " $2 ": " $1 " lines"}')"
if [ -n "$long" ]; then
  echo "modules over 450 lines (split them by idea):" >&2
  echo "$long" >&2
  exit 1
fi
