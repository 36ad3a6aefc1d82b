"""``tecomp tune-model MODEL.onnx --trials N --log PATH``: tune a whole model's fused groups
(``model.tasks()``) under one trial budget with the task scheduler, resuming from the log, with a
live progress display; Ctrl-C stops cleanly (exit status 130, the log intact)."""
from __future__ import annotations

import os

from . import commands as cmds
from .common import CliError, one_line

__all__ = ["cmd_tune_model", "add_parser"]


def add_parser(sub, formatter, wrap) -> None:
    """Register ``tune-model`` on the subcommand parsers ``sub``."""
    from ..search.task import TuningOptions
    d = TuningOptions()
    p = sub.add_parser(
        "tune-model", help="tune an ONNX model's fused layers (resumable) for tc.compile_model",
        description=wrap("Parse MODEL (ONNX; needs 'tecomp[onnx]'), split it into fused layers "
                         "(a convolution or matrix product with its bias, activation and "
                         "residual add; reductions; softmax), and tune the distinct ones on this "
                         "CPU with the task scheduler, sharing --trials among them by their "
                         "expected gain in the model's latency. The log is resumed: layers it "
                         "already holds are not warmed up again and no candidate is measured "
                         "twice. Ctrl-C stops cleanly (exit status 130). Then "
                         "tc.compile_model(tc.from_onnx(MODEL), log=LOG) builds the tuned model."),
        formatter_class=formatter)
    p.add_argument("model", metavar="MODEL.onnx", help="the ONNX model file")
    p.add_argument("--trials", type=int, default=256,
                   help="new candidates to measure, in all (default 256)")
    p.add_argument("--log", default=None,
                   help="JSON-lines tuning log, resumed if it exists (default "
                        "tuning_logs/MODEL.jsonl)")
    p.add_argument("--input-shape", action="append", default=[], metavar="NAME=D1,D2,...",
                   help="static shape of an input with dynamic dimensions; repeatable")
    p.add_argument("--target", default="llvm", help="compilation target (default llvm)")
    p.add_argument("--objective", choices=["latency", "geomean"], default="latency",
                   help="what the scheduler minimizes (default: the model's latency)")
    p.add_argument("--include-simple", action="store_true",
                   help="also tune the layers without a reduction (elementwise / reshapes)")
    p.add_argument("--layout", choices=["auto", "nchw", "nhwc"], default="auto",
                   help="the layout the convolutions run in (default auto: NHWC for a model "
                        "with convolutions); compile with the same tc.from_onnx(layout=...)")
    p.add_argument("--min-records", type=int, default=None, metavar="N",
                   help="a layer whose log holds at least N valid records gets no trial "
                        "(default: this run's even share, ceil(trials / layers); 0: tune all)")
    p.add_argument("--in-place", type=int, default=None, metavar="K",
                   help="after tuning, time each layer's K best records inside the compiled "
                        "model on this machine, where its weights come from memory as they do "
                        "in a real call, and log those timings for tc.compile_model to rank by "
                        "(default 6, or 0 with --ray: the cluster's nodes may differ from this "
                        "machine; 0: skip)")
    p.add_argument("--seed", type=int, default=0, help="search seed (default 0)")
    p.add_argument("--cost-model", choices=["auto", "xgb", "random"], default="auto",
                   help="auto: the learned model when xgboost is installed, else random")
    p.add_argument("--no-model-prior", action="store_true",
                   help="the learned model learns from this tuning's measurements alone, not "
                        "from the shipped prior of this CPU's vector width")
    p.add_argument("--population", type=int, default=d.population)
    p.add_argument("--generations", type=int, default=d.generations)
    p.add_argument("--measures-per-round", type=int, default=d.measures_per_round)
    p.add_argument("--repeat", type=int, default=d.repeat)
    p.add_argument("--min-repeat-ms", type=int, default=d.min_repeat_ms)
    p.add_argument("--flush-cache", action="store_true",
                   help="time candidates with the caches flushed (cold weights, as in the "
                        "model); use a fresh log: cold and warm costs do not rank together")
    p.add_argument("--workers", type=int, default=d.n_workers)
    p.add_argument("--build-timeout", type=float, default=d.build_timeout)
    p.add_argument("--run-timeout", type=float, default=d.run_timeout)
    p.add_argument("--progress", choices=["auto", "bar", "lines", "none"], default="auto")
    p.add_argument("--ray", default=None, metavar="ADDRESS",
                   help="measure on the nodes of a Ray cluster (tecomp[ray]); default: worker "
                        "processes on this machine")
    p.set_defaults(fn=cmd_tune_model)


