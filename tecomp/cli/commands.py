"""``tecomp run``, ``tecomp bench`` and ``tecomp tune``."""
from __future__ import annotations

import os
import sys

import numpy as np

from .common import CliError, compare, make_workload, one_line, parse_target
from .progress import NetworkProgress, Progress


def _hand_schedule(name: str, wl):
    from ..workloads import hand_schedules as hs
    if name == "matmul":
        return hs.matmul_schedule(wl.dag)
    if name.startswith("conv2d"):
        p = wl.params
        return hs.conv2d_schedule(wl.dag, p["layout"], p["method"])
    raise CliError(f"no hand schedule for {name} (there are for matmul and conv2d); use "
                   f"--schedule default", code=2)


def weight_constants(name: str, wl) -> tuple:
    """Names of ``wl``'s inputs that are constants where it runs: a convolution's weight (a
    layer's weights are fixed at inference; a packed weight is then packed once, at build time,
    as in a compiled model or a network's layer set and as the peers pack theirs), else none."""
    from ..workloads.networks import layer_weights
    return layer_weights(wl) if name.startswith("conv2d") else ()


def _build(wl, name: str, target, schedule: str = "default", log=None, inputs=None):
    """``(kernel, label)``: the kernel of the best record of ``log``, or of the default or hand
    schedule; with ``inputs``, its :func:`weight_constants` bound to theirs."""
    from .. import build
    names = weight_constants(name, wl) if inputs is not None else ()
    consts = {t.name: a for t, a in zip(wl.dag.inputs, inputs or ()) if t.name in names}
    if log is not None:
        if not os.path.exists(log):
            raise CliError(f"tuning log {log!r} does not exist")
        try:
            return build(wl.dag, target=target, log=log, constants=consts or None), \
                f"best record of {log}"
        except LookupError as e:
            raise CliError(one_line(e).split(". Tune it")[0] + f"; tune it first (tecomp tune "
                           f"{name} ... --log {log})") from None
    sched = None if schedule == "default" else _hand_schedule(name, wl)
    return build(wl.dag, target=target, schedule=sched, constants=consts or None), \
        f"{schedule} schedule"


def cmd_bench(args) -> int:
    """Build a workload (best record of a log, default or hand schedule), check it and time it
    beside its peer library."""
    wl = make_workload(args)
    target = parse_target(args.target)
    log = getattr(args, "log", None)
    if log is not None and args.schedule != "default":
        raise CliError("--log and --schedule hand are exclusive: the log gives the schedule",
                       code=2)
    inputs = wl.make_inputs(np.random.default_rng(args.seed))
    kernel, label = _build(wl, args.workload, target, args.schedule, log, inputs)
    print(f"workload     {wl!r}")
    print(f"target       {kernel.target}")
    return compare(args.workload, wl, kernel, inputs, args.repeat, label)


def cost_model_for(kind: str, task, opt):
    from ..search.cost_model import RandomModel
    from ..search.tune import default_cost_model, learned_cost_model
    if kind == "random":
        return RandomModel(opt.seed)
    if kind == "xgb":
        try:
            return learned_cost_model(task, opt)
        except ImportError as e:
            raise CliError(f"--cost-model xgb needs xgboost ({one_line(e)}); install the 'tune' "
                           f"extra: pip install 'tecomp[tune]'") from None
    return default_cost_model(task, opt)


def count_records(log: str, key: str, target: str) -> tuple:
    """``(records of this task, all records)`` in ``log``."""
    import warnings

    from ..schedule.records import load_records
    if not os.path.exists(log):
        return 0, 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        recs = load_records(log)
    from ..schedule.target_match import same_target
    return (sum(1 for r in recs if r.workload_key == key and same_target(r.target, target)),
            len(recs))


def tune_target(args):
    from ..target import TargetKind
    if args.trials < 0:
        raise CliError(f"--trials must be >= 0, got {args.trials}", code=2)
    target = parse_target(args.target)
    if target.kind is not TargetKind.LLVM:
        raise CliError(f"tecomp tune measures candidates on this machine's CPU; target "
                       f"{str(target)!r} cannot be measured here (use --target llvm)", code=2)
    # a Ray cluster's nodes of another CPU may measure it; this machine builds for itself only
    why = "" if getattr(args, "ray", None) else target.host_mismatch()
    if why:
        raise CliError(f"bad --target: {why}", code=2)
    return target


