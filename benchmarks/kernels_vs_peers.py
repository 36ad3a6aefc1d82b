"""The shipped tuned kernels beside their strongest fair peers, with the timing protocol of
``tecomp.bench`` (every system at 1 and 2 threads and its best layout, interleaved shuffled rounds,
median of each round's fastest batch, spread printed), from one run.

    benchmarks/run.sh kernels_vs_peers.py [--only matmul conv sparse] [--rounds 7]

Kernels: matmul 1024^3 and 4096x4096x1024 (``tuning_logs/znver4/matmul_*.jsonl``); the conv
layer 1x64x56x56, 64 3x3 filters, pad 1, in NCHW and NHWC (``conv2d_{nchw,nhwc}_learned.jsonl``);
the sparse tasks of ``tuning_logs/sparse/`` on the matrix they were tuned on and on another
random matrix of the same shape and nnz (other row lengths). Peers: numpy (OpenBLAS) and torch
for matmul; torch eager in both memory formats with the weight in the same format,
``torch.jit.freeze``d modules in both formats, and ONNX Runtime for conv; scipy.sparse and
torch.sparse for the sparse tasks.
"""
import argparse
import os
import sys

import numpy as np
from sparse_tuned import log_name, other_matrices  # noqa: I001 - this directory's script
from sparse_tuned import tasks as sparse_tasks

import tecomp as tc
from tecomp.bench.peak import measure_peak
from tecomp.bench.peers import skipped
from tecomp.bench.report import compare_workload, geomean, print_header, print_host_check
from tecomp.testing import workloads as W

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tuning_logs")
#: (M, N, K) and log of each matmul: tuned on this Zen 4 with the learned model
MATMULS = [((1024, 1024, 1024), "znver4/matmul_1024.jsonl"),
           ((4096, 4096, 1024), "znver4/matmul_4096x4096x1024.jsonl")]
CONV = dict(N=1, C=64, H=56, W=56, O=64, KH=3, KW=3, stride=1, padding=1)


def kernels(only):
    """``(label, workload name, Workload, log, inputs)`` of each comparison."""
    rng = np.random.default_rng(0)
    if "matmul" in only:
        for (m, n, k), log in MATMULS:
            wl = W.matmul(m, n, k)
            label = f"matmul {m}^3" if m == n == k else f"matmul {m}x{n}x{k}"
            yield label, "matmul", wl, log, wl.make_inputs(rng)
    if "conv" in only:
        for layout in ("NCHW", "NHWC"):
            wl = W.conv2d(**CONV, layout=layout)
            yield (f"conv2d {layout} 64x56x56 3x3", f"conv2d_{layout.lower()}", wl,
                   f"conv2d_{layout.lower()}_learned.jsonl", wl.make_inputs(rng))
    if "sparse" in only:
        for label, wl in sparse_tasks(False, ""):
            log = os.path.join("sparse", log_name(label))
            yield label + " (tuned matrix)", wl.name, wl, log, wl.make_inputs(rng)
            _, other = other_matrices(wl, rng)[0]  # same shape and nnz, another pattern
            yield label + " (other matrix)", other.name, other, log, other.make_inputs(rng)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", nargs="+", default=["matmul", "conv", "sparse"],
                    choices=["matmul", "conv", "sparse"])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--logdir", default=None,
                    help="take a kernel's log from here where it has one (e.g. logs tuned on "
                         "this CPU by tune_search.py --logdir DIR), else from tuning_logs/")
    args = ap.parse_args()
    peak = measure_peak()
    print_header(print, peak)
    rows = []
    for label, name, wl, log, x in kernels(args.only):
        mine = os.path.join(args.logdir, log) if args.logdir else None
        log = mine if mine and os.path.exists(mine) else os.path.join(ROOT, log)
        print(f"\n== {label}  (record: {os.path.relpath(log)})", flush=True)
        k = tc.build(wl.dag, "llvm", log=log)
        res = compare_workload(wl, {"tuned": k}, x, name=name, peak=peak, rounds=args.rounds)
        rows.append((label, res))
        sys.stdout.flush()
    print_host_check(print)  # the host may have changed during the run
    for line in skipped():
        print(f"skipped: {line}")
    print(f"\n{'kernel':<38} {'tecomp ms':>10} {'best peer':<34} {'peer ms':>9} {'ratio':>6} "
          f"{'GFLOP/s':>8} {'peak':>5}")
    for label, res in rows:
        t, p = res.comparison.tecomp, res.comparison.peer
        g = res.flops / t.median / 1e9
        print(f"{label:<38} {t.median * 1e3:10.4f} {p.config.label:<34} {p.median * 1e3:9.4f} "
              f"{res.ratio:6.2f} {g:8.1f} {g / peak:5.0%}")
    print(f"\ngeomean ratio {geomean([r.ratio for _, r in rows]):.3f} over {len(rows)} kernels "
          f"(best peer time / tecomp time; above 1: tecomp is faster)")


if __name__ == "__main__":
    main()