def _shapes(items) -> dict:
    out = {}
    for it in items:
        name, sep, dims = it.partition("=")
        try:
            shape = tuple(int(d) for d in dims.replace("x", ",").split(",") if d.strip())
        except ValueError:
            shape = ()
        if not sep or not name or not shape or any(d < 1 for d in shape):
            raise CliError(f"--input-shape {it!r}: expected NAME=D1,D2,... with positive sizes",
                           code=2)
        out[name] = shape
    return out


def cmd_tune_model(args) -> int:
    from ..frontend import Layout, ModelError, from_onnx
    from ..frontend.tasks import (
        held_tasks,
        merge_held,
        model_tasks,
        record_threshold,
        sub_alternatives,
        task_alternatives,
        task_names,
    )
    if not os.path.isfile(args.model):
        raise CliError(f"no model file at {args.model!r}", code=2)
    if args.min_records is not None and args.min_records < 0:
        raise CliError(f"--min-records must be >= 0, got {args.min_records}", code=2)
    if args.in_place is None:
        args.in_place = 0 if args.ray else 6
    if args.in_place < 0:
        raise CliError(f"--in-place must be >= 0, got {args.in_place}", code=2)
    target = cmds.tune_target(args)
    layout = Layout.AUTO if args.layout == "auto" else Layout(args.layout.upper())
    try:
        model = from_onnx(args.model, shapes=_shapes(args.input_shape), layout=layout)
    except (ModelError, ImportError) as e:
        raise CliError(one_line(e)) from None
    pairs = model_tasks(model, target, args.include_simple)
    if not pairs:
        raise CliError(f"{args.model}: no layer to tune (no convolution, matrix product or "
                       f"reduction)")
    tasks, weights = [t for t, _ in pairs], [float(n) for _, n in pairs]
    alts = task_alternatives(model, args.include_simple)
    names = [one_line(n)[:60] for n in task_names(model, args.include_simple)]
    log = args.log or os.path.join("tuning_logs", f"{model.name}.jsonl")
    cmds.check_log_path(log)
    opt = cmds.tuning_options(args)
    tstr = str(tasks[0].target)
    extra = [i for alt in alts for i in alt[1:]]  # a layer's other variants: not more layers
    n_layers = int(sum(w for i, w in enumerate(weights) if i not in extra))
    variants = f", {len(extra)} of them also by Winograd" if extra else ""
    print(f"tuning {model.name} ({args.model}, convolutions in {model.layout.value}): "
          f"{len(model.nodes)} operators, {len(tasks) - len(extra)} distinct layers ({n_layers} in "
          f"all{variants}), {args.trials} trials, target {tstr}, log {log}")
    threshold = record_threshold(args.trials, len(tasks), args.min_records)
    held = held_tasks(tasks, log, threshold)
    todo = [i for i in range(len(tasks)) if i not in held]
    if held:
        print(f"  {len(held)} layer(s) already hold >= {threshold} valid records in the log and "
              f"get no trial (--min-records 0 tunes them further): "
              + ", ".join(f"#{i + 1}" for i in sorted(held)))
    warm = sum(1 for i in todo if cmds.count_records(log, tasks[i].workload_key, tstr)[0])
    if warm:
        print(f"  resuming: the log holds records of {warm} of the other layers; they start "
              f"warmed up and nothing is measured twice")
    if todo:
        sub = cmds.tune_layers(args, [tasks[i] for i in todo], [weights[i] for i in todo],
                               [names[i] for i in todo], log, opt, sub_alternatives(alts, todo))
    else:
        from ..search.scheduler import TuneTasksResult
        sub = TuneTasksResult([], [], allocation=[])
        print("every layer holds its records already: nothing to tune")
    out = merge_held(sub, todo, held, weights, alts)
    if args.in_place:
        _rank_in_place(model, log, target, args)
    lay = "" if args.layout == "auto" else f", layout=tc.Layout.{args.layout.upper()}"
    lat = cmds.latency_text(out, " yet")
    print(f"tuned layers' latency (sum of count x best): {lat}; {sum(out.allocation)} trials. "
          f"Build it: tc.compile_model(tc.from_onnx({args.model!r}{lay}), log={log!r})")
    return 0


def _rank_in_place(model, log, target, args) -> None:
    from ..frontend.in_place import in_place_table, rank_in_place
    if not os.path.exists(log):
        return
    print(f"timing each layer's {args.in_place} best records in place in the compiled model "
          f"(their weights cold, as in a real call)", flush=True)
    rows = rank_in_place(model, log, target, candidates=args.in_place, seed=args.seed,
                         progress=lambda line: print("  " + line, flush=True))
    if rows:
        print(in_place_table(rows))
