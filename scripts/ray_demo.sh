#!/usr/bin/env bash
# Tuning on a local Ray cluster from the command line: start a head node and a second node on this
# machine (one CPU each, as `ray start` on two machines would), run `tecomp tune ... --ray ADDRESS`
# for a few trials with its progress output, show the log's best record (its target names the CPU
# and its codegen features), build a kernel from the log and check it against numpy, then stop the
# cluster. docs/ray_demo.txt is this script's output.
#
# Usage: scripts/ray_demo.sh [TRIALS]   (default 16; PYTHON=... picks the interpreter)
#
# Stopping: on real machines `ray stop` ends a node. It ends *every* Ray process on the machine,
# though, other clusters' included, so this demo stops exactly the two nodes it started: each runs
# `ray start --block` in the background, which takes its node's processes down when it gets SIGTERM.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
py="${PYTHON:-$root/.venv/bin/python}"
trials="${1:-16}"
bin="$(dirname "$py")"
if ! "$py" -c "import ray" 2>/dev/null || [ ! -x "$bin/ray" ]; then
  echo "ray_demo: Ray is not installed for $py; run: scripts/venv.sh ray" >&2
  exit 2
fi
work="$(mktemp -d /tmp/tecomp-ray-demo.XXXXXX)"
port="$("$py" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
address="127.0.0.1:$port"
pids=()

stop_cluster() {
  local p
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  pids=()
}
ours() {  # processes of this demo's cluster: their command lines name its session directory
  local p
  for p in /proc/[0-9]*; do
    tr '\0' ' ' < "$p/cmdline" 2>/dev/null | grep -q "$work" && echo "${p#/proc/}"
  done
  return 0
}
cleanup() {
  stop_cluster
  for _ in $(seq 30); do [ -z "$(ours)" ] && break; sleep 1; done
  rm -rf "$work"
}
trap cleanup EXIT

echo "\$ ray start --head --port=$port --num-cpus=1 --block &"
"$bin/ray" start --head --node-ip-address=127.0.0.1 --port="$port" --num-cpus=1 \
  --include-dashboard=false --temp-dir="$work/ray" --block > "$work/head.log" 2>&1 &
pids+=($!)
echo "\$ ray start --address=$address --num-cpus=1 --block &"
for _ in $(seq 60); do  # the second node joins once the head answers
  "$py" -c "import socket; socket.create_connection(('127.0.0.1', $port), 2).close()" \
    2>/dev/null && break
  sleep 1
done
"$bin/ray" start --address="$address" --node-ip-address=127.0.0.1 --num-cpus=1 \
  --block > "$work/node.log" 2>&1 &
pids+=($!)
"$py" - "$address" <<'EOF'
import sys, time, logging
import ray
ray.init(address=sys.argv[1], logging_level=logging.WARNING, log_to_driver=False)
deadline = time.time() + 120
while sum(n["Alive"] for n in ray.nodes()) < 2 and time.time() < deadline:
    time.sleep(1)
alive = [n for n in ray.nodes() if n["Alive"]]
print(f"cluster up: {len(alive)} nodes, {sum(n['Resources'].get('CPU', 0) for n in alive):g} CPUs")
if len(alive) < 2:
    sys.exit("ray_demo: the second node did not join")
EOF

log="$work/matmul128.jsonl"
echo
echo "\$ tecomp tune matmul --shape 128 128 128 --trials $trials --measures-per-round 8 \\"
echo "    --population 64 --generations 1 --progress lines --no-bench --log LOG --ray $address"
"$py" -m tecomp.cli tune matmul --shape 128 128 128 --trials "$trials" --measures-per-round 8 \
  --population 64 --generations 1 --progress lines --no-bench --log "$log" --ray "$address"
echo
echo "\$ tecomp best LOG"
"$py" -m tecomp.cli best "$log"
echo
echo "# build from the log (this CPU's target string) and check against numpy"
"$py" - "$log" <<'EOF'
import sys
import numpy as np
import tecomp as tc
from tecomp.schedule.records import load_records
n = 128
A, B = tc.placeholder((n, n), name="A"), tc.placeholder((n, n), name="B")
k = tc.reduce_axis(n, name="k")
C = tc.compute((n, n), lambda i, j: tc.sum(A[i, k] * B[k, j], axis=k), name="C")
dag = tc.ComputeDAG([A, B, C])
recs = load_records(sys.argv[1])
print(f"target {tc.Target.parse('llvm')}; the log's records: {sorted({r.target for r in recs})}")
kernel = tc.build(dag, log=sys.argv[1])
rng = np.random.default_rng(0)
a, b = (rng.uniform(-1, 1, (n, n)).astype(np.float32) for _ in range(2))
np.testing.assert_allclose(kernel(a, b), a @ b, rtol=1e-4, atol=1e-4)
print(f"built from {len(recs)} records; matches numpy on random data")
EOF

echo
echo "# stop the cluster (the two 'ray start --block' processes)"
stop_cluster
for _ in $(seq 30); do [ -z "$(ours)" ] && break; sleep 1; done
left="$(ours | wc -l)"
echo "processes of this cluster left: $left"
[ "$left" = 0 ]
