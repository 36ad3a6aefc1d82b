"""TVM MetaSchedule beside tecomp and torch on the DSL operator suite
(``tecomp.testing.operator_suite``): each operator is translated from its tecomp DAG to TVM TE
(the same computation, stage for stage), tuned by MetaSchedule and by tecomp for the same number
of trials, then the three are timed interleaved, in one process, with the protocol of
``tecomp.bench`` (each at 1 and all threads; every output checked against the numpy reference).

TVM is a benchmark-only dependency, never tecomp's. Install it into benchmarks/.venv once:

    benchmarks/.venv/bin/pip install "apache-tvm==0.27.0.post1" "apache-tvm-ffi==0.1.14.post1" \
        psutil cloudpickle tornado
    benchmarks/run.sh tvm_suite.py [--trials 64] [--only softmax conv1d ...] [--logdir DIR] \
        [--reuse-tvm] [--reuse-tecomp] [--target '{"kind": "llvm", "mcpu": "znver3", "num-cores": 2}']

Prints per operator the timing table, then a summary: trials and tuning wall time of both tuners,
best ms of tecomp, torch and TVM, and the ratios (peer time / tecomp time: above 1, tecomp is
faster).
"""
import argparse
import json
import os
import tempfile
import time

# TVM's thread pool takes at most hardware_concurrency / 2 threads on x86 (it assumes two
# hyper-threads per core) unless TVM_NUM_THREADS says otherwise, and config_threadpool cannot
# raise that cap: on this 2-core host without SMT every earlier table ran TVM, its tuning's
# measurements included, on one thread (its "2 thread" rows equalled the 1-thread ones). A user
# of TVM on such a host sets this; it must be set before TVM starts (its measuring processes
# inherit it).
os.environ.setdefault("TVM_NUM_THREADS", str(len(os.sched_getaffinity(0))))

import numpy as np
from operator_suite import case_inputs, torch_configs  # this folder's script: the same peer

import tecomp as tc
from tecomp.bench.peers import tecomp_configs
from tecomp.bench.protocol import Config
from tecomp.bench.report import geomean, run_comparison
from tecomp.bench.threads import thread_counts
from tecomp.ir import expr as E
from tecomp.ir.opkind import BinOpKind, ReduceKind, UnOpKind
from tecomp.testing.operator_suite import OPERATORS, operator_case

DEFAULT_TARGET = {"kind": "llvm", "mcpu": tc.Target.parse("llvm").cpu, "num-cores": os.cpu_count() or 1}


# ----------------------------------------------------------------------------- tecomp DAG -> TE

def _dtype(t) -> str:
    # tecomp indexes in int64; TE's loop variables are int32 (the suite's shapes fit)
    return "int32" if t.name == "int64" else t.name


def dag_to_te(dag):
    """The TE tensors (inputs first, outputs last) computing what ``dag`` computes: every compute
    stage becomes one ``te.compute`` with the same body, reductions ``te.sum/max/min``."""
    import tvm
    from tvm import te
    T = tvm.tirx
    made = {}

    def tr(e, env):
        if isinstance(e, E.IterVar) or isinstance(e, E.Var):
            return env[id(e)]
        if isinstance(e, E.Const):
            return T.const(e.value, _dtype(e.dtype))
        if isinstance(e, E.TensorRead):
            return made[id(e.tensor)][tuple(tr(i, env) for i in e.indices)]
        if isinstance(e, E.Cast):
            return T.Cast(_dtype(e.dtype), tr(e.a, env))
        if isinstance(e, E.Select):
            return T.if_then_else(tr(e.cond, env), tr(e.t, env), tr(e.f, env))
        if isinstance(e, E.UnOp):
            a = tr(e.a, env)
            fns = {UnOpKind.NEG: lambda x: -x, UnOpKind.NOT: T.Not, UnOpKind.EXP: T.exp,
                   UnOpKind.LOG: T.log, UnOpKind.SQRT: T.sqrt, UnOpKind.TANH: T.tanh,
                   UnOpKind.SIGMOID: T.sigmoid, UnOpKind.ABS: T.abs}
            return fns[e.op](a)
        if isinstance(e, E.BinOp):
            a, b = tr(e.a, env), tr(e.b, env)
            fns = {BinOpKind.ADD: lambda x, y: x + y, BinOpKind.SUB: lambda x, y: x - y,
                   BinOpKind.MUL: lambda x, y: x * y, BinOpKind.DIV: lambda x, y: x / y,
                   BinOpKind.FLOORDIV: T.floordiv, BinOpKind.MOD: T.floormod,
                   BinOpKind.MIN: T.Min, BinOpKind.MAX: T.Max,
                   BinOpKind.LT: lambda x, y: x < y, BinOpKind.LE: lambda x, y: x <= y,
                   BinOpKind.GT: lambda x, y: x > y, BinOpKind.GE: lambda x, y: x >= y,
                   BinOpKind.EQ: lambda x, y: x == y, BinOpKind.NE: lambda x, y: x != y,
                   BinOpKind.AND: T.And, BinOpKind.OR: T.Or}
            return fns[e.op](a, b)
        if isinstance(e, E.Reduce):
            axes = [te.reduce_axis((int(a.begin.value), int(a.end.value)), name=a.name)
                    for a in e.axes]
            inner = dict(env)
            inner.update({id(a): r for a, r in zip(e.axes, axes)})
            red = {ReduceKind.SUM: te.sum, ReduceKind.MAX: te.max, ReduceKind.MIN: te.min}[e.kind]
            return red(tr(e.source, inner), axis=axes)
        raise TypeError(f"no TE form for {type(e).__name__}")

    for st in dag.stages:
        t = st.tensor
        if st.is_placeholder:
            made[id(t)] = te.placeholder(t.shape, _dtype(t.dtype), name=t.name)
            continue
        made[id(t)] = te.compute(t.shape, _body(tr, st.op), name=t.name.replace(".", "_"))
    return [made[id(t)] for t in list(dag.inputs) + list(dag.outputs)]


