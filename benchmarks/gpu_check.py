"""Device check: build, check and time tecomp's CUDA kernels beside torch on one NVIDIA GPU.

    python benchmarks/gpu_check.py [--quick] [--budget-s 420] [--out gpu_check.json]

Needs only this repository, torch and cuda-python (no installs; ptxas is optional). Every standard
workload is built for ``cuda -arch=<this GPU>`` with the default GPU schedule, checked against
numpy on random data and timed with CUDA events beside torch (cuBLAS with TF32 off, cuDNN with
TF32 off, torch.sparse); the hand GPU matmul schedule too; then a short tuning of matmul 2048^3.
Every stage is guarded: a failure becomes its row's error and the script goes on. Prints one
table (ratio = torch ms / tecomp ms: above 1, tecomp is faster) and writes it as JSON to --out.
Exit status: 0 when it ran (rows may hold errors), 2 without a GPU.
"""
import argparse
import json
import math
import os
import sys
import tempfile
import time
import traceback

import numpy as np

try:
    import tecomp as tc
except ImportError:  # run from a checkout: use it
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    import tecomp as tc

from tecomp.codegen import cuda_runtime as cr
from tecomp.testing import workloads as W

ROWS = []


def _num(v, places: int) -> str:
    return "-" if v is None else f"{v:.{places}f}"


def add(workload, tecomp_ms=None, torch_ms=None, check="", note=""):
    ratio = torch_ms / tecomp_ms if tecomp_ms and torch_ms else None
    ROWS.append(dict(workload=workload, tecomp_ms=tecomp_ms, torch_ms=torch_ms, ratio=ratio,
                     check=check, note=note))
    f = _num
    print(f"  {workload:<42} {f(tecomp_ms, 4):>10} {f(torch_ms, 4):>10} {f(ratio, 3):>7}  {check}"
          + (f"  [{note}]" if note else ""), flush=True)


def guarded(name, fn, deadline):
    """Run one stage; its failure (or the budget running out) becomes its row."""
    if time.monotonic() > deadline:
        add(name, check="skipped: time budget spent")
        return
    try:
        fn()
    except Exception as e:  # noqa: BLE001 - the check goes on with the next stage
        first = (str(e).strip().splitlines() or [""])[0][:160]
        add(name, check=f"ERROR {type(e).__name__}: {first}")
        sys.stderr.write(f"--- {name}:\n{traceback.format_exc()[-3000:]}\n")


def check(out, ref, rtol=1e-3) -> str:
    """'ok (max err ...)' or what differs; the error is relative to the reference's RMS."""
    out, ref = np.asarray(out, np.float64), np.asarray(ref, np.float64)
    if out.shape != ref.shape:
        return f"WRONG shape {out.shape} vs {ref.shape}"
    scale = max(1.0, float(np.sqrt(np.mean(ref * ref)))) if ref.size else 1.0
    err = float(np.max(np.abs(out - ref))) / scale if ref.size else 0.0
    if not np.isfinite(out).all():
        return "WRONG: non-finite values"
    return f"ok (err {err:.1e})" if err <= rtol else f"WRONG (err {err:.1e} > {rtol:g})"


def time_events(call, target_s=0.05, repeat=5) -> float:
    """Median ms per call, by CUDA events (tecomp's runtime) around back-to-back calls."""
    one = cr.time_function(call, number=1, repeat=1, warmup=1)[0]
    number = int(min(200, max(1, math.ceil(target_s / max(one, 1e-6)))))
    return float(np.median(cr.time_function(call, number=number, repeat=repeat, warmup=0))) * 1e3


def time_torch(torch, fn, target_s=0.05, repeat=5) -> float:
    """Median ms per call of a torch function, by torch's CUDA events."""
    fn()
    torch.cuda.synchronize()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    fn()
    e.record()
    e.synchronize()
    number = int(min(200, max(1, math.ceil(target_s * 1e3 / max(s.elapsed_time(e), 1e-3)))))
    times = []
    for _ in range(repeat):
        s.record()
        for _ in range(number):
            fn()
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e) / number)
    return float(np.median(times))


def tecomp_case(name, wl, target, schedule=None, peer=None, rtol=1e-3, note=""):
    """Build, check against numpy, time; ``peer(inputs) -> (ms, check)`` times torch."""
    rng = np.random.default_rng(0)
    x = wl.make_inputs(rng)
    t0 = time.perf_counter()
    k = tc.build(wl.dag, target, schedule=schedule)
    build_s = time.perf_counter() - t0
    out = k(*x)
    got = check(out if not isinstance(out, tuple) else out[0], wl.reference(x)[0], rtol)
    dev = [cr.DeviceArray.from_numpy(a) for a in x]
    dev += [cr.DeviceArray.empty(t.shape, t.dtype.np) for t in wl.dag.outputs]
    compiled = k.compiled
    ms = time_events(lambda: compiled.run_device(dev))
    torch_ms, peer_note = None, ""
    if peer is not None:
        try:
            torch_ms, peer_check = peer(x)
            peer_note = "" if peer_check.startswith("ok") else f"torch {peer_check}"
        except Exception as e:  # noqa: BLE001 - torch lacking an op is not tecomp's failure
            peer_note = f"torch: {type(e).__name__}: {str(e).splitlines()[0][:80]}"
    add(name, ms, torch_ms, got, "; ".join(p for p in (note, f"build {build_s:.1f}s", peer_note) if p))


