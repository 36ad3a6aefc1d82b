"""The ``tecomp`` command line (``tecomp.cli:main``; ``python -m tecomp.cli`` is the same).

Subcommands:

- ``tecomp run WORKLOAD --shape ...``: build a workload for this CPU (default or hand schedule),
  check it against its reference and time it beside its peer library;
- ``tecomp tune WORKLOAD --shape ... --trials N --log PATH``: tune it (resuming from the log) with a
  live progress display, then build the best record and compare it likewise; Ctrl-C stops cleanly
  (the log keeps every round measured so far; exit status 130). ``tecomp tune --network resnet18``
  tunes a network's distinct layers with the task scheduler instead (``--layers 3,7-9``: only
  those of them); ``--rerank K`` then times each task's K best records again, interleaved, so
  that builds pick by those timings;
- ``tecomp best LOG``: the best valid record of each task (workload key, target) of a log;
- ``tecomp bench WORKLOAD --shape ... [--log PATH]``: tecomp's best (or default/hand schedule)
  beside numpy / torch / scipy, timed in one run, as a ratio;
- ``tecomp plot LOG -o FILE.png``: tuning curves (best GFLOP/s against trials and wall time).

Every error is one line on stderr and a non-zero exit status (2 for bad usage); ``tecomp --debug
...`` shows the traceback of an unexpected one instead.
"""
from __future__ import annotations

import argparse
import contextlib
import os
import sys
import warnings

from ..workloads.networks import LAYER_METHODS
from .common import CliError, one_line, workload_help

__all__ = ["main", "build_parser", "CliError"]


