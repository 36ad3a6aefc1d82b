"""The ``tecomp`` command line.

``tecomp run WORKLOAD --shape ...`` builds the workload for this CPU (default or hand schedule),
checks it against its numpy or scipy reference on random data and prints its speed beside numpy's.
``tecomp tune WORKLOAD --shape ... --trials N --log PATH`` tunes it (resuming from the log), then
builds the best record and does the same.
"""
from __future__ import annotations

import argparse
import inspect
import sys

import numpy as np


def _parse_value(v: str):
    for conv in (int, float):
        try:
            return conv(v)
        except ValueError:
            pass
    return {"true": True, "false": False}.get(v.lower(), v)


def _workload(name: str, shape, params):
    from .testing.workloads import WORKLOADS, get_workload
    if name not in WORKLOADS:
        raise SystemExit(f"tecomp: unknown workload {name!r}; known: {', '.join(WORKLOADS)}")
    kw = dict(params)
    if shape:
        names = [p for p in inspect.signature(WORKLOADS[name]).parameters
                 if p not in ("dtype", "layout", "method")]
        if len(shape) > len(names):
            raise SystemExit(f"tecomp: {name} takes at most {len(names)} shape values "
                             f"({' '.join(names)})")
        kw.update(zip(names, shape))
    try:
        return get_workload(name, **kw)
    except TypeError as e:
        raise SystemExit(f"tecomp: {name}: {e}") from None


def cmd_run(args) -> int:
    from . import build
    from .timing import time_callable
    params = dict(p.split("=", 1) for p in args.param)
    params = {k: _parse_value(v) for k, v in params.items()}
    if args.dtype:
        params["dtype"] = args.dtype
    wl = _workload(args.workload, args.shape, params)
    dag = wl.dag
    rng = np.random.default_rng(0)
    inputs = wl.make_inputs(rng)
    schedule = _schedule(args.schedule, args.workload, wl)
    kernel = build(dag, target=args.target, schedule=schedule)
    out = kernel(*inputs)
    outs = out if isinstance(out, tuple) else (out,)
    refs = wl.reference(inputs)
    err = max(float(np.max(np.abs(o.astype(np.float64) - r) / (np.abs(r) + 1e-3))) if o.size else 0.0
              for o, r in zip(outs, refs))
    ok = all(np.allclose(o, r, rtol=1e-3, atol=1e-3) for o, r in zip(outs, refs))
    flops = dag.flop_count(inputs={t.name: a for t, a in zip(dag.inputs, inputs)})
    t = time_callable(lambda: kernel(*inputs), repeat=args.repeat)
    print(f"workload     {wl!r}")
    print(f"target       {kernel.target}")
    print(f"check        {'ok' if ok else 'MISMATCH'} against the numpy/scipy reference "
          f"(max relative error {err:.2e})")
    print(f"tecomp       {t * 1e3:10.3f} ms  {flops / t / 1e9:8.2f} GFLOP/s  ({args.schedule} schedule)")
    peer = _peer(args.workload, wl, inputs)
    if peer is not None:
        label, fn = peer
        tp = time_callable(fn, repeat=args.repeat)
        print(f"{label:<12} {tp * 1e3:10.3f} ms  {flops / tp / 1e9:8.2f} GFLOP/s")
        print(f"ratio        {tp / t:.3f}x {label} (higher is better for tecomp)")
    return 0 if ok else 1