def check_log_path(log: str) -> None:
    if os.path.isdir(log):
        raise CliError(f"--log {log!r} is a directory; give a file path (e.g. {log}/tune.jsonl)",
                       code=2)


def tuning_options(args):
    from ..search.task import TuningOptions
    try:
        opt = TuningOptions(population=args.population, generations=args.generations,
                            measures_per_round=args.measures_per_round, repeat=args.repeat,
                            min_repeat_ms=args.min_repeat_ms, n_workers=args.workers,
                            build_timeout=args.build_timeout, run_timeout=args.run_timeout,
                            seed=args.seed, verbose=False,
                            flush_cache=args.flush_cache,
                            model_prior=not getattr(args, "no_model_prior", False))
    except (TypeError, ValueError) as e:
        raise CliError(f"bad tuning option: {one_line(e)}", code=2) from None
    for flag, v in (("--population", opt.population), ("--generations", opt.generations),
                    ("--measures-per-round", opt.measures_per_round), ("--repeat", opt.repeat),
                    ("--workers", opt.n_workers)):
        if v < 1:
            raise CliError(f"{flag} must be >= 1, got {v}", code=2)
    return opt


def measurer_for(args, opt):
    """The measurer of ``tecomp tune``: local worker processes, or the nodes of the Ray cluster
    at ``--ray ADDRESS`` (which reports the nodes it takes and loses)."""
    if not getattr(args, "ray", None):
        from ..search.measure import LocalMeasurer
        return LocalMeasurer(opt)
    try:
        from ..search.ray_measure import RayMeasurer
    except ImportError as e:
        raise CliError(one_line(e), code=2) from None
    try:
        return RayMeasurer(args.ray, opt, verbose=True)
    except RuntimeError as e:
        raise CliError(one_line(e)) from None


def cmd_tune(args) -> int:
    """Tune a workload (or a network's layers) on this CPU, resuming from the log; for one
    workload, then build the best record and compare it with its peer."""
    from ..schedule.records import load_records
    from ..schedule.target_match import same_target
    from ..search.task import SearchTask
    from ..search.tune import tune
    if args.network:
        if args.workload:
            raise CliError("give a WORKLOAD or --network, not both", code=2)
        return _tune_network(args)
    if not args.workload:
        raise CliError("tecomp tune needs a WORKLOAD (e.g. matmul --shape 512 512 512) or "
                       "--network NAME", code=2)
    if getattr(args, "layers", None):
        raise CliError("--layers picks layers of a --network, not of a WORKLOAD", code=2)
    target = tune_target(args)
    check_rerank(args)
    wl = make_workload(args)
    task = SearchTask(wl.dag, target, inputs=wl.index_data or None,
                      constants=weight_constants(args.workload, wl))
    log = args.log or os.path.join("tuning_logs",
                                   f"{args.workload}_{task.workload_key[:12]}.jsonl")
    check_log_path(log)
    opt = tuning_options(args)
    model = cost_model_for(args.cost_model, task, opt)
    tstr = str(task.target)
    print(f"tuning {wl!r}")
    print(f"  target {tstr}, workload key {task.workload_key[:16]}, {args.trials} trials, "
          f"cost model {type(model).__name__}, log {log}")
    mine, total = count_records(log, task.workload_key, tstr)
    if mine:
        valid = [r.result.mean_cost for r in load_records(log)
                 if r.workload_key == task.workload_key and same_target(r.target, tstr)
                 and r.result.is_valid]
        best = f"best {task.flop_count() / min(valid) / 1e9:.2f} GFLOP/s" if valid else "none valid"
        print(f"  resuming: the log holds {mine} records of this task ({best}); they are not "
              f"measured again")
    sys.stdout.flush()
    progress = Progress(args.trials, sys.stdout, args.progress)
    try:
        progress.start()
        with measurer_for(args, opt) as measurer:
            res = tune(task, trials=args.trials, log=log, options=opt, cost_model=model,
                       measurer=measurer, progress=progress)
    except KeyboardInterrupt:
        progress.end()
        mine_now, _ = count_records(log, task.workload_key, tstr)
        raise CliError(f"interrupted after {progress.trials} trials of this run; the log {log} "
                       f"holds {mine_now} records of this task (rerun the same command to resume)",
                       code=130) from None
    finally:
        progress.end()
    total_s = res.wall_seconds or 1.0
    errs = ", ".join(f"{k.lower()} {v}" for k, v in sorted(res.errors.items())) or "none"
    print(f"best {res.best_gflops:.2f} GFLOP/s after {res.trials} trials in "
          f"{res.wall_seconds:.1f} s (search {res.search_seconds / total_s:.0%}, measurement "
          f"{res.measure_seconds / total_s:.0%}); errors: {errs}")
    if res.trials < args.trials:
        print(f"the search found no new candidate after {res.trials} trials; stopped early")
    if res.best_steps is None:
        raise CliError(f"no valid schedule was found (errors: {errs}); see the log {log}")
    rerank_tasks(args, [task], [args.workload], log)
    if args.no_bench:
        return 0
    inputs = wl.make_inputs(np.random.default_rng(args.seed))
    kernel, label = _build(wl, args.workload, target, log=log, inputs=inputs)
    return compare(args.workload, wl, kernel, inputs, 5, "tuned")