class _Parser(argparse.ArgumentParser):
    """An argument parser whose usage errors are one line."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {one_line(message)} (see '{self.prog} --help')\n")


_FMT = argparse.RawDescriptionHelpFormatter  # keeps the epilog's table; descriptions are wrapped


def _wrap(text: str) -> str:
    import shutil
    import textwrap
    return textwrap.fill(text, min(shutil.get_terminal_size((80, 24)).columns, 100) - 2)


def _workload_args(p, method=True, optional=False):
    p.add_argument("workload", nargs="?" if optional else None, default=None,
                   help="matmul, batch_matmul, conv2d_nchw, conv2d_nhwc, csr_spmm, bsr_spmm, "
                        "sddmm, softmax, matmul_bias_relu (see below)")
    p.add_argument("--shape", nargs="+", default=[], metavar="N",
                   help="the workload's sizes in order, e.g. matmul: --shape M N K (or MxNxK)")
    p.add_argument("--param", action="append", default=[], metavar="KEY=VALUE",
                   help="another builder parameter (e.g. stride=2, padding=1,1, density=0.05); "
                        "repeatable")
    p.add_argument("--dtype", default=None, help="element type (default float32)")
    if method:
        p.add_argument("--method", choices=list(LAYER_METHODS), default=None,
                       help="conv2d algorithm (conv2d workloads only; default direct; winograd: "
                            "3x3 stride-1 layers only; channels_last: an NCHW convolution "
                            "computed channels-last between two transposes; blocked: an NCHW "
                            "convolution in blocks of 16 channels, NCHW[x]c; phased: a strided "
                            "NCHW convolution on its input split into stride phases; flat, with "
                            "--network only: the 1x1 unpadded layers, each computed on its "
                            "image (strided: the pixels read) as one row of pixels)")
    p.add_argument("--target", default="llvm",
                   help="compilation target (default: llvm, this CPU with its features)")


def build_parser() -> argparse.ArgumentParser:
    from .. import __version__
    ap = _Parser(prog="tecomp", formatter_class=_FMT,
                 description=_wrap("tecomp: a tensor compiler that tunes schedules for this CPU."),
                 epilog="Run 'tecomp COMMAND --help' for a command's options.")
    ap.add_argument("--version", action="version", version=f"tecomp {__version__}")
    ap.add_argument("--debug", action="store_true",
                    help="show the traceback of an unexpected error (first argument only)")
    sub = ap.add_subparsers(dest="cmd", metavar="COMMAND", required=True)
    epilog = workload_help()

    # run
    p = sub.add_parser("run", help="build a workload, check it, time it beside its peer library",
                       description=_wrap(
                                   "Build WORKLOAD for this CPU with the default or hand-written "
                                   "schedule, check it against its numpy/scipy reference on "
                                   "random data and time it beside numpy/torch/scipy."),
                       epilog=epilog, formatter_class=_FMT)
    _workload_args(p)
    p.add_argument("--schedule", choices=["default", "hand"], default="default",
                   help="the default schedule or the hand-written one (matmul, conv2d)")
    p.add_argument("--repeat", type=int, default=5, help="timing repeats (default 5)")
    p.add_argument("--seed", type=int, default=0, help="seed of the random inputs")
    p.set_defaults(fn=_lazy("commands", "cmd_bench"), log=None)

    # tune
    p = sub.add_parser("tune", help="tune a workload (resumable), then time the best beside its "
                                    "peer",
                       description=_wrap(
                                   "Tune WORKLOAD on this CPU: measure --trials new candidate "
                                   "schedules, appending every round to the log (an existing log "
                                   "is resumed: its candidates are not measured again), with a "
                                   "live progress display. Then build the best record, check it "
                                   "and time it beside its peer library. Ctrl-C stops cleanly: "
                                   "the log keeps every finished round and the exit status is "
                                   "130. With --network NAME instead of a WORKLOAD, the "
                                   "network's distinct conv2d/dense layers are tuned, sharing "
                                   "--trials through the task scheduler, and a table of each "
                                   "layer's best closes the run."),
                       epilog=epilog, formatter_class=_FMT)
    _workload_args(p, optional=True)
    p.add_argument("--network", choices=["resnet18", "resnet50", "mobilenet_v2"], default=None,
                   help="tune a network's distinct conv2d/dense layers instead of one WORKLOAD, "
                        "with the task scheduler (tc.tune_tasks) sharing --trials among them")
    p.add_argument("--batch", type=int, default=1, help="--network: batch size (default 1)")
    p.add_argument("--layers", default=None, metavar="I[,J-K...]",
                   help="--network: tune only these of its distinct layers, by their numbers "
                        "in the table a network tuning prints (1-based; ranges allowed), e.g. "
                        "the few still behind their peers")
    p.add_argument("--layout", choices=["NHWC", "NCHW"], default="NHWC",
                   help="--network: conv2d layout (default NHWC)")
    p.add_argument("--strategy", choices=["gradient", "round-robin"], default="gradient",
                   help="--network: how trials go to layers (default gradient: by expected gain "
                        "in the network's latency)")
    p.add_argument("--objective", choices=["latency", "geomean"], default="latency",
                   help="--network: what the gradient strategy minimizes: the network's latency "
                        "(default), or the sum of log latencies, so every layer's relative gain "
                        "counts alike")
    p.add_argument("--trials", type=int, default=64,
                   help="new candidates to measure (with --network: in all) (default 64)")
    p.add_argument("--log", default=None,
                   help="JSON-lines tuning log, resumed if it exists (default "
                        "tuning_logs/WORKLOAD_KEY.jsonl)")
    p.add_argument("--seed", type=int, default=0, help="search seed (default 0)")
    p.add_argument("--cost-model", choices=["auto", "xgb", "random"], default="auto",
                   help="auto: the learned model when xgboost is installed, else random")
    p.add_argument("--no-model-prior", action="store_true",
                   help="the learned model learns from this tuning's measurements alone, not "
                        "from the shipped prior of this CPU's vector width")
    from ..search.task import TuningOptions
    d = TuningOptions()  # one place for the defaults
    p.add_argument("--population", type=int, default=d.population,
                   help=f"candidates per generation of the evolutionary search "
                        f"(default {d.population})")
    p.add_argument("--generations", type=int, default=d.generations,
                   help=f"generations per round (default {d.generations})")
    p.add_argument("--measures-per-round", type=int, default=d.measures_per_round,
                   help=f"candidates measured per round (default {d.measures_per_round})")
    p.add_argument("--repeat", type=int, default=d.repeat,
                   help=f"timings per candidate (default {d.repeat})")
    p.add_argument("--min-repeat-ms", type=int, default=d.min_repeat_ms,
                   help=f"each timing lasts at least this long (default {d.min_repeat_ms})")
    p.add_argument("--flush-cache", action="store_true",
                   help="time each candidate with the caches flushed first (its weights come "
                        "from memory, as in a network's call); its costs rank only against "
                        "other cold ones, so start a fresh log")
    p.add_argument("--workers", type=int, default=d.n_workers,
                   help=f"build worker processes (default {d.n_workers})")
    p.add_argument("--ray", default=None, metavar="ADDRESS",
                   help="measure on the nodes of a Ray cluster (pip install 'tecomp[ray]'): "
                        "HOST:PORT of its head, or auto (RAY_ADDRESS, else a cluster started on "
                        "this machine); default: worker processes on this machine")
    p.add_argument("--build-timeout", type=float, default=30.0,
                   help="seconds a candidate may take to compile (default 30)")
    p.add_argument("--run-timeout", type=float, default=20.0,
                   help="seconds a candidate may take to run (default 20)")
    p.add_argument("--progress", choices=["auto", "bar", "lines", "none"], default="auto",
                   help="progress display: auto (one updating line on a terminal, a line per "
                        "round otherwise), bar, lines or none")
    p.add_argument("--rerank", type=int, default=0, metavar="K",
                   help="then time each task's K best records again, alone, interleaved over "
                        "rounds, and log those timings: a build from the log then picks the "
                        "fastest of them, not the luckiest single measurement (default 0: off; "
                        "with --trials 0, re-rank a log without tuning)")
    p.add_argument("--rerank-rounds", type=int, default=5,
                   help="--rerank: rounds of the selection; the head-to-head of its winner and "
                        "the search's best runs twice as many (default 5)")
    p.add_argument("--no-bench", action="store_true",
                   help="stop after tuning (do not build the best record and time it)")
    p.set_defaults(fn=_lazy("commands", "cmd_tune"))

    # tune-model (an ONNX model's fused layers; tecomp.frontend)
    from .model_command import add_parser as add_tune_model
    add_tune_model(sub, _FMT, _wrap)

    # best
    p = sub.add_parser("best", help="the best record of each task in tuning logs",
                       description=_wrap(
                                   "A table of the best valid record of each task (workload key, "
                                   "target) in the logs: its mean cost, GFLOP/s, and the numbers "
                                   "of records and failed measurements."),
                       formatter_class=_FMT)
    p.add_argument("logs", nargs="+", metavar="LOG", help="JSON-lines tuning log(s)")
    p.add_argument("--target", default=None,
                   help="only this target (exact string, or a kind such as llvm)")
    p.add_argument("--key-chars", type=int, default=16,
                   help="characters of the workload key shown (default 16)")
    p.add_argument("--json", action="store_true", help="print the rows as JSON")
    p.set_defaults(fn=_lazy("logs", "cmd_best"))

    # bench
    p = sub.add_parser("bench", help="tecomp's best (from a log) beside numpy/torch/scipy",
                       description=_wrap(
                                   "Build WORKLOAD from the best record of --log (or with the "
                                   "default or hand schedule), check it, and time it beside its "
                                   "peer in the same process: numpy for matmul and batch_matmul, "
                                   "torch for conv2d (numpy when torch is missing), scipy.sparse "
                                   "for csr_spmm and bsr_spmm, numpy for sddmm and the rest."),
                       epilog=epilog, formatter_class=_FMT)
    _workload_args(p)
    p.add_argument("--log", default=None, help="tuning log: build its best record for the workload")
    p.add_argument("--schedule", choices=["default", "hand"], default="default",
                   help="without --log: the default schedule or the hand-written one")
    p.add_argument("--repeat", type=int, default=5, help="timing repeats (default 5)")
    p.add_argument("--seed", type=int, default=0, help="seed of the random inputs")
    p.set_defaults(fn=_lazy("commands", "cmd_bench"))

    # plot
    p = sub.add_parser("plot", help="tuning curves of a log as a PNG (needs matplotlib)",
                       description=_wrap(
                                   "Plot best GFLOP/s against trials and against wall time (from "
                                   "the records' timestamps), one line per task. Needs "
                                   "matplotlib: pip install 'tecomp[plot]'."),
                       formatter_class=_FMT)
    p.add_argument("logs", nargs="+", metavar="LOG", help="JSON-lines tuning log(s)")
    p.add_argument("-o", "--output", default=None,
                   help="image file (default: the log's name with .png); the suffix picks the "
                        "format (png, svg, pdf)")
    p.add_argument("--label", action="append", default=[], metavar="KEYPREFIX=NAME",
                   help="legend name of the task whose workload key starts with KEYPREFIX")
    p.add_argument("--title", default=None)
    p.add_argument("--dpi", type=int, default=110)
    p.add_argument("--max-gap", type=float, default=600.0,
                   help="idle gaps between records longer than this (seconds; resumed runs) are "
                        "cut from the time axis (default 600)")
    p.add_argument("--time-origin", choices=["log", "task"], default="log",
                   help="wall time from the first record of the logs (default: shows when each "
                        "task was tuned) or from each task's own first record (compares tasks "
                        "tuned one after another)")
    p.set_defaults(fn=_lazy("logs", "cmd_plot"))

    p = sub.add_parser("export", add_help=False,
                       help="write the best kernels of a log as object code + manifest "
                            "(tc.load(DIR) runs them without compiling)",
                       description="tecomp export LOG --out DIR [--workload NAME --shape ...]... "
                                   "[--all]; see 'tecomp export --help'")
    p.add_argument("rest", nargs=argparse.REMAINDER)
    p.set_defaults(fn=_export)
    return ap


def _export(args) -> int:
    from ..deploy import main_export
    return main_export(args.rest)


def _lazy(module: str, name: str):
    def fn(args):
        import importlib
        return getattr(importlib.import_module(f"{__name__}.{module}"), name)(args)
    fn.__name__ = name
    return fn


def _showwarning(message, category, filename, lineno, file=None, line=None):
    print(f"tecomp: warning: {one_line(message)}", file=sys.stderr, flush=True)


@contextlib.contextmanager
def _stop_on_signals():
    """Ctrl-C, and ``kill PID`` (a job scheduler's stop), end a tuning alike: the round in flight
    is dropped, the log keeps every finished one, the workers are closed and the exit status is
    130. (A shell starts background jobs with SIGINT ignored, so SIGTERM is how they are stopped;
    an ignored SIGINT stays ignored.) The stop is also remembered, for the next round's progress
    update to raise again should the first KeyboardInterrupt land in a finalizer and be dropped."""
    import signal
    import threading
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    from .progress import request_stop

    def stop(signum, frame):
        request_stop()
        raise KeyboardInterrupt
    request_stop(False)
    sigs = [signal.SIGTERM] + ([signal.SIGINT] if signal.getsignal(signal.SIGINT)
                               is signal.default_int_handler else [])
    before = {sig: signal.signal(sig, stop) for sig in sigs}
    try:
        yield
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)
        request_stop(False)


def main(argv=None) -> int:
    """Run the ``tecomp`` command line; returns the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in argv[:1]
    if debug:
        argv = argv[1:]
    with _stop_on_signals(), warnings.catch_warnings():
        if not debug:
            warnings.showwarning = _showwarning
        try:
            if argv[:1] == ["export"]:  # its own parser (tecomp.deploy), --help included
                from ..deploy import main_export
                return int(main_export(argv[1:]) or 0)
            args = build_parser().parse_args(argv)
            return int(args.fn(args) or 0)
        except CliError as e:
            _flush_stdout()
            print(f"tecomp: {e}", file=sys.stderr, flush=True)
            return e.code
        except KeyboardInterrupt:
            _flush_stdout()
            lead = "\n" if sys.stderr.isatty() else ""  # past the ^C the terminal echoed
            print(f"{lead}tecomp: interrupted", file=sys.stderr, flush=True)
            return 130
        except BrokenPipeError:  # e.g. `tecomp best LOG | head`
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            return 1
        except Exception as e:  # noqa: BLE001 - one line, never a traceback
            if debug:
                raise
            _flush_stdout()
            if isinstance(e, OSError) and e.strerror and e.filename:
                msg = f"{e.strerror}: {e.filename}"
            elif isinstance(e, (ValueError, LookupError, OSError, ImportError)):
                msg = str(e)
            else:
                msg = f"{type(e).__name__}: {e}"
            print(f"tecomp: error: {one_line(msg)} (tecomp --debug ... shows the traceback)",
                  file=sys.stderr, flush=True)
            return 1


def _flush_stdout():
    try:
        sys.stdout.flush()
    except Exception:  # noqa: BLE001
        pass