# ----------------------------------------------------------------------------- torch peers
def torch_peers(torch):
    F = torch.nn.functional

    def t(a):
        return torch.from_numpy(np.ascontiguousarray(a)).cuda()

    def matmul(wl):
        def run(x):
            a, b = t(x[0]), t(x[1])
            return time_torch(torch, lambda: a @ b), check((a @ b).cpu().numpy(), wl.reference(x)[0])
        return run

    def conv(wl, layout):
        def run(x):
            d, w = t(x[0]), t(x[1])
            if layout == "NHWC":  # torch's channels_last is NHWC in memory
                d = d.permute(0, 3, 1, 2)
                w = w.permute(3, 2, 0, 1).contiguous(memory_format=torch.channels_last)
            def fn():
                return F.conv2d(d, w, padding=1)
            y = fn()
            y = y.permute(0, 2, 3, 1) if layout == "NHWC" else y
            return time_torch(torch, fn), check(y.cpu().numpy(), wl.reference(x)[0])
        return run

    def sparse(make):  # torch.sparse_csr_tensor or torch.sparse_bsr_tensor
        def peer(wl, M, K):
            def run(x):
                data, indices, indptr, dense = x
                A = make(t(indptr), t(indices), t(data), size=(M, K))
                B = t(dense)
                return (time_torch(torch, lambda: A @ B),
                        check((A @ B).cpu().numpy(), wl.reference(x)[0]))
            return run
        return peer
    csr, bsr = sparse(torch.sparse_csr_tensor), sparse(torch.sparse_bsr_tensor)

    def sddmm(wl, M, N):
        def run(x):
            a, b, indices, indptr = x
            mask = torch.sparse_csr_tensor(t(indptr), t(indices),
                                           torch.zeros(len(indices), device="cuda"), size=(M, N))
            A, BT = t(a), t(b).t().contiguous()
            def fn():
                return torch.sparse.sampled_addmm(mask, A, BT, beta=0.0, alpha=1.0)
            return time_torch(torch, fn), check(fn().values().cpu().numpy(), wl.reference(x)[0])
        return run
    return matmul, conv, csr, bsr, sddmm