def _body(tr, op):
    def body(*idx):  # (TE rejects keyword arguments in fcompute)
        return tr(op.body, {id(a): v for a, v in zip(op.axes, idx)})
    return body


# ----------------------------------------------------------------------------- TVM tuning

def tune_tvm(case, trials: int, target: dict, workdir: str, reuse: bool = False):
    """MetaSchedule on the operator for ``trials`` trials; returns (callable factory, wall s,
    trials measured) or raises RuntimeError when no candidate built and ran. With ``reuse`` and
    a database in ``workdir`` from an earlier run, compiles its best instead of tuning again
    (the wall time is the one that run wrote to ``wall.json``, else NaN)."""
    import tvm
    from tvm import te
    from tvm.s_tir import meta_schedule as ms
    tgt = tvm.target.Target(target)
    func = te.create_prim_func(dag_to_te(case.dag))
    cores = int(target.get("num-cores", 1))
    # builds import TVM in worker processes: a few at a time, with time to start on a busy host
    builder = ms.builder.LocalBuilder(max_workers=max(1, cores), timeout_sec=300)
    runner = ms.runner.LocalRunner(timeout_sec=120, evaluator_config=ms.runner.EvaluatorConfig(
        number=3, repeat=1, min_repeat_ms=40, enable_cpu_cache_flush=False))
    records = os.path.join(workdir, "database_tuning_record.json")
    wall_file = os.path.join(workdir, "wall.json")
    if reuse and os.path.exists(records):
        db = ms.database.JSONDatabase(work_dir=workdir)
        wall = float("nan")
        if os.path.exists(wall_file):
            with open(wall_file) as f:
                wall = json.load(f)["wall"]
    else:
        t0 = time.perf_counter()
        db = ms.tune_tir(func, tgt, workdir, max_trials_global=trials,
                         num_trials_per_iter=min(64, trials), builder=builder, runner=runner,
                         num_tuning_cores=max(1, cores))
        wall = time.perf_counter() - t0
        with open(wall_file, "w") as f:
            json.dump({"wall": wall, "trials": trials}, f)
    sch = ms.tir_integration.compile_tir(db, func, tgt)
    if sch is None:
        raise RuntimeError("MetaSchedule found no valid candidate (see the logs in "
                           f"{workdir}/logs)")
    measured = sum(1 for _ in open(records))
    return tvm.compile(sch.mod, target=tgt)["main"], wall, measured


def tvm_configs(fn, case, x) -> list:
    import tvm
    dev = tvm.cpu()
    ref = case.reference(x)[0]
    args = [tvm.runtime.tensor(a, dev) for a in x]
    out = tvm.runtime.tensor(np.empty(ref.shape, "float32"), dev)
    pool = tvm.get_global_func("runtime.config_threadpool", allow_missing=True)

    def run():
        fn(*args, out)

    def output():
        run()
        return out.numpy()

    def threads(n):
        return (lambda: pool(0, n)) if pool is not None else None
    counts = thread_counts() if pool is not None else (os.cpu_count() or 1,)
    return [Config("tvm", "metaschedule", n, run, threads(n), output) for n in counts]


#: the cores this process may run on, before TVM ran in it
ALL_CORES = os.sched_getaffinity(0)


