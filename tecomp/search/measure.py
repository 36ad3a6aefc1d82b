"""Measurement of candidate schedules: compiled and timed in worker processes.

The search talks to a :class:`Measurer` (``measure(inputs) -> results``, ``close()``), once per
round. :class:`LocalMeasurer` implements it with a pool of local worker processes
(:mod:`.measure_worker`); a measurer on a distributed engine (Dask, Ray) implements the same two
methods, calling :func:`.measure_worker.build_candidate` and :func:`.measure_worker.run_candidate` in
its own workers, and plugs in without touching the search.

How :class:`LocalMeasurer` measures a batch (after Ansor's LocalBuilder/LocalRunner, with their
weak points addressed; docs/ARCHITECTURE.md places it in the search):

1. Workers are fresh interpreters (``python -c``, never ``fork``: the parent holds LLVM and thread
   pool threads; and unlike multiprocessing's spawn it does not re-import the user's ``__main__``).
   Each task is sent to a worker once; afterwards only step lists travel.
2. Builds run in parallel on all workers, each under ``build_timeout``. MCJIT code lives in the
   process that compiled it, so the worker keeps its kernels until their run. The first time a task
   is seen, one worker also computes its reference outputs with the reference schedule (on a CPU
   :func:`~tecomp.schedule.cpu_reference.reference_cpu_schedule`, the default's per-element
   order with the reductions outside the inner row and the rows parallel; saved as
   ``.npz`` in a temporary directory, read by the others): Ansor defines "wrong answer" but never
   checks; we do, for every candidate.
3. Runs are serialized (a kernel uses every core), each under ``run_timeout``: check against the
   reference, warm-up, ``repeat`` timings of at least ``min_repeat_ms`` or, with ``flush_cache``,
   single calls after a parallel cache flush. All repeats are kept as the costs.

A worker that dies (segfault) makes its candidate ``CRASH``; one past its timeout is killed
(SIGKILL) and its candidate is ``BUILD_TIMEOUT`` / ``RUN_TIMEOUT``. Either way a fresh worker takes
its place, the candidates it had built are rebuilt, and the batch goes on. Workers ignore Ctrl-C,
exit when the parent dies (they watch a pipe only the parent holds), and are killed by ``close()``,
by garbage collection of the measurer and at interpreter exit.
"""
from __future__ import annotations

import itertools
import math
import os
import signal
import socket
import subprocess
import sys
import time
import warnings
import weakref
from collections import deque
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from typing import Protocol, runtime_checkable

from ..schedule.records import ErrorKind, MeasureResult
from .measure_dir import MeasureDir
from .measure_worker import MSG_CHARS, flush_bytes
from .target_search import target_search
from .task import SearchTask, TuningOptions

__all__ = ["MeasureInput", "Measurer", "LocalMeasurer"]

_BOOT = ("import sys\n"
         "from multiprocessing.connection import Connection\n"
         "c = Connection(int(sys.argv[1]))\n"
         "sys.path[:] = c.recv()\n"
         "from tecomp.search.measure_worker import main\n"
         "main(c)\n")


@dataclass(frozen=True)
class MeasureInput:
    """One candidate to measure.

    Attributes
    ----------
    task : SearchTask
    steps : tuple
        The schedule's step records (``Schedule.records()``), JSON-able.
    cutoff : float
        Seconds: a candidate whose first (checked) call takes longer is reported with that one
        call's time instead of being timed in full (a search knows such a candidate is far from the
        best already, and timing it properly would cost more than the rest of the round).
    """
    task: SearchTask
    steps: tuple
    cutoff: float = math.inf


@runtime_checkable
class Measurer(Protocol):
    """What the search needs of a measurement back end."""

    def measure(self, inputs: list) -> list:
        """Measure ``inputs`` (a list of :class:`MeasureInput`); one
        :class:`~tecomp.schedule.records.MeasureResult` per input, in order. Failed candidates are
        results with an error kind, never exceptions."""
        ...

    def close(self) -> None:
        """Release the workers."""
        ...