def _layer_name(spec) -> str:
    if spec[0] == "dense":
        return f"dense {spec[1]}->{spec[2]}"
    _, C, H, O, k, st, p, g = spec
    return f"conv {C}x{H}x{H}->{O} k{k} s{st} p{p}" + (f" g{g}" if g != 1 else "")


def tune_layers(args, tasks, weights, names, log, opt, alternatives=()):
    """The layers of a network or model under one trial budget (``tc.tune_tasks`` with one cost
    model shared by every layer), with a progress display and Ctrl-C as a one-line
    :class:`CliError` (the log keeps every finished round); then a table of each layer's best.
    Returns the :class:`~tecomp.search.scheduler.TuneTasksResult`."""
    from ..search.scheduler import tune_tasks
    sys.stdout.flush()
    shared = cost_model_for(args.cost_model, tasks, opt)  # one model learns from every layer
    extra = {"strategy": args.strategy} if getattr(args, "strategy", None) else {}
    progress = NetworkProgress(args.trials, names, sys.stdout, args.progress)
    try:
        progress.start()
        with measurer_for(args, opt) as measurer:
            out = tune_tasks(tasks, args.trials, log=log, weights=weights, options=opt,
                             cost_model_factory=lambda t: shared, measurer=measurer,
                             progress=progress, objective=args.objective,
                             alternatives=alternatives, **extra)
    except KeyboardInterrupt:
        progress.end()
        tstr = str(tasks[0].target)
        n = sum(count_records(log, t.workload_key, tstr)[0] for t in tasks)
        raise CliError(f"interrupted after {progress.trials} trials of this run; the log {log} "
                       f"holds {n} records of these layers (rerun the same command to resume)",
                       code=130) from None
    finally:
        progress.end()
    w = max(len(n) for n in names)
    print(f"{'#':>3}  {'layer':<{w}}  {'count':>5}  {'trials':>6}  {'GFLOP/s':>8}  {'ms':>9}  "
          f"{'count x ms':>10}")
    for i, (name, r, c) in enumerate(zip(names, out.results, weights), 1):
        ok = r.best_steps is not None
        print(f"{i:>3}  {name:<{w}}  {int(c):>5}  {out.allocation[i - 1]:>6}  "
              + (f"{r.best_gflops:8.2f}  {r.best_cost * 1e3:9.4f}  {c * r.best_cost * 1e3:10.4f}"
                 if ok else f"{'-':>8}  {'-':>9}  {'-':>10}"))
    return out


def layer_numbers(text: str, n: int) -> list:
    """0-based indices, in order and without repeats, of ``--layers`` text such as ``"3,7-9"``
    (1-based numbers of a network's ``n`` distinct layers)."""
    out = []
    for part in text.split(","):
        lo, sep, hi = part.strip().partition("-")
        try:
            a, b = int(lo), int(hi) if sep else int(lo)
        except ValueError:
            raise CliError(f"--layers: {part.strip()!r} is not a layer number or a range "
                           f"such as 3-5", code=2) from None
        if not 1 <= a <= b <= n:
            raise CliError(f"--layers: {part.strip()!r} is outside this network's layers "
                           f"1-{n}", code=2)
        out.extend(i - 1 for i in range(a, b + 1) if i - 1 not in out)
    return out


