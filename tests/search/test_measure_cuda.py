"""Measuring cuda tasks: without a GPU it fails at once with one clear line; with one, candidates
are checked and timed by CUDA events in the worker."""
import time

import pytest

from tecomp.codegen import cuda_runtime as cr
from tecomp.schedule.records import ErrorKind
from tecomp.search.measure import LocalMeasurer, MeasureInput
from tecomp.search.measure_cuda import require_gpu
from tecomp.search.task import SearchTask, TuningOptions
from tecomp.target import Target
from tecomp.testing import workloads as W

HAVE_GPU = cr.available()


@pytest.mark.skipif(HAVE_GPU, reason="a CUDA GPU is present")
def test_cuda_task_without_gpu_fails_fast():
    task = SearchTask(W.matmul(16, 16, 16).dag, target="cuda")
    with LocalMeasurer(TuningOptions(n_workers=1)) as m:
        t0 = time.monotonic()
        with pytest.raises(cr.CudaUnavailableError) as e:
            m.measure([MeasureInput(task, ())])
        assert time.monotonic() - t0 < 10
        msg = str(e.value)
        assert "\n" not in msg and "cannot measure target(s) cuda -arch=sm_90 here" in msg
        assert not any(s.tasks for s in m._slots)  # no worker was sent the task
        # the measurer still serves CPU tasks
        cpu = SearchTask(W.matmul(8, 8, 8).dag, target="llvm")
        (res,) = m.measure([MeasureInput(cpu, ())])
        assert res.error is ErrorKind.NONE and res.mean_cost > 0


@pytest.mark.cuda
def test_arch_newer_than_the_device_is_refused():
    with pytest.raises(cr.CudaUnavailableError, match="needs sm_999"):
        require_gpu({Target.parse("cuda -arch=sm_999")})


@pytest.mark.cuda
def test_cuda_candidates_are_checked_and_timed():
    from tecomp.schedule import Schedule
    from tecomp.schedule.gpu_default import default_gpu_schedule
    wl = W.matmul(64, 48, 32)
    arch = cr.device().arch
    task = SearchTask(wl.dag, target=f"cuda -arch={arch}")
    steps = tuple(default_gpu_schedule(wl.dag).records())
    broken = tuple(Schedule(wl.dag).records())  # unbound root loops: not a GPU program
    with LocalMeasurer(TuningOptions(n_workers=1, repeat=2, min_repeat_ms=5)) as m:
        good, bad = m.measure([MeasureInput(task, steps), MeasureInput(task, broken)])
    assert good.error is ErrorKind.NONE, good.error_msg
    assert len(good.costs) == 2 and all(0 < c < 1 for c in good.costs)
    assert bad.error is not ErrorKind.NONE