class _Slot:
    """One worker process, as the parent sees it."""

    def __init__(self, index: int, init: dict, logdir: str):
        self.index, self.init, self.logdir = index, init, logdir
        self.proc = self.conn = None
        self.gen = 0
        self.ready = False
        self.tasks = set()
        self.started = 0.0

    @property
    def log(self) -> str:
        return os.path.join(self.logdir, f"worker{self.index}.{self.gen}.log")

    def start(self) -> None:
        self.kill()
        self.gen += 1
        ours, theirs = socket.socketpair()
        with ours, theirs, open(self.log, "wb") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-c", _BOOT, str(theirs.fileno())], pass_fds=(theirs.fileno(),),
                stdin=subprocess.PIPE, stdout=log, stderr=log, close_fds=True)
            self.conn = Connection(ours.detach())
        self.conn.send(list(sys.path))
        self.conn.send(self.init)
        self.ready, self.tasks, self.started = False, set(), time.monotonic()

    def kill(self) -> None:
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.kill()
            self.proc.wait()
            self.proc.stdin.close()
        if self.conn is not None:
            self.conn.close()
        self.proc = self.conn = None
        self.ready = False

    def death(self) -> str:
        """Why the process ended, with the end of its log (faulthandler's traceback)."""
        code = None
        if self.proc is not None:
            try:
                code = self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                code = self.proc.wait()
        try:
            why = (f"killed by {signal.Signals(-code).name}" if code is not None and code < 0
                   else f"exited with status {code}")
        except ValueError:
            why = f"exited with status {code}"
        try:
            with open(self.log, "rb") as f:
                text = f.read().decode(errors="replace")
        except OSError:
            text = ""
        at = text.find("Fatal Python error")
        if at >= 0:  # faulthandler: the error and the innermost frames (most recent call first)
            text = text[at:].split("\nExtension modules:")[0][:MSG_CHARS]
        else:
            text = text[-MSG_CHARS:]
        text = text.strip()
        return f"the worker process {why}" + (f"; its output:\n{text}" if text else "")


def _shutdown(slots, mdir: MeasureDir) -> None:
    for s in slots:
        try:
            s.kill()
        except Exception:  # noqa: BLE001 - best effort at exit
            pass
    mdir.remove()


@dataclass
class _Job:
    kind: str            # "ref", "build" or "run"
    idx: int             # input index ("build", "run") or task id ("ref")
    tid: int
    msg: tuple
    timeout: float
    slot: _Slot | None = None  # the worker it must run on (None: any)
    elapsed: float = 0.0       # seconds from sending it to its outcome