def _tune_network(args) -> int:
    """``tecomp tune --network NAME``: the network's distinct layers under one trial budget
    (:func:`tune_layers`)."""
    from ..search.task import SearchTask
    from ..workloads.networks import layer_set, layer_specs, layer_weights, method_applies
    for flag in ("shape", "param", "dtype"):
        if getattr(args, flag, None):
            raise CliError(f"--{flag} applies to a WORKLOAD, not to --network", code=2)
    target = tune_target(args)
    check_rerank(args)
    try:
        method = args.method or "direct"
        specs = [sp for sp in layer_specs(args.network) if method_applies(sp[0], method)]
        layers = layer_set(args.network, batch=args.batch, layout=args.layout, method=method)
    except ValueError as e:
        raise CliError(one_line(e), code=2) from None
    picked = ""
    if args.layers:
        keep = layer_numbers(args.layers, len(layers))
        picked = f" (--layers {args.layers} of {len(layers)})"
        specs, layers = [specs[i] for i in keep], [layers[i] for i in keep]
    # the weights are constants of the network: a packed weight is packed at build time, untimed
    tasks = [SearchTask(wl.dag, target, inputs=wl.index_data or None,
                        constants=layer_weights(wl)) for wl, _ in layers]
    weights = [float(c) for _, c in layers]
    names = [_layer_name(spec) for spec, _ in specs]
    log = args.log or os.path.join(
        "tuning_logs", f"{args.network}_b{args.batch}_{args.layout.lower()}"
                       f"{'_' + args.method if args.method else ''}.jsonl")
    check_log_path(log)
    opt = tuning_options(args)
    tstr = str(tasks[0].target)
    print(f"tuning {args.network} (batch {args.batch}, {args.layout}): {len(tasks)} distinct "
          f"layers{picked}, {args.trials} trials in all ({args.strategy}, {args.objective}), target "
          f"{tstr}, log {log}")
    mine = sum(count_records(log, t.workload_key, tstr)[0] for t in tasks)
    if mine:
        print(f"  resuming: the log holds {mine} records of these layers; they are not measured "
              f"again")
    out = tune_layers(args, tasks, weights, names, log, opt)
    errors = sum(sum(r.errors.values()) for r in out.results)
    print(f"network latency (sum of count x best): {latency_text(out)}; "
          f"{sum(out.allocation)} trials, {errors} errors")
    rerank_tasks(args, tasks, names, log)
    return 0


def check_rerank(args) -> None:
    if args.rerank < 0:
        raise CliError(f"--rerank must be >= 0, got {args.rerank}", code=2)
    if args.rerank_rounds < 1:
        raise CliError(f"--rerank-rounds must be >= 1, got {args.rerank_rounds}", code=2)


def rerank_tasks(args, tasks, names, log) -> None:
    """``--rerank K``: each task's K best records of ``log`` timed again, interleaved
    (:func:`tecomp.search.rerank.rerank`), and a table of what changed."""
    if not getattr(args, "rerank", 0):
        return
    from ..search.rerank import rerank, rerank_table
    print(f"re-ranking each task's {args.rerank} best records alone ({args.rerank_rounds} rounds, "
          f"then {2 * args.rerank_rounds} head to head); the timings are appended to {log}",
          flush=True)
    try:
        rows = rerank(tasks, log, candidates=args.rerank, rounds=args.rerank_rounds, names=names,
                      seed=args.seed, progress=lambda line: print(line, flush=True))
    except KeyboardInterrupt:
        raise CliError(f"interrupted while re-ranking; the log {log} keeps the tasks re-ranked "
                       f"so far", code=130) from None
    if rows:
        print(rerank_table(rows))


def latency_text(out, missing_note: str = "") -> str:
    """The weighted latency of a scheduler run ``out`` for a summary line, or why it is unknown
    (layers without a valid record; ``missing_note`` is appended to that reason)."""
    missing = sum(1 for r in out.results if r.best_steps is None)
    if not missing:
        return f"{out.weighted_latency * 1e3:.3f} ms"
    return f"unknown ({missing} layer(s) without a valid record{missing_note})"