def unpinned(cfgs: list) -> list:
    """``cfgs`` (tecomp's and torch's) made to run on all the cores whatever TVM did before them.

    TVM's thread-pool set-up (``runtime.config_threadpool``) pins the calling thread to one core
    and leaves it pinned, and every thread or process started from it afterwards inherits that
    core: torch at 2 threads ran 24 ms for 0.1, and tecomp's measuring workers tuned on one core.
    So each of these configurations gets the process's mask back before its batches (TVM's
    re-pins it before its own), and their thread pools start here, on every core, before TVM runs.
    """
    def enter(c):
        def go():
            os.sched_setaffinity(0, ALL_CORES)
            if c.enter is not None:
                c.enter()
        return go
    out = [Config(c.system, c.variant, c.threads, c.fn, enter(c), c.output) for c in cfgs]
    for c in sorted(out, key=lambda c: -c.threads):  # start the pools at the most threads
        c.enter()
        c.fn()
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=64)
    ap.add_argument("--only", nargs="+", default=list(OPERATORS), choices=list(OPERATORS))
    ap.add_argument("--logdir", default=None, help="keep logs and TVM work dirs here")
    ap.add_argument("--target", default=json.dumps(DEFAULT_TARGET), help="TVM target (JSON)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--reuse-tvm", action="store_true",
                    help="compile TVM's best from its database in --logdir instead of tuning it "
                         "again (re-timing after a change to tecomp; tecomp is tuned anew)")
    ap.add_argument("--reuse-tecomp", action="store_true",
                    help="time tecomp's log in --logdir as it is instead of tuning (re-timing "
                         "both on a quieter host; the tuning times printed are then 0)")
    args = ap.parse_args()
    target = json.loads(args.target)
    logdir = args.logdir or tempfile.mkdtemp(prefix="tvm_suite_")
    os.makedirs(logdir, exist_ok=True)
    print(f"TVM target {target}; logs in {logdir}", flush=True)
    rows, tuned = [], {}
    # tecomp tunes every operator before TVM runs in this process (see unpinned: its measuring
    # workers, started from a thread TVM had pinned, tuned on one core: conv1d's search ended on
    # 0.073 ms programs where it finds 0.041 alone). TVM measures in its own worker processes.
    for name in args.only:
        case = operator_case(name)
        log = os.path.join(logdir, f"{name}.jsonl")
        t0 = time.perf_counter()
        if args.reuse_tecomp and os.path.exists(log):
            tuned[name] = (sum(1 for _ in open(log)), 0.0)
            continue
        tc_trials = tc.tune(tc.SearchTask(case.dag, "llvm"), trials=args.trials, log=log,
                            options=tc.TuningOptions(verbose=False)).trials
        tuned[name] = (tc_trials, time.perf_counter() - t0)
        print(f"tecomp tuned {name}: {tc_trials} trials in {tuned[name][1]:.0f} s "
              f"(cores {sorted(os.sched_getaffinity(0))})", flush=True)
    for name in args.only:
        case = operator_case(name)
        x = case_inputs(case)
        log = os.path.join(logdir, f"{name}.jsonl")
        tc_trials, tc_wall = tuned[name]
        k = tc.build(case.dag, "llvm", log=log)
        cfgs = unpinned(tecomp_configs(k, x, variant="tuned") + torch_configs(case, x))
        tvm_wall, tvm_trials, err = float("nan"), 0, ""
        try:
            os.sched_setaffinity(0, ALL_CORES)  # TVM's measuring workers start from here
            fn, tvm_wall, tvm_trials = tune_tvm(case, args.trials, target,
                                                os.path.join(logdir, f"tvm_{name}"), args.reuse_tvm)
            cfgs += tvm_configs(fn, case, x)
        except Exception as e:  # report and go on: one operator TVM cannot do is a finding
            err = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
            print(f"TVM failed on {name}: {err}", flush=True)
        print(f"\n== {name}: tecomp {tc_trials} trials in {tc_wall:.0f} s, TVM {tvm_trials} "
              f"trials in {tvm_wall:.0f} s", flush=True)
        cmp = run_comparison(cfgs, case.reference(x)[0], case.flops(),
                             rounds=args.rounds).comparison
        rows.append((name, tc_trials, tc_wall, tvm_trials, tvm_wall, cmp, err))
    print(f"\n{'operator':<15} {'tc trials':>9} {'tc s':>6} {'tvm trials':>10} {'tvm s':>6} "
          f"{'tecomp ms':>10} {'torch ms':>9} {'tvm ms':>9} {'torch/tc':>8} {'tvm/tc':>7}")
    r_torch, r_tvm = [], []
    for name, tt, tw, vt, vw, cmp, err in rows:
        t, p, v = cmp.tecomp, cmp.best("torch"), cmp.best("tvm")

        def ms_(x):
            return f"{x.median * 1e3:9.4f}" if x else f"{'-':>9}"

        def ratio(x, acc):
            if not (x and t):
                return f"{'-':>7}"
            acc.append(x.median / t.median)
            return f"{acc[-1]:7.2f}"
        print(f"{name:<15} {tt:>9} {tw:>6.0f} {vt:>10} {vw:>6.0f} {t.median * 1e3:10.4f} "
              f"{ms_(p)} {ms_(v)} {ratio(p, r_torch):>8} {ratio(v, r_tvm)}"
              + (f"  (TVM: {err})" if err else ""))
    if r_torch:
        print(f"\ngeomean vs torch {geomean(r_torch):.3f} over {len(r_torch)} operators, "
              f"min {min(r_torch):.2f}")
    if r_tvm:
        print(f"geomean vs TVM MetaSchedule {geomean(r_tvm):.3f} over {len(r_tvm)} operators, "
              f"min {min(r_tvm):.2f}")


if __name__ == "__main__":
    main()