class LocalMeasurer:
    """Measure candidates in a pool of local worker processes.

    Parameters
    ----------
    options : TuningOptions, optional
        Uses ``n_workers``, ``build_timeout``, ``run_timeout``, ``repeat``, ``min_repeat_ms`` and
        ``flush_cache``.
    check : bool
        Compare every candidate's outputs with those of the default schedule (``WRONG_ANSWER``).
    reference_timeout : float
        Seconds the reference schedule of a task may take to build and run once. When it fails, the
        task's candidates are measured unchecked, with a warning.
    startup_timeout : float
        Seconds a worker may take to start (import tecomp, initialize LLVM); failing is an error of
        the environment and raises ``RuntimeError``.
    prepare : callable or str, optional
        Test hook: ``prepare(call, outputs, steps)`` runs in the worker before a candidate runs and
        may return a replacement for ``call`` (the zero-argument native call on ``outputs``).
        A module-level function or ``"module:function"``; the worker imports it.
    """

    def __init__(self, options: TuningOptions | None = None, *, check: bool = True,
                 reference_timeout: float = 120.0, startup_timeout: float = 60.0, prepare=None):
        self.options = options = options or TuningOptions()
        if options.n_workers < 1:
            raise ValueError(f"n_workers must be >= 1, got {options.n_workers}")
        self.check = check
        self.reference_timeout = float(reference_timeout)
        self.startup_timeout = float(startup_timeout)
        self._dir = MeasureDir()  # also removes the directories of killed measurers
        init = {"options": {"repeat": int(options.repeat),
                            "min_repeat_ms": float(options.min_repeat_ms),
                            "flush_cache": bool(options.flush_cache),
                            "flush_bytes": flush_bytes() if options.flush_cache else 0},
                "prepare": prepare}
        self._slots = [_Slot(n, init, self._dir.path) for n in range(options.n_workers)]
        self._finalizer = weakref.finalize(self, _shutdown, self._slots, self._dir)
        self._task_ids: dict = {}   # (workload key, data hash, target) -> task id
        self._tasks: dict = {}      # task id -> SearchTask
        self._refs: dict = {}       # task id -> reference .npz path, or None
        self._keys = itertools.count()
        self._closed = False
        self._device_ok: set = set()  # device targets (cuda) checked measurable here
        for s in self._slots:
            s.start()

    def _require_devices(self, inputs) -> None:
        """Fail in one line, before any worker gets a task, when a target of ``inputs`` cannot be
        measured here: a CPU target of another CPU (:meth:`~tecomp.target.Target.require_host`), a
        device target (cuda) (the target's :class:`~.target_search.DeviceMeasurement`)."""
        todo: dict = {}
        for t in {i.task.target for i in inputs}:
            t.require_host()  # a CPU target of another CPU: every build would be refused
            device = target_search(t).device
            if device is not None and t not in self._device_ok:
                todo.setdefault(device, set()).add(t)
        for device, targets in todo.items():
            device.require(targets)
            self._device_ok |= targets

    # ----------------------------------------------------------------------------- public
    def measure(self, inputs: list) -> list:
        """Build and time ``inputs`` (a list of :class:`MeasureInput`); see :class:`Measurer`."""
        if self._closed:
            raise RuntimeError("this LocalMeasurer is closed")
        inputs = list(inputs)
        if not inputs:
            return []
        try:
            self._require_devices(inputs)
            return self._measure(inputs)
        except BaseException:
            # workers may be mid-request: replace them all so the next call starts clean
            for s in self._slots:
                s.kill()
            raise

    def close(self) -> None:
        """Kill the workers and remove the temporary files (idempotent)."""
        self._closed = True
        self._finalizer()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # ----------------------------------------------------------------------------- a batch
    def _task_id(self, task: SearchTask) -> int:
        key = (task.workload_key, task.data_hash, str(task.target))
        tid = self._task_ids.get(key)
        if tid is None:
            tid = self._task_ids[key] = len(self._task_ids)
            self._tasks[tid] = task
        return tid

    def _measure(self, inputs: list) -> list:
        o = self.options
        for s in self._slots:
            if s.proc is None:
                s.start()
        tids = [self._task_id(inp.task) for inp in inputs]
        results: list = [None] * len(inputs)
        built: dict = {}  # input index -> (slot, generation, kernel key, build seconds)
        jobs = []
        if self.check:
            for tid in dict.fromkeys(tids):
                if tid not in self._refs:
                    path = os.path.join(self._dir.path, f"ref{tid}.npz")
                    jobs.append(_Job("ref", tid, tid, ("ref", tid, path), self.reference_timeout))
        for i, (inp, tid) in enumerate(zip(inputs, tids)):
            jobs.append(self._build_job(i, tid, inp.steps))  # cuda runs: see measure_cuda
        for job, outcome in self._execute(jobs):
            self._finish(job, outcome, results, built)
        # runs, one at a time (and rebuilds of kernels whose worker was replaced meanwhile);
        # a candidate far slower than the best of this batch so far is timed by one call
        batch_best = math.inf
        for i in sorted(built):
            slot, gen, key, seconds = built.pop(i)
            if slot.gen != gen or slot.proc is None:
                for job, outcome in self._execute([self._build_job(i, tids[i], inputs[i].steps)]):
                    self._finish(job, outcome, results, built)
                if i not in built:
                    continue
                slot, gen, key, seconds = built.pop(i)
            ref = self._refs.get(tids[i]) if self.check else None
            cutoff = min(inputs[i].cutoff, o.slow_cutoff * batch_best)
            job = _Job("run", i, tids[i], ("run", key, tids[i], ref, cutoff), o.run_timeout, slot)
            for _, outcome in self._execute([job]):
                if outcome[0] == "ran":
                    results[i] = MeasureResult(costs=outcome[1], build_seconds=seconds)
                    if len(set(tids)) == 1:  # costs of one task compare
                        batch_best = min(batch_best, results[i].mean_cost)
                else:
                    results[i] = self._error(outcome, "RUN", seconds)
        for s in self._slots:
            if s.proc is not None and s.ready:
                try:
                    s.conn.send(("clear",))
                except OSError:
                    s.kill()  # restarted by the next batch
        return results

    def _build_job(self, i: int, tid: int, steps) -> _Job:
        msg = ("build", next(self._keys), tid, tuple(steps))
        return _Job("build", i, tid, msg, self.options.build_timeout)

    def _finish(self, job: _Job, outcome: tuple, results: list, built: dict) -> None:
        if job.kind == "ref":
            if outcome[0] == "ok":
                self._refs[job.tid] = job.msg[2]
            else:
                self._refs[job.tid] = None
                err = self._error(outcome, "RUN", 0.0)
                warnings.warn(f"LocalMeasurer: the default schedule of {self._tasks[job.tid]} "
                              f"failed ({err.error.value}: {_last_line(err.error_msg)}); its "
                              f"candidates are measured without a correctness check",
                              RuntimeWarning)
        elif outcome[0] == "built":
            built[job.idx] = (job.slot, job.slot.gen, job.msg[1], outcome[1])
        else:
            results[job.idx] = self._error(outcome, "BUILD", job.elapsed)

    @staticmethod
    def _error(outcome: tuple, phase: str, seconds: float) -> MeasureResult:
        what = outcome[0]
        if what == "error":
            kind, msg = ErrorKind[outcome[1]], outcome[2]
        elif what == "timeout":
            kind = ErrorKind.BUILD_TIMEOUT if phase == "BUILD" else ErrorKind.RUN_TIMEOUT
            msg = f"{phase.lower()} took longer than {outcome[1]:g} s; the worker was killed"
        else:
            kind, msg = ErrorKind.CRASH, outcome[1]
        return MeasureResult(error=kind, error_msg=msg, build_seconds=seconds)

    # ----------------------------------------------------------------------------- the pool
    def _execute(self, jobs: list):
        """Run ``jobs`` on the workers, as many at once as there are free workers; yield
        ``(job, outcome)`` as they end. Outcomes: the worker's reply, ``("timeout", seconds)`` or
        ``("crash", message)``."""
        pending = deque(jobs)
        busy: dict = {}  # slot -> (job, deadline)
        while pending or busy:
            for s in self._slots:
                if s in busy or not s.ready or not pending:
                    continue
                job = next((j for j in pending if j.slot is None or j.slot is s), None)
                if job is None:
                    continue
                pending.remove(job)
                job.slot = s
                sent = time.monotonic()
                try:
                    if job.tid not in s.tasks:
                        s.conn.send(("task", job.tid, self._tasks[job.tid]))
                        s.tasks.add(job.tid)
                    s.conn.send(job.msg)
                except OSError:  # it died while idle
                    msg = s.death()
                    s.start()
                    yield job, ("crash", msg)
                    continue
                busy[s] = (job, sent)
            waiting = [s for s in self._slots if s in busy or (s.proc is not None and not s.ready)]
            if not waiting:
                raise RuntimeError("LocalMeasurer: no worker can take the remaining jobs")
            now = time.monotonic()
            deadline = min([busy[s][1] + busy[s][0].timeout if s in busy
                            else s.started + self.startup_timeout for s in waiting])
            readable = wait([s.conn for s in waiting], timeout=max(0.0, deadline - now))
            now = time.monotonic()
            for s in waiting:
                job, sent = busy.get(s, (None, 0.0))
                if job is not None:
                    job.elapsed = now - sent
                if s.conn in readable:
                    try:
                        reply = s.conn.recv()
                    except (EOFError, OSError):
                        reply = None
                    if reply is None and job is None:
                        raise RuntimeError(f"LocalMeasurer: a worker failed to start: {s.death()}")
                    if reply is None:
                        msg = s.death()
                        s.start()
                        del busy[s]
                        yield job, ("crash", msg)
                    elif job is None:
                        s.ready = True
                    else:
                        del busy[s]
                        yield job, reply
                elif job is not None and now >= sent + job.timeout:
                    s.start()  # kills the old process first
                    del busy[s]
                    yield job, ("timeout", job.timeout)
                elif job is None and now >= s.started + self.startup_timeout:
                    s.kill()
                    raise RuntimeError(f"LocalMeasurer: a worker did not start within "
                                       f"{self.startup_timeout:g} s; its output: {s.death()}")


def _last_line(text: str, limit: int = 300) -> str:
    """The message of an error text (a traceback's last line), whole words up to ``limit``."""
    lines = [ln.strip() for ln in str(text).splitlines() if ln.strip()]
    last = lines[-1] if lines else ""
    return last if len(last) <= limit else last[:limit].rsplit(" ", 1)[0] + " ..."
