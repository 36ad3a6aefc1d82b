"""``tecomp best`` and ``tecomp plot``: what a tuning log holds."""
from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field

from .common import CliError, one_line


@dataclass
class TaskSummary:
    """The records of one (workload key, target) in a log, in log order."""
    key: str
    target: str
    records: list = field(default_factory=list)

    @property
    def valid(self) -> list:
        return [r for r in self.records if r.result.is_valid]

    @property
    def errors(self) -> int:
        return sum(1 for r in self.records if not r.result.is_valid)

    @property
    def best(self):
        v = self.valid
        return min(v, key=lambda r: r.cost) if v else None

    @property
    def flops(self) -> float:
        return max((r.flop_count for r in self.records), default=0.0)

    def gflops(self, cost: float) -> float:
        return self.flops / cost / 1e9 if self.flops > 0 and math.isfinite(cost) and cost > 0 \
            else math.nan


def load_tasks(paths) -> list:
    """The tasks of the logs ``paths``, in order of first appearance."""
    from ..schedule.records import load_records
    tasks: dict = {}
    for path in paths:
        if os.path.isdir(path):
            raise CliError(f"{path!r} is a directory, not a tuning log")
        try:
            recs = load_records(path)
        except FileNotFoundError:
            raise CliError(f"tuning log {path!r} does not exist") from None
        except UnicodeDecodeError:
            raise CliError(f"{path!r} is not a tuning log (not text)") from None
        for r in recs:
            t = tasks.get((r.workload_key, r.target))
            if t is None:
                t = tasks[(r.workload_key, r.target)] = TaskSummary(r.workload_key, r.target)
            t.records.append(r)
    if not tasks:
        raise CliError(f"{', '.join(paths)}: no tuning records")
    return list(tasks.values())


# ----------------------------------------------------------------------------- best
def cmd_best(args) -> int:
    tasks = load_tasks(args.logs)
    if args.target:
        from ..schedule.target_match import same_target  # a -mcpu alone matches its records
        tasks = [t for t in tasks
                 if same_target(t.target, args.target) or t.target.split()[0] == args.target]
        if not tasks:
            raise CliError(f"no records for target {args.target!r} in {', '.join(args.logs)}")
    rows = []
    for t in tasks:
        b = t.best
        rows.append({"key": t.key, "target": t.target,
                     "best_ms": b.cost * 1e3 if b else None,
                     "gflops": (None if b is None or math.isnan(t.gflops(b.cost))
                                else t.gflops(b.cost)),
                     "records": len(t.records), "errors": t.errors,
                     # sparse tasks: the hash of the index data the best record was tuned on
                     "data": b.data_hash if b else ""})
    if args.json:
        print(json.dumps(rows, indent=1))
        return 0
    kw = max(args.key_chars, 4)
    tw = max(6, max(len(r["target"]) for r in rows))
    data = any(r["data"] for r in rows)  # the column only where some task has index data
    print(f"{'key':<{kw}}  {'target':<{tw}}  {'best ms':>10}  {'GFLOP/s':>8}  {'records':>7}  "
          f"{'errors':>6}" + ("  data" if data else ""))
    for r in rows:
        ms = f"{r['best_ms']:10.4f}" if r["best_ms"] is not None else f"{'-':>10}"
        gf = f"{r['gflops']:8.2f}" if r["gflops"] is not None else f"{'-':>8}"
        print(f"{r['key'][:kw]:<{kw}}  {r['target']:<{tw}}  {ms}  {gf}  {r['records']:>7}  "
              f"{r['errors']:>6}" + (f"  {r['data'] or '-'}" if data else ""))
    return 0


# ----------------------------------------------------------------------------- plot
def curves(task: TaskSummary):
    """``(trials, seconds_stamps, best GFLOP/s)`` of a task: after each of its records (NaN before
    the first valid one)."""
    best, xs, ts, ys = math.inf, [], [], []
    for n, r in enumerate(task.records, 1):
        if r.result.is_valid:
            best = min(best, r.cost)
        xs.append(n)
        ts.append(r.result.timestamp)
        ys.append(task.gflops(best))
    return xs, ts, ys


