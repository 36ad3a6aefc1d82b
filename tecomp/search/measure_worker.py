"""The measurement worker: a separate Python process that builds and times candidate schedules.

:class:`~tecomp.search.measure.LocalMeasurer` starts it as ``python -c BOOT FD`` (a fresh
interpreter: never forked from a process that holds threads), over one socket that carries pickled
messages. Compiled code stays in the process that JIT-compiled it, so a candidate is built and run
by the same worker; the parent decides when it runs (runs are serialized). The worker answers every
request with one message and keeps no state the parent cannot rebuild: a worker that crashes or is
killed on a timeout is replaced, and the parent re-sends tasks and rebuilds what it held.

Requests (tuples) and replies:

- ``("task", tid, SearchTask)``: remember a task (no reply);
- ``("build", key, tid, steps)``: replay, lower, compile; keep the kernel under ``key``;
  ``("built", seconds)``;
- ``("run", key, tid, ref_path)``: run the kernel (checked against the reference outputs in
  ``ref_path`` if not None) and time it; ``("ran", costs)``;
- ``("ref", tid, path)``: compute the reference outputs with the reference schedule
  (:func:`~tecomp.schedule.cpu_reference.reference_cpu_schedule` on a CPU) into ``path``
  (``.npz``); ``("ok",)``;
- ``("clear",)``: drop the kernels held (no reply).

A failure replies ``("error", ErrorKind name, message)``. The functions below (:func:`build_candidate`,
:func:`task_arrays`, :func:`run_candidate`, :func:`compare`) are what a runner on another engine
(Dask, Ray) calls inside its own workers.
"""
from __future__ import annotations

import collections
import faulthandler
import functools
import hashlib
import math
import os
import signal
import sys
import threading
import time
import traceback

import numpy as np

from ..build import build
from ..codegen.memory import aligned_copy, aligned_empty
from ..ir.loop import LoopIRError
from ..ir.validate import IndexValidator
from ..schedule import Schedule, ScheduleError, reference_cpu_schedule
from .target_search import target_search

__all__ = ["MeasureFailure", "build_candidate", "task_arrays", "run_candidate", "raw_call",
           "compare", "flush_bytes", "main"]

#: how much of an error message (the end of a traceback) is kept
MSG_CHARS = 500
#: tasks whose arrays (inputs, outputs, reference) a worker keeps
_KEEP_TASKS = 4


class MeasureFailure(Exception):
    """A candidate failed; ``kind`` is the name of its :class:`~tecomp.schedule.records.ErrorKind`."""

    def __init__(self, kind: str, msg: str):
        super().__init__(msg)
        self.kind, self.msg = kind, msg


def _trim(text: str) -> str:
    text = text.strip()
    return text if len(text) <= MSG_CHARS else "..." + text[-MSG_CHARS:]


def _tb() -> str:
    return _trim(traceback.format_exc())


# ------------------------------------------------------------------------------------ building
def build_candidate(task, steps, inputs=None):
    """Replay ``steps`` on ``task.dag`` and compile it for ``task.target``; with ``inputs`` (the
    arrays of :func:`task_arrays`), the task's ``constants`` are bound at build time (their
    packing stages run then, untimed, as in a compiled model).

    Raises
    ------
    MeasureFailure
        ``INVALID_SCHEDULE`` when the steps do not replay or lower (ScheduleError, LoopIRError),
        ``BUILD_ERROR`` when compiling fails otherwise.
    """
    try:
        sched = Schedule.from_records(task.dag, [list(s) for s in steps])
    except Exception:  # noqa: BLE001 - malformed records are invalid schedules too
        raise MeasureFailure("INVALID_SCHEDULE", _tb()) from None
    try:
        return _build(task, sched, inputs)
    except (ScheduleError, LoopIRError):
        raise MeasureFailure("INVALID_SCHEDULE", _tb()) from None
    except Exception:  # noqa: BLE001
        raise MeasureFailure("BUILD_ERROR", _tb()) from None


def _build(task, sched, inputs=None):
    # a worker builds thousands of distinct candidates and holds the kernels it still needs
    # itself: the per-process build cache would only grow
    consts = None
    if inputs is not None and task.constants and target_search(task.target).device is None:
        consts = {t.name: a for t, a in zip(task.dag.inputs, inputs) if t.name in task.constants}
    return build(task.dag, task.target, sched, cache=False, constants=consts)


