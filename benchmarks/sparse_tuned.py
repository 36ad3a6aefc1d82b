"""Tune sparse kernels with their real index data and time them beside scipy.sparse, torch.sparse
and the best numpy/scipy formulation, fp32, from one run.

    benchmarks/run.sh sparse_tuned.py [--trials 64] [--threads 2] [--logdir DIR] [--quick]

Tasks: CSR SpMM 1024x1024 at densities 0.1, 0.05, 0.01 times a 1024x512 dense matrix; BSR SpMM of
the same size at 5% nonzero blocks for block sizes 1x1, 4x4, 16x16; SDDMM 1024x1024 at 5% with
K = 128. Each task is tuned (``tc.tune``, ``--trials`` measurements, the default cost model) on
its index data, the best record is built and checked against scipy, then every kernel is timed
(median, the calls of each peer interleaved with tecomp's). Ratios are peer time / tecomp time
(> 1: tecomp is faster). tecomp and torch use ``--threads`` threads, scipy.sparse is
single-threaded (it has no threaded SpMM), numpy's BLAS is limited to ``--threads``.
"""
import argparse
import os
import tempfile
import time

import numpy as np
import scipy.sparse as sp

import tecomp as tc
from tecomp.codegen import parallel as P
from tecomp.testing import workloads as W
from tecomp.timing import time_callable


def tasks(quick: bool):
    n = 256 if quick else 1024
    out = [(f"csr_spmm d={d}", W.csr_spmm(n, n, n // 2, density=d, seed=1))
           for d in (0.1, 0.05, 0.01)]
    for bs in (1, 4, 16):
        out.append((f"bsr_spmm {bs}x{bs} d=0.05",
                    W.bsr_spmm(n // bs, n // bs, n // 2, bs, bs, density=0.05, seed=2)))
    out.append(("sddmm d=0.05 K=128", W.sddmm(n, n, 128, density=0.05, seed=3)))
    return out


def peers(wl, x):
    """``{name: callable}``: scipy.sparse, torch.sparse and the best numpy/scipy formulation."""
    import torch
    out = {}
    if wl.name == "csr_spmm":
        data, indices, indptr, dense = x
        m = sp.csr_matrix((data, indices, indptr), shape=(len(indptr) - 1, dense.shape[0]))
        out["scipy"] = lambda: m @ dense
        tm = torch.sparse_csr_tensor(torch.from_numpy(indptr.astype(np.int64)),
                                     torch.from_numpy(indices.astype(np.int64)),
                                     torch.from_numpy(data), size=m.shape)
        td = torch.from_numpy(dense)
        out["torch"] = lambda: torch.sparse.mm(tm, td)
    elif wl.name == "bsr_spmm":
        data, indices, indptr, dense = x
        _, br, bc = data.shape
        shape = ((len(indptr) - 1) * br, dense.shape[0])
        m = sp.bsr_matrix((data, indices, indptr), shape=shape, blocksize=(br, bc))
        out["scipy"] = lambda: m @ dense
        mc = m.tocsr()
        out["scipy csr"] = lambda: mc @ dense
        td = torch.from_numpy(dense)
        tm = torch.sparse_bsr_tensor(torch.from_numpy(indptr.astype(np.int64)),
                                     torch.from_numpy(indices.astype(np.int64)),
                                     torch.from_numpy(data), size=shape)
        try:
            tm @ td
            out["torch bsr"] = lambda: tm @ td
        except (RuntimeError, NotImplementedError):  # no BSR matmul on this build's CPU
            pass
        tcsr = torch.sparse_csr_tensor(torch.from_numpy(mc.indptr.astype(np.int64)),
                                       torch.from_numpy(mc.indices.astype(np.int64)),
                                       torch.from_numpy(mc.data), size=shape)
        out["torch csr"] = lambda: torch.sparse.mm(tcsr, td)
    else:
        a, b, indices, indptr = x
        rows = np.repeat(np.arange(len(indptr) - 1), np.diff(indptr))
        out["numpy gather-einsum"] = lambda: np.einsum("pk,pk->p", a[rows], b[indices])
        out["numpy dense+sample"] = lambda: (a @ b.T)[rows, indices]
        pat = sp.csr_matrix((np.ones(len(indices), np.float32), indices, indptr),
                            shape=(a.shape[0], b.shape[0]))
        out["scipy multiply"] = lambda: pat.multiply(a @ b.T)
        tp = torch.sparse_csr_tensor(torch.from_numpy(indptr.astype(np.int64)),
                                     torch.from_numpy(indices.astype(np.int64)),
                                     torch.from_numpy(np.zeros(len(indices), np.float32)),
                                     size=pat.shape)
        ta, tb = torch.from_numpy(a), torch.from_numpy(b)
        out["torch"] = lambda: torch.sparse.sampled_addmm(tp, ta, tb.T, beta=0.0)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=64, help="measurements per task")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--logdir", default=None,
                    help="keep the tuning logs here (default: a temp dir)")
    ap.add_argument("--quick", action="store_true", help="256-row matrices (a smoke run)")
    args = ap.parse_args()
    import torch
    from threadpoolctl import threadpool_limits
    torch.set_num_threads(args.threads)
    P.set_num_threads(args.threads)
    logdir = args.logdir or tempfile.mkdtemp(prefix="sparse_tuned_")
    os.makedirs(logdir, exist_ok=True)
    print(f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}, {args.threads} threads, "
          f"{args.trials} trials per task, logs in {logdir}")
    rows = []
    t_all = time.perf_counter()
    for name, wl in tasks(args.quick):
        task = tc.SearchTask(wl.dag, "llvm", inputs=wl.index_data)
        log = os.path.join(logdir, name.replace(" ", "_").replace("=", "") + ".jsonl")
        t0 = time.perf_counter()
        res = tc.tune(task, trials=args.trials, log=log,
                      options=tc.TuningOptions(verbose=False))
        wall = time.perf_counter() - t0
        k = tc.build(wl.dag, "llvm", log=log)
        x = wl.make_inputs(np.random.default_rng(0))
        ref = wl.reference(x)[0]
        out = k(*x)
        np.testing.assert_allclose(out, ref, rtol=1e-3, atol=1e-3)
        times = {}
        with threadpool_limits(args.threads):
            cands = {"tecomp": lambda: k(*x, out=out), **peers(wl, x)}
            for _ in range(2):  # interleaved rounds; best median of each
                for pname, fn in cands.items():
                    t = time_callable(fn, repeat=5, min_repeat_s=0.1)
                    times[pname] = min(times.get(pname, float("inf")), t)
        rows.append((name, res.trials, wall, times))
        print(f"  {name}: {res.trials} trials in {wall:.0f} s, "
              f"tecomp {times['tecomp'] * 1e3:.3f} ms, data {task.data_hash}", flush=True)
    print(f"\nall tasks: {time.perf_counter() - t_all:.0f} s wall, load average now "
          f"{os.getloadavg()[0]:.2f}")
    print(f"\n{'task':<24} {'trials':>6} {'tune s':>7} {'tecomp ms':>10}  peers: ms (peer/tecomp)")
    for name, trials, wall, times in rows:
        t = times["tecomp"]
        peer = "  ".join(f"{p} {v * 1e3:.3f} ({v / t:.2f}x)" for p, v in times.items()
                         if p != "tecomp")
        print(f"{name:<24} {trials:>6} {wall:>7.0f} {t * 1e3:>10.3f}  {peer}")


if __name__ == "__main__":
    main()