def wall_axis(stamps, max_gap: float):
    """Record timestamps -> seconds of tuning since the first one, with idle gaps longer than
    ``max_gap`` (between resumed runs) cut to nothing. Returns ``(mapping function, cut gaps)``."""
    stamps = sorted(s for s in stamps if s > 0)
    if not stamps:
        return None, 0
    knots, acc, cut = [(stamps[0], 0.0)], 0.0, 0
    for a, b in zip(stamps, stamps[1:]):
        d = b - a
        if d > max_gap:
            cut += 1
            d = 0.0
        acc += d
        knots.append((b, acc))
    import bisect
    times = [k[0] for k in knots]

    def f(s):
        i = bisect.bisect_right(times, s) - 1
        return knots[max(i, 0)][1]
    return f, cut


def cmd_plot(args) -> int:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise CliError("tecomp plot needs matplotlib: pip install 'tecomp[plot]'") from None
    tasks = load_tasks(args.logs)
    labels = {}
    for spec in args.label or ():
        if "=" not in spec:
            raise CliError(f"bad --label {spec!r}: expected KEYPREFIX=NAME", code=2)
        k, v = spec.split("=", 1)
        labels[k.strip()] = v
    out = args.output or os.path.splitext(args.logs[0])[0] + ".png"
    parent = os.path.dirname(os.path.abspath(out))
    if not os.path.isdir(parent):
        raise CliError(f"cannot write {out!r}: the folder {parent!r} does not exist")
    multi_target = len({t.target for t in tasks}) > 1
    plotted = [t for t in tasks if t.flops > 0]
    if not plotted:
        raise CliError("the records carry no flop count, so there is no GFLOP/s to plot")
    skipped = len(tasks) - len(plotted)
    f, cut = wall_axis([r.result.timestamp for t in plotted for r in t.records], args.max_gap)
    stamps = [r.result.timestamp for t in plotted for r in t.records if r.result.timestamp > 0]
    tmax = max(map(f, stamps), default=0.0) if f else 0.0
    unit, scale = ("h", 3600.0) if tmax > 7200 else ("min", 60.0) if tmax > 600 else ("s", 1.0)

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4.6), constrained_layout=True)
    for t in plotted:
        name = next((v for k, v in labels.items() if t.key.startswith(k)), t.key[:10])
        if multi_target:
            name += f" ({t.target})"
        xs, ts, ys = curves(t)
        line, = ax1.plot(xs, ys, drawstyle="steps-post", label=name)
        if f is not None:
            t0 = min((f(s) for s in ts if s > 0), default=0.0) if args.time_origin == "task" \
                else 0.0
            pts = [((f(s) - t0) / scale, y) for s, y in zip(ts, ys) if s > 0]
            if pts:
                ax2.plot([p[0] for p in pts], [p[1] for p in pts], drawstyle="steps-post",
                         color=line.get_color(), label=name)
    ax1.set_xlabel("trials (measured candidates of the task)")
    ax1.set_ylabel("best GFLOP/s")
    ax1.set_title("best GFLOP/s against trials")
    origin = "first record of each task" if args.time_origin == "task" else "first record"
    ax2.set_xlabel(f"tuning wall time ({unit}, from the {origin})"
                   + (f", {cut} idle gap(s) over {args.max_gap:g} s cut" if cut else ""))
    ax2.set_ylabel("best GFLOP/s")
    ax2.set_title("best GFLOP/s against wall time")
    if f is None:
        ax2.text(0.5, 0.5, "the records carry no timestamps", ha="center", va="center",
                 transform=ax2.transAxes)
    for ax in (ax1, ax2):
        ax.grid(True, alpha=0.3)
        ax.set_ylim(bottom=0)
    ax1.legend(fontsize="small", loc="lower right", ncol=1 if len(plotted) <= 8 else 2)
    names = ", ".join(map(os.path.basename, args.logs))
    fig.suptitle(args.title or f"tecomp tuning curves: {names}")
    try:
        fig.savefig(out, dpi=args.dpi)
    except (ValueError, OSError) as e:
        raise CliError(f"cannot write {out!r}: {one_line(e)}") from None
    finally:
        plt.close(fig)
    print(f"wrote {out}: {len(plotted)} task(s)"
          + (f" ({skipped} without a flop count skipped)" if skipped else ""))
    return 0