# ------------------------------------------------------------------------------------ data
def task_arrays(task):
    """``(inputs, outputs)`` to measure ``task`` with.

    The task's real ``inputs`` (sparse index data) are used as given; the other inputs are random
    with a seed fixed by the task (the same arrays in every worker): floats uniform in [-1, 1),
    integers in [1, 8), booleans half true. Outputs are preallocated (and touched).
    """
    seed = int(hashlib.sha256(f"{task.workload_key}/{task.data_hash}".encode()).hexdigest()[:8], 16)
    rng = np.random.default_rng(seed)
    inputs = []
    for t in task.dag.inputs:
        if t.name in task.inputs:
            inputs.append(np.ascontiguousarray(task.inputs[t.name]))
        elif t.dtype.is_float:
            inputs.append(rng.uniform(-1.0, 1.0, t.shape).astype(t.dtype.np))
        elif t.dtype.is_bool:
            inputs.append(rng.random(t.shape) < 0.5)
        else:
            inputs.append(rng.integers(1, 8, size=t.shape).astype(t.dtype.np))
    # aligned as a compiled model's buffers and weights are, so that a layer is ranked at the
    # speed it runs there (numpy's own alignment varies from run to run)
    inputs = [aligned_copy(a) for a in inputs]
    outputs = [aligned_empty(t.shape, t.dtype.np) for t in task.dag.outputs]
    for o in outputs:
        o.fill(0)
    validator = IndexValidator(task.dag)
    if validator.active:  # once per task; the timed calls then skip the per-call checks
        try:
            validator.check(inputs + outputs)
        except Exception:  # noqa: BLE001
            raise MeasureFailure("RUN_ERROR", _tb()) from None
    return inputs, outputs


def _poison(outputs) -> None:
    """Fill outputs with values no kernel should leave behind (NaN for floats)."""
    for o in outputs:
        if o.dtype.kind == "f":
            o.fill(np.nan)
        else:
            o.view(np.uint8).fill(0xA5)


_TOL = {2: 5e-2, 4: 1e-3, 8: 1e-6}  # rtol (and atol, relative to the output's RMS) by float size


def compare(outputs, reference, names) -> str | None:
    """``None`` when ``outputs`` match ``reference``, else what differs.

    Floats: ``isclose`` with rtol 1e-3 for float32 (5e-2 float16, 1e-6 float64) and an atol of the
    same size times the reference's RMS (at least 1); NaN equals NaN. Other dtypes: exact.
    """
    for o, r, name in zip(outputs, reference, names):
        if o.dtype.kind == "f":
            tol = _TOL.get(o.dtype.itemsize, 1e-3)
            finite = r[np.isfinite(r)].astype(np.float64)
            scale = max(1.0, float(np.sqrt(np.mean(finite * finite)))) if finite.size else 1.0
            ok = np.isclose(o, r, rtol=tol, atol=tol * scale, equal_nan=True)
        else:
            ok = o == r
        if not ok.all():
            bad = np.flatnonzero(~ok)
            at = np.unravel_index(bad[0], o.shape)
            return (f"output '{name}': {bad.size} of {o.size} elements differ from the reference "
                    f"(default schedule); first at {tuple(int(i) for i in at)}: "
                    f"{o[at].item()!r} vs {r[at].item()!r}")
    return None


# ------------------------------------------------------------------------------------ timing
def flush_bytes() -> int:
    """Bytes to write to flush the caches: twice the last-level caches of the cores this process may
    use (each L3 counted once), at least 64 MiB, at most 1 GiB."""
    total, seen = 0, set()
    cpus = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else range(os.cpu_count() or 1)
    for c in cpus:
        base = f"/sys/devices/system/cpu/cpu{c}/cache"
        try:
            idx = max((d for d in os.listdir(base) if d.startswith("index")),
                      key=lambda d: int(open(f"{base}/{d}/level").read()))
            size = open(f"{base}/{idx}/size").read().strip()
            shared = open(f"{base}/{idx}/shared_cpu_list").read().strip()
        except (OSError, ValueError):
            continue
        if shared not in seen:
            seen.add(shared)
            mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(size[-1:], 1)
            total += int(size.rstrip("KMG")) * mult
    return int(min(max(2 * total, 64 << 20), 1 << 30))


