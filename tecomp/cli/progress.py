"""The live progress display of ``tecomp tune``: one updating line on a terminal, plain lines
otherwise. A callable for ``tc.tune(progress=...)``."""
from __future__ import annotations

import shutil
import sys
import time

#: set by the CLI's SIGINT/SIGTERM handler. The handler also raises KeyboardInterrupt, but an
#: exception raised while a finalizer (``__del__``, ``weakref.finalize``) runs is printed and
#: dropped, and the tuning would go on; the next round's progress update raises it again.
_STOP = {"requested": False}


def request_stop(requested: bool = True) -> None:
    _STOP["requested"] = requested


def _raise_if_stopped() -> None:
    if _STOP["requested"]:
        raise KeyboardInterrupt


def fmt_seconds(s: float) -> str:
    if s != s or s == float("inf"):
        return "?"
    s = int(round(s))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


class Progress:
    """Shows trials done out of ``total``, the best GFLOP/s, the error count, the time elapsed and
    the time left.

    Parameters
    ----------
    total : int
        Trials this run makes.
    stream : file, optional
        Default ``sys.stdout``.
    mode : {"auto", "bar", "lines", "none"}
        ``auto``: ``bar`` (one line rewritten in place) on a terminal, ``lines`` (a line per
        round) otherwise.
    clock : callable, optional
        Seconds (test hook; default ``time.monotonic``).
    """

    BAR = 20

    def __init__(self, total: int, stream=None, mode: str = "auto", clock=None):
        self.total = max(0, int(total))
        self.stream = stream if stream is not None else sys.stdout
        if mode == "auto":
            isatty = getattr(self.stream, "isatty", None)
            mode = "bar" if isatty is not None and isatty() else "lines"
        if mode not in ("bar", "lines", "none"):
            raise ValueError(f"progress mode must be auto, bar, lines or none, got {mode!r}")
        self.mode = mode
        self.clock = clock or time.monotonic
        self.t0 = self.clock()
        self.first = None  # (time, trials) at the first round's end: the rate excludes startup
        self.trials = 0
        self.best_gflops = 0.0
        self.errors = 0
        self.metric = "best - GFLOP/s"  # what the line says of the results so far
        self._open = False       # a bar line is on screen, not yet ended by a newline

    # ------------------------------------------------------------------------------------
    def start(self, note: str = "starting the measurement workers") -> None:
        if self.mode == "bar":
            self._write_bar(self._line(note=note))

    def __call__(self, result) -> None:
        """Update from a :class:`~tecomp.search.tune.TuneResult` (``trials``, ``best_gflops``,
        ``errors``)."""
        _raise_if_stopped()
        self.trials = int(result.trials)
        self.best_gflops = float(result.best_gflops)
        self.errors = int(sum(result.errors.values()))
        self.metric = f"best {self.best_gflops:.2f} GFLOP/s"
        self._show()

    def _show(self) -> None:
        now = self.clock()
        if self.first is None:
            self.first = (now, self.trials)
        line = self._line(now)
        if self.mode == "bar":
            self._write_bar(line)
        elif self.mode == "lines":
            self.stream.write(line + "\n")
            self.stream.flush()

    def end(self) -> None:
        """End the bar's line (before anything else is printed)."""
        if self._open:
            self.stream.write("\n")
            self.stream.flush()
            self._open = False

    # ------------------------------------------------------------------------------------
    def eta(self, now: float | None = None) -> float:
        """Seconds left, from the rate since the first round (from the start before that)."""
        now = self.clock() if now is None else now
        left = self.total - self.trials
        if left <= 0:
            return 0.0
        if self.first is not None and self.trials > self.first[1]:
            rate = (now - self.first[0]) / (self.trials - self.first[1])
        elif self.trials > 0:
            rate = (now - self.t0) / self.trials
        else:
            return float("nan")
        return rate * left

    def _line(self, now: float | None = None, note: str = "") -> str:
        now = self.clock() if now is None else now
        width = len(str(self.total))
        parts = [f"trials {self.trials:>{width}}/{self.total}",
                 self.metric,
                 f"errors {self.errors}",
                 f"elapsed {fmt_seconds(now - self.t0)}",
                 f"ETA {fmt_seconds(self.eta(now))}"]
        text = "  ".join(parts) + (f"  ({note})" if note else "")
        if self.mode == "bar":
            done = min(self.BAR, self.BAR * self.trials // self.total) if self.total else self.BAR
            return f"[{'#' * done}{'.' * (self.BAR - done)}] " + text
        return "tecomp: " + text

    def _write_bar(self, line: str) -> None:
        cols = shutil.get_terminal_size((100, 24)).columns
        self.stream.write("\r" + line[:max(10, cols - 1)] + "\x1b[K")
        self.stream.flush()
        self._open = True


class NetworkProgress(Progress):
    """:class:`Progress` of ``tc.tune_tasks``: total trials, the weighted latency of the network,
    and the best GFLOP/s of the task tuned last."""

    def __init__(self, total: int, names, stream=None, mode: str = "auto", clock=None):
        super().__init__(total, stream, mode, clock)
        self.names = list(names)
        self.metric = "latency -"
        self._alloc = [0] * len(self.names)

    def __call__(self, out) -> None:
        """Update from a :class:`~tecomp.search.scheduler.TuneTasksResult`."""
        _raise_if_stopped()
        res = out.results
        self.trials = int(sum(r.trials for r in res))
        self.errors = int(sum(sum(r.errors.values()) for r in res))
        alloc = list(out.allocation)
        changed = [i for i, (a, b) in enumerate(zip(alloc, self._alloc)) if a != b]
        self._alloc = alloc
        valid = sum(1 for r in res if r.best_steps is not None)
        lat = out.weighted_latency
        self.metric = (f"latency {lat * 1e3:.3f} ms" if valid == len(res)
                       else f"{valid}/{len(res)} tasks valid")
        if changed:
            i = changed[-1]
            self.metric += (f"  last: task {i + 1} {self.names[i]} "
                            f"{res[i].best_gflops:.1f} GFLOP/s")
        self._show()
