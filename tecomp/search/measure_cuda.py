"""Measuring candidates of ``cuda`` tasks: the GPU side of the measurement worker.

The worker (:mod:`.measure_worker`) builds a cuda candidate like any other (``tc.build`` emits PTX;
no GPU needed) and hands the run here. Inputs are the task's random arrays (made once per task in
the worker, as for the CPU) uploaded to the device once; outputs live on the device and are poisoned
(every byte 0xFF: NaN for floats) before the checked call. Times come from CUDA events around
``number`` back-to-back launches, so host overhead between launches is not counted as long as the
launches queue faster than the kernels run.

A kernel that faults leaves the CUDA context unusable (a "sticky" error): the worker then exits at
once, so that :class:`~.measure.LocalMeasurer` reports this candidate as ``CRASH`` and replaces the
worker with a fresh process; the tuner goes on.

The parent calls :func:`require_gpu` before it sends a cuda task to any worker, so that tuning a
cuda task on a machine without a GPU fails at once with one line saying why.
"""
from __future__ import annotations

import math
import os
import sys

import numpy as np

__all__ = ["require_gpu", "DeviceData", "run_candidate_cuda", "reference_cuda"]

_EXIT_STICKY = 70  # the worker's exit status after a sticky CUDA error


def _runtime():
    from ..codegen import cuda_runtime
    return cuda_runtime


def require_gpu(targets) -> None:
    """Check, in the parent and without creating a CUDA context, that the tasks' targets can be
    measured here: cuda-python, a driver and device 0 of at least each target's arch.

    Raises
    ------
    CudaUnavailableError
        One line saying what is missing, or that device 0's arch is older than a target's.
    """
    rt = _runtime()
    try:
        have = rt.probe(0)
    except rt.CudaUnavailableError as e:
        raise rt.CudaUnavailableError(f"cannot measure target(s) {', '.join(sorted(map(str, targets)))}"
                                      f" here: {e}") from None
    for t in targets:
        arch = getattr(t, "arch", "") or str(t).rpartition("sm_")[2]
        want = int(str(arch).replace("sm_", "") or 0)
        if want > int(have.replace("sm_", "")):
            raise rt.CudaUnavailableError(
                f"target {t} needs {arch} but device 0 is {have}: make the task with "
                f"target='cuda -arch={have}'")


class DeviceData:
    """A task's arrays on the device, made once per task: ``inputs``/``outputs`` (DeviceArray)
    beside the host ``host_outputs`` that checked results are read back into."""

    def __init__(self, inputs, outputs):
        rt = _runtime()
        self.inputs = [rt.DeviceArray.from_numpy(a) for a in inputs]
        self.outputs = [rt.DeviceArray.empty(o.shape, o.dtype) for o in outputs]
        self.host_outputs = [np.empty_like(o) for o in outputs]

    @property
    def arrays(self) -> list:
        return self.inputs + self.outputs

    def poison(self) -> None:
        """Fill the outputs with values no kernel should leave behind (NaN for floats)."""
        for o in self.outputs:
            o.fill_bytes(0xFF if o.dtype.kind == "f" else 0xA5)

    def download(self) -> list:
        for d, h in zip(self.outputs, self.host_outputs):
            d.to_numpy(out=h)
        return self.host_outputs


def _sticky_exit(err) -> None:
    """The context is lost after a kernel fault: leave, so the parent records a crash and starts
    a fresh worker (replying first would make the parent blame the next request)."""
    sys.stderr.write(f"tecomp measure worker: sticky CUDA error, exiting: {err}\n")
    sys.stderr.flush()
    os._exit(_EXIT_STICKY)


def _guard(fn, failure):
    """Run ``fn``; CUDA errors become ``failure("RUN_ERROR", ...)``, sticky ones end the process."""
    rt = _runtime()
    try:
        return fn()
    except rt.CudaError as e:
        if e.sticky:
            _sticky_exit(e)
        raise failure("RUN_ERROR", str(e)) from None


def reference_cuda(kernel, data: DeviceData, failure) -> list:
    """Run ``kernel`` (the default schedule) once on ``data``; its outputs, on the host."""
    def go():
        data.poison()
        kernel.raw_call(data.arrays, device=True)()
        return [h.copy() for h in data.download()]
    return _guard(go, failure)


def run_candidate_cuda(kernel, data: DeviceData, reference=None, *, repeat=3, min_repeat_ms=40,
                       names=(), cutoff=math.inf, compare=None, failure=RuntimeError) -> tuple:
    """Check and time a cuda ``kernel`` on ``data``; the costs (seconds per run, one per repeat).

    One poisoned, checked run first, then one run timed by events (if it is slower than
    ``cutoff``, it is the only cost), then ``repeat`` event timings of as many back-to-back runs as last
    ``min_repeat_ms`` (at least one). ``compare(outputs, reference, names)`` returns what differs
    or None; ``failure(kind, msg)`` builds the exception raised for a wrong answer or a failed run.
    """
    rt = _runtime()
    call = kernel.raw_call(data.arrays, device=True)

    def go():
        data.poison()
        call()  # checked, untimed: the first run also loads (JIT-compiles) the module
        if reference is not None and compare is not None:
            bad = compare(data.download(), reference, names)
            if bad:
                raise failure("WRONG_ANSWER", bad)
        first = rt.time_function(call, number=1, repeat=1, warmup=0)[0]
        if first > cutoff:
            return (first,)
        number = max(1, math.ceil(min_repeat_ms * 1e-3 / max(first, 1e-7)))
        return tuple(rt.time_function(call, number=number, repeat=repeat, warmup=1))
    try:
        return _guard(go, failure)
    except Exception as e:  # noqa: BLE001 - a failure of ours passes, anything else is a run error
        if isinstance(e, failure):
            raise
        raise failure("RUN_ERROR", f"{type(e).__name__}: {e}") from None