def cmd_tune(args) -> int:
    """Tune a workload on this CPU, then build the best record and compare it with its peer."""
    from . import build
    from .search.task import SearchTask, TuningOptions
    from .search.tune import tune
    from .timing import time_callable
    params = {k: _parse_value(v) for k, v in (p.split("=", 1) for p in args.param)}
    if args.dtype:
        params["dtype"] = args.dtype
    wl = _workload(args.workload, args.shape, params)
    task = SearchTask(wl.dag, args.target, inputs=wl.index_data or None)
    log = args.log or f"tuning_logs/{args.workload}_{task.workload_key[:12]}.jsonl"
    print(f"tuning {wl!r} on {task.target}: {args.trials} trials, log {log}")
    res = tune(task, trials=args.trials, log=log, options=TuningOptions(seed=args.seed))
    total = res.wall_seconds or 1.0
    print(f"best {res.best_gflops:.2f} GFLOP/s after {res.trials} trials in {res.wall_seconds:.0f} s "
          f"(search {res.search_seconds / total:.0%}, measurement {res.measure_seconds / total:.0%}; "
          f"errors {res.errors or 'none'})")
    kernel = build(wl.dag, target=args.target, log=log)
    inputs = wl.make_inputs(np.random.default_rng(0))
    out = kernel(*inputs)
    outs = out if isinstance(out, tuple) else (out,)
    ok = all(np.allclose(o, r, rtol=1e-3, atol=1e-3) for o, r in zip(outs, wl.reference(inputs)))
    flops = wl.dag.flop_count(inputs={t.name: a for t, a in zip(wl.dag.inputs, inputs)})
    t = time_callable(lambda: kernel(*inputs))
    print(f"check        {'ok' if ok else 'MISMATCH'} against the numpy/scipy reference")
    print(f"tecomp       {t * 1e3:10.3f} ms  {flops / t / 1e9:8.2f} GFLOP/s  (tuned)")
    label, fn = _peer(args.workload, wl, inputs)
    tp = time_callable(fn)
    print(f"{label:<12} {tp * 1e3:10.3f} ms  {flops / tp / 1e9:8.2f} GFLOP/s")
    print(f"ratio        {tp / t:.3f}x {label} (higher is better for tecomp)")
    return 0 if ok else 1


def _schedule(kind: str, name: str, wl):
    """None for the default schedule; the hand schedule of tecomp.testing for ``hand``."""
    if kind == "default":
        return None
    from .testing import hand_schedules as hs
    if name == "matmul":
        return hs.matmul_schedule(wl.dag)
    if name.startswith("conv2d"):
        p = wl.params
        return hs.conv2d_schedule(wl.dag, p["layout"], p["method"])
    raise SystemExit(f"tecomp: no hand schedule for {name}; use --schedule default")


def _peer(name, wl, inputs):
    p = wl.params
    if name == "matmul":
        a, b = inputs
        a = a.T if p.get("transpose_a") else a
        b = b.T if p.get("transpose_b") else b
        return "numpy", lambda: a @ b
    if name == "batch_matmul":
        a, b = inputs
        return "numpy", lambda: np.matmul(a, b)
    return "reference", lambda: wl.reference(inputs)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="tecomp", description="tecomp tensor compiler")
    sub = ap.add_subparsers(dest="cmd", required=True)
    run = sub.add_parser("run", help="build a workload for this CPU, check it, time it beside numpy")
    run.add_argument("workload", help="matmul, batch_matmul, conv2d_nchw, conv2d_nhwc, csr_spmm, "
                                      "bsr_spmm, sddmm, softmax, matmul_bias_relu")
    run.add_argument("--shape", type=int, nargs="*", default=[],
                     help="the workload's size parameters in order (e.g. matmul: M N K)")
    run.add_argument("--param", action="append", default=[], metavar="KEY=VALUE",
                     help="other builder parameters (e.g. stride=2, density=0.05)")
    run.add_argument("--dtype", default=None)
    run.add_argument("--target", default="llvm")
    run.add_argument("--repeat", type=int, default=5)
    run.add_argument("--schedule", choices=["default", "hand"], default="default",
                     help="the default schedule, or the hand-written one (matmul, conv2d)")
    run.set_defaults(fn=cmd_run)
    tn = sub.add_parser("tune", help="tune a workload for this CPU, then build and time the best")
    tn.add_argument("workload")
    tn.add_argument("--shape", type=int, nargs="*", default=[])
    tn.add_argument("--param", action="append", default=[], metavar="KEY=VALUE")
    tn.add_argument("--dtype", default=None)
    tn.add_argument("--target", default="llvm")
    tn.add_argument("--trials", type=int, default=64)
    tn.add_argument("--log", default=None, help="JSON-lines log (resumed if it exists)")
    tn.add_argument("--seed", type=int, default=0)
    tn.set_defaults(fn=cmd_tune)
    args = ap.parse_args(argv)
    return args.fn(args)


if __name__ == "__main__":
    sys.exit(main())