def run_tuning(target, n, trials, deadline):
    wl = W.matmul(n, n, n)
    task = tc.SearchTask(wl.dag, target=target)
    opts = tc.TuningOptions(n_workers=max(1, min(8, (os.cpu_count() or 2) - 1)),
                            measures_per_round=min(16, trials), population=128, generations=2,
                            run_timeout=20.0, build_timeout=60.0, verbose=True)
    with tempfile.TemporaryDirectory() as tmp:
        log = os.path.join(tmp, "matmul.jsonl")
        t0 = time.monotonic()
        res = tc.tune(task, trials=trials, log=log, options=opts)
        wall = time.monotonic() - t0
        if res.best_schedule is None:
            add(f"matmul {n}^3 tuned ({res.trials} trials)", check=f"no valid candidate; errors "
                f"{dict((str(k), v) for k, v in res.errors.items())}", note=f"{wall:.0f}s")
            return
        tecomp_case(f"matmul {n}^3 tuned ({res.trials} trials)", wl, target,
                    schedule=res.best_schedule, note=f"tuned in {wall:.0f}s")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="smaller sizes, 16 tuning trials")
    ap.add_argument("--budget-s", type=float, default=420.0, help="stop starting stages after this")
    ap.add_argument("--out", default=None, help="write the table as JSON here")
    ap.add_argument("--trials", type=int, default=None, help="tuning trials (default 32; quick 16)")
    args = ap.parse_args(argv)
    deadline = time.monotonic() + args.budget_s
    if not cr.available():
        why = "unknown"
        try:
            cr.require()
        except Exception as e:  # noqa: BLE001
            why = str(e)
        print(f"no GPU: nothing to time ({why})")
        return 2
    dev = cr.device()
    target = f"cuda -arch={dev.arch}"
    try:
        import torch
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        torch.backends.cudnn.benchmark = True
        tver = (f"torch {torch.__version__} (cuda {torch.version.cuda}, "
                f"cudnn {torch.backends.cudnn.version()})")
        peers = torch_peers(torch) if torch.cuda.is_available() else None
    except ImportError:
        torch, peers, tver = None, None, "torch missing: no peers"
    try:
        from tecomp.codegen.ptxas import find_ptxas
        ptxas = find_ptxas()
    except ImportError:
        ptxas = None
    print(f"# {dev.name} ({dev.arch}, {dev.multiprocessors} SMs); target '{target}'; {tver}")
    print(f"# ptxas: {ptxas or 'not found: PTX is not validated offline (the driver JIT checks it)'}")
    print(f"  {'workload':<42} {'tecomp ms':>10} {'torch ms':>10} {'ratio':>7}  check")
    matmul_p, conv_p, csr_p, bsr_p, sddmm_p = peers or (lambda *a: None,) * 5

    def sanity():
        from tecomp.testing.ptx_kernels import PTX
        n = 1 << 20
        x = np.random.default_rng(0).standard_normal(n).astype(np.float32)
        y = np.random.default_rng(1).standard_normal(n).astype(np.float32)
        dx, dy = cr.DeviceArray.from_numpy(x), cr.DeviceArray.from_numpy(y)
        f = cr.Module(PTX).function("axpy")
        f.launch((n // 256,), (256,), [dx, dy, 2.0, n])
        got = check(dy.to_numpy(), 2.0 * x + y, 1e-6)
        add("runtime: hand PTX axpy 2^20", time_events(lambda: f.launch((n // 256,), (256,),
                                                                        [dx, dy, 0.0, n])), None, got)
    guarded("runtime: hand PTX axpy 2^20", sanity, deadline)

    sizes = [512, 1024] if args.quick else [1024, 2048]
    for n in sizes:
        wl = W.matmul(n, n, n)
        guarded(f"matmul {n}^3 default", lambda: tecomp_case(
            f"matmul {n}^3 default", wl, target, peer=matmul_p(wl)), deadline)

        def hand(wl=wl, n=n):
            from tecomp.testing.hand_schedules import gpu_matmul_schedule
            tecomp_case(f"matmul {n}^3 hand", wl, target, schedule=gpu_matmul_schedule(wl.dag),
                        peer=matmul_p(wl))
        guarded(f"matmul {n}^3 hand", hand, deadline)
    hw = 28 if args.quick else 56
    for layout in ("NCHW", "NHWC"):
        for method in ("direct", "implicit_gemm"):
            name = f"conv2d 1x64x{hw}x{hw} 3x3 {layout} {method}"
            wl = W.conv2d(1, 64, hw, hw, 64, 3, 3, 1, 1, 1, 1, layout, method)
            guarded(name, lambda name=name, wl=wl, layout=layout: tecomp_case(
                name, wl, target, peer=conv_p(wl, layout)), deadline)
    m = 512 if args.quick else 1024
    wl = W.csr_spmm(m, m, 512, density=0.05)
    guarded(f"csr_spmm {m}x{m} d0.05 x512", lambda: tecomp_case(
        f"csr_spmm {m}x{m} d0.05 x512", wl, target, peer=csr_p(wl, m, m)), deadline)
    wlb = W.bsr_spmm(m // 16, m // 16, 512, 16, 16, density=0.05)
    guarded(f"bsr_spmm {m}x{m} 16x16 d0.05 x512", lambda: tecomp_case(
        f"bsr_spmm {m}x{m} 16x16 d0.05 x512", wlb, target, peer=bsr_p(wlb, m, m)), deadline)
    wls = W.sddmm(m, m, 128, density=0.05)
    guarded(f"sddmm {m}x{m} k128 d0.05", lambda: tecomp_case(
        f"sddmm {m}x{m} k128 d0.05", wls, target, peer=sddmm_p(wls, m, m)), deadline)

    trials = args.trials or (16 if args.quick else 32)
    n = 1024 if args.quick else 2048
    if deadline - time.monotonic() < 90:
        add(f"matmul {n}^3 tuned", check="skipped: under 90 s of the budget left")
    else:
        guarded(f"matmul {n}^3 tuned", lambda: run_tuning(target, n, trials, deadline), deadline)

    print(f"\n{'workload':<44} {'tecomp ms':>10} {'torch ms':>10} {'ratio':>7}  check")
    for r in ROWS:
        f = _num
        print(f"{r['workload']:<44} {f(r['tecomp_ms'], 4):>10} {f(r['torch_ms'], 4):>10} "
              f"{f(r['ratio'], 3):>7}  {r['check']}" + (f"  [{r['note']}]" if r["note"] else ""))
    if args.out:
        with open(args.out, "w") as fh:
            json.dump(dict(device=dev.name, arch=dev.arch, torch=tver, ptxas=ptxas,
                           quick=args.quick, rows=ROWS), fh, indent=1)
        print(f"# written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