@functools.lru_cache(maxsize=1)
def _flusher(nbytes: int):
    """A zero-argument callable that streams ``nbytes`` through the caches of all the cores a kernel
    uses: a parallel tecomp kernel ``Y[i] = X[i] + 1`` on the same thread pool as the kernels
    (a single-threaded numpy write would leave the other cores' private caches warm)."""
    from ..ir import ComputeDAG, compute, placeholder
    n = max(1 << 16, nbytes // 8)
    X = placeholder((n,), dtype="float32", name="X")
    Y = compute((n,), lambda i: X[i] + 1.0, name="Y")
    dag = ComputeDAG([X, Y])
    s = Schedule(dag)
    (i,) = s[Y].axes
    io, ii = s[Y].split(i, factor=1 << 14)
    _, iv = s[Y].split(ii, factor=16)
    s[Y].parallel(io)
    s[Y].vectorize(iv)
    k = build(dag, "llvm", s)
    x, y = np.zeros(n, np.float32), np.zeros(n, np.float32)
    return k.raw_call([x, y])


def raw_call(kernel, inputs, outputs):
    """The zero-argument native call of ``kernel`` on ``inputs`` (all of the DAG's, constants
    included) into ``outputs``, as a measurement times it: the arguments were checked once (index
    data in :func:`task_arrays`, shapes and dtypes are ours), and ``Kernel.__call__``'s per-call
    checks would add ~5-50 us to every timing."""
    if kernel.constant_names:  # built with constants: the call takes the other inputs
        return kernel.prepared_call(kernel.call_inputs(inputs), list(outputs))
    return kernel.raw_call(list(inputs) + list(outputs))


def run_candidate(kernel, inputs, outputs, reference=None, *, repeat=3, min_repeat_ms=40,
                  flush_cache=False, flush_size=None, names=(), prepare=None,
                  cutoff=math.inf) -> tuple:
    """Run ``kernel`` on ``inputs`` into ``outputs``, check it, and time it; returns the costs
    (seconds per call, one per repeat).

    One call first (its outputs, poisoned beforehand, are compared with ``reference``), then
    ``repeat`` measurements: without cache flush, each of as many calls as last ``min_repeat_ms``
    (calibrated on one call); with cache flush, the caches are flushed before each one, which times
    a single call. ``prepare(call, outputs)``, a test hook, may return a replacement for the
    zero-argument call that runs the kernel.

    Raises
    ------
    MeasureFailure
        ``RUN_ERROR`` when the kernel raises, ``WRONG_ANSWER`` when the check fails.
    """
    call = raw_call(kernel, inputs, outputs)
    if prepare is not None:
        call = prepare(call, outputs) or call
    try:
        clock = time.perf_counter
        _poison(outputs)
        t0 = clock()
        call()
        first = clock() - t0
        if reference is not None:
            bad = compare(outputs, reference, names)
            if bad:
                raise MeasureFailure("WRONG_ANSWER", bad)
        if first > cutoff:  # far slower than the best known: one call tells enough
            return (first,)
        costs = []
        if flush_cache:
            flush = _flusher(flush_size or flush_bytes())
            for _ in range(repeat):
                flush()
                t0 = clock()
                call()
                costs.append(clock() - t0)
            return tuple(costs)
        t0 = clock()
        call()
        one = max(clock() - t0, 1e-9)
        number = max(1, math.ceil(min_repeat_ms * 1e-3 / one))
        for _ in range(repeat):
            t0 = clock()
            for _ in range(number):
                call()
            costs.append((clock() - t0) / number)
        return tuple(costs)
    except MeasureFailure:
        raise
    except Exception:  # noqa: BLE001
        raise MeasureFailure("RUN_ERROR", _tb()) from None


# ------------------------------------------------------------------------------------ the process
class _Worker:
    def __init__(self, init: dict):
        self.opts = init["options"]
        self.prepare = init.get("prepare")
        if isinstance(self.prepare, str):
            import importlib
            mod, _, name = self.prepare.partition(":")
            self.prepare = getattr(importlib.import_module(mod), name)
        self.tasks = {}
        self.data = collections.OrderedDict()  # tid -> [inputs, outputs, reference path, reference]
        self.kernels = {}
        self.gpu_data = collections.OrderedDict()  # tid -> the task's arrays on its device

    def _data(self, tid):
        d = self.data.get(tid)
        if d is None:
            d = self.data[tid] = [*task_arrays(self.tasks[tid]), None, None]
            while len(self.data) > _KEEP_TASKS:
                self.data.popitem(last=False)
        self.data.move_to_end(tid)
        return d

    def _device(self, tid, d, device):
        """The task's arrays on its device (copies of the host ones ``d``, uploaded once)."""
        g = self.gpu_data.get(tid)
        if g is None:
            try:
                g = self.gpu_data[tid] = device.device_data(d[0], d[1])
            except Exception:  # noqa: BLE001 - e.g. no GPU in this worker after all
                raise MeasureFailure("RUN_ERROR", _tb()) from None
            while len(self.gpu_data) > _KEEP_TASKS:
                self.gpu_data.popitem(last=False)
        self.gpu_data.move_to_end(tid)
        return g

    def _hook(self, steps):
        if self.prepare is None:
            return None
        return lambda call, outputs: self.prepare(call, outputs, steps)

    def handle(self, msg):
        op = msg[0]
        if op == "task":
            self.tasks[msg[1]] = msg[2]
            return None
        if op == "clear":
            self.kernels.clear()
            return None
        if op == "build":
            _, key, tid, steps = msg
            inputs = self._data(tid)[0]  # random inputs made now, not in the timed run phase
            t0 = time.perf_counter()
            self.kernels[key] = (build_candidate(self.tasks[tid], steps, inputs), steps)
            seconds = time.perf_counter() - t0
            return ("built", seconds)
        if op == "run":
            _, key, tid, ref_path, cutoff = msg
            kernel, steps = self.kernels.pop(key)
            inputs, outputs, path, ref = d = self._data(tid)
            if ref_path is not None and (ref is None or path != ref_path):
                with np.load(ref_path) as z:
                    ref = d[3] = [z[f"arr_{n}"] for n in range(len(outputs))]
                d[2] = ref_path
            names = [t.name for t in self.tasks[tid].dag.outputs]
            o = self.opts
            device = target_search(self.tasks[tid].target).device
            if device is not None:
                return ("ran", device.run(
                    kernel, self._device(tid, d, device), ref if ref_path else None,
                    repeat=o["repeat"],
                    min_repeat_ms=o["min_repeat_ms"], names=names, cutoff=cutoff,
                    compare=compare, failure=MeasureFailure))
            costs = run_candidate(kernel, inputs, outputs, ref if ref_path else None,
                                  repeat=o["repeat"], min_repeat_ms=o["min_repeat_ms"],
                                  flush_cache=o["flush_cache"], flush_size=o["flush_bytes"],
                                  names=names, prepare=self._hook(steps), cutoff=cutoff)
            return ("ran", costs)
        if op == "ref":
            _, tid, path = msg
            task = self.tasks[tid]
            device = target_search(task.target).device
            try:
                # a CPU reference reduces each element in the default's order, with the reduction
                # outside the inner row and the rows on the pool (a large matmul's default loops
                # alone run for minutes); a device keeps its target's default schedule
                kernel = _build(task, None if device is not None
                                else reference_cpu_schedule(task.dag))
            except Exception:  # noqa: BLE001
                raise MeasureFailure("BUILD_ERROR", _tb()) from None
            inputs, outputs, _, _ = d = self._data(tid)
            if device is not None:
                outputs = device.reference(kernel, self._device(tid, d, device), MeasureFailure)
            else:
                _poison(outputs)
                try:
                    kernel.raw_call(inputs + outputs)()
                except Exception:  # noqa: BLE001
                    raise MeasureFailure("RUN_ERROR", _tb()) from None
            tmp = path + ".tmp.npz"
            np.savez(tmp, *outputs)
            os.replace(tmp, path)
            return ("ok",)
        raise ValueError(f"unknown request {op!r}")


def _watch_parent() -> None:
    """Exit when the parent goes away: it holds the write end of our stdin and never writes."""
    try:
        while os.read(0, 4096):
            pass
    except OSError:
        pass
    os._exit(3)


def main(conn) -> None:
    """Serve requests on ``conn`` (a ``multiprocessing.connection.Connection``) until it closes."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    faulthandler.enable()  # a segfault leaves a Python traceback in the worker's log
    threading.Thread(target=_watch_parent, daemon=True, name="watch-parent").start()
    init = conn.recv()
    worker = _Worker(init)
    _flusher(1 << 20)()  # start LLVM and the thread pool now, not in the first build or run
    conn.send(("ready", os.getpid()))
    while True:
        try:
            msg = conn.recv()
        except (EOFError, OSError):
            break
        if msg[0] == "exit":
            break
        try:
            reply = worker.handle(msg)
        except MeasureFailure as f:
            reply = ("error", f.kind, _trim(f.msg))
        except Exception:  # noqa: BLE001 - a bug here must not take the worker down silently
            reply = ("error", "RUN_ERROR" if msg[0] == "run" else "BUILD_ERROR", _tb())
        if reply is not None:
            conn.send(reply)
    sys.stdout.flush()
    os._exit(0)
