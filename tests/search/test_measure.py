"""Measurement in worker processes: valid costs, and every failure recorded as its kind while the
batch goes on (segfault, hang, wrong answer, invalid steps, build timeout); no process left behind."""
import ctypes
import gc
import os
import time

import numpy as np
import pytest

import tecomp as tc
from tecomp.schedule.records import ErrorKind
from tecomp.search.measure import LocalMeasurer, MeasureInput, Measurer
from tecomp.search.measure_worker import compare, task_arrays
from tecomp.search.task import SearchTask, TuningOptions
from tecomp.testing import workloads as w

# slow_cutoff off: these tests count repeats; test_slow_candidates_are_timed_by_one_call covers it
FAST = dict(repeat=3, min_repeat_ms=5, n_workers=2, slow_cutoff=float("inf"))


def matmul_task(n=64):
    return SearchTask(w.get_workload("matmul", M=n, N=n, K=n).dag)


def split_steps(task, factor, parallel=True):
    """A schedule of the matmul task: split of C's first axis by ``factor`` (the hook's marker)."""
    s = tc.Schedule(task.dag)
    C = task.dag.outputs[0]
    i, _ = s[C].axes
    io, _ = s[C].split(i, factor=factor)
    if parallel:
        s[C].parallel(io)
    return tuple(s.records())


def fault_hook(call, outputs, steps):
    """Test-only ``prepare`` hook (runs in the worker): the split factor says what goes wrong."""
    factors = [r[3][0] for r in steps if r[0] == "SP"]
    if 7 in factors:  # segfault
        return lambda: ctypes.string_at(0)
    if 5 in factors:  # hang
        return lambda: time.sleep(1e9)
    if 6 in factors:  # an exception
        def boom():
            raise RuntimeError("boom from the kernel")
        return boom
    if 3 in factors:  # a wrong answer: one element off by one
        def wrong():
            call()
            outputs[0].flat[-1] += 1.0
        return wrong
    return None


def alive(pid):
    """Whether process ``pid`` runs (a zombie, not yet reaped by whoever inherited it, does not)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def pids(m):
    return [s.proc.pid for s in m._slots if s.proc is not None]


@pytest.fixture(scope="module")
def faulty():
    m = LocalMeasurer(TuningOptions(run_timeout=2.0, **FAST), prepare=fault_hook)
    yield m
    m.close()


def test_good_schedules_valid_costs(faulty):
    task = matmul_task()
    inputs = [MeasureInput(task, split_steps(task, f)) for f in (8, 16)] + [MeasureInput(task, ())]
    assert isinstance(faulty, Measurer)
    res = faulty.measure(inputs)
    assert len(res) == 3
    for r in res:
        assert r.error is ErrorKind.NONE, r.error_msg
        assert len(r.costs) == 3 and all(0 < c < 0.1 for c in r.costs)
        assert r.build_seconds > 0 and r.is_valid
    assert faulty.measure([]) == []


def test_crash_hang_error_wrong_answer_and_the_batch_goes_on(faulty):
    task = matmul_task()
    factors = [8, 7, 16, 5, 4, 6, 3, 2]
    before = pids(faulty)
    res = faulty.measure([MeasureInput(task, split_steps(task, f)) for f in factors])
    kinds = [r.error for r in res]
    assert kinds == [ErrorKind.NONE, ErrorKind.CRASH, ErrorKind.NONE, ErrorKind.RUN_TIMEOUT,
                     ErrorKind.NONE, ErrorKind.RUN_ERROR, ErrorKind.WRONG_ANSWER, ErrorKind.NONE]
    assert "SIGSEGV" in res[1].error_msg and "Segmentation fault" in res[1].error_msg
    assert "2 s" in res[3].error_msg
    assert "boom from the kernel" in res[5].error_msg
    assert f"output '{task.dag.outputs[0].name}'" in res[6].error_msg and "1 of 4096" in res[6].error_msg
    for r in (res[0], res[2], res[4], res[7]):
        assert len(r.costs) == 3 and all(c > 0 for c in r.costs)
    assert all(not r.costs for r in res if r.error is not ErrorKind.NONE)
    # the crashed and the hung workers were replaced, and the old ones reaped
    assert not any(alive(p) for p in before if p not in pids(faulty))
    assert all(alive(p) for p in pids(faulty))
    again = faulty.measure([MeasureInput(task, split_steps(task, 8))])
    assert again[0].error is ErrorKind.NONE


def test_invalid_schedules(faulty):
    task = matmul_task()
    bad = [(("SP", 99, 0, [8], True),), (("XX", 1),), (("SP", 2, 0, [0], True),), ("garbage",)]
    res = faulty.measure([MeasureInput(task, b) for b in bad] +
                         [MeasureInput(task, split_steps(task, 8))])
    assert [r.error for r in res[:4]] == [ErrorKind.INVALID_SCHEDULE] * 4
    assert all(r.error_msg for r in res[:4])
    assert res[4].error is ErrorKind.NONE


def test_several_tasks_and_sparse_index_data(faulty):
    mm = matmul_task(32)
    wl = w.get_workload("csr_spmm", M=64, K=64, N=16, density=0.1)
    sp = SearchTask(wl.dag, inputs=wl.index_data)
    res = faulty.measure([MeasureInput(sp, ()), MeasureInput(mm, split_steps(mm, 8)),
                          MeasureInput(sp, ())])
    assert [r.error for r in res] == [ErrorKind.NONE] * 3, [r.error_msg for r in res]


def test_build_timeout():
    task = matmul_task()
    with LocalMeasurer(TuningOptions(build_timeout=0.001, **FAST)) as m:
        res = m.measure([MeasureInput(task, split_steps(task, f)) for f in (8, 16, 4)])
        assert [r.error for r in res] == [ErrorKind.BUILD_TIMEOUT] * 3
        assert "0.001 s" in res[0].error_msg
        m.options.build_timeout = 30.0
        assert m.measure([MeasureInput(task, split_steps(task, 8))])[0].is_valid


def test_flush_cache_times_single_calls():
    task = matmul_task()
    with LocalMeasurer(TuningOptions(flush_cache=True, repeat=4, n_workers=1)) as m:
        (r,) = m.measure([MeasureInput(task, split_steps(task, 8))])
    assert r.error is ErrorKind.NONE, r.error_msg
    assert len(r.costs) == 4


def test_close_gc_and_parent_exceptions_leave_no_process():
    m = LocalMeasurer(TuningOptions(**FAST))
    first = pids(m)
    assert len(first) == 2 and all(alive(p) for p in first)
    with pytest.raises(AttributeError):
        m.measure([MeasureInput(None, ())])  # an exception in the parent: workers are killed
    assert not any(alive(p) for p in first)
    task = matmul_task(16)
    assert m.measure([MeasureInput(task, ())])[0].is_valid  # and restarted on the next call
    second = pids(m)
    m.close()
    m.close()
    assert not any(alive(p) for p in second)
    with pytest.raises(RuntimeError, match="closed"):
        m.measure([MeasureInput(task, ())])
    m = LocalMeasurer(TuningOptions(**FAST))
    third = pids(m)
    tmp = m._dir.path
    del m
    gc.collect()
    assert not any(alive(p) for p in third)
    assert not os.path.exists(tmp)


def test_task_arrays_and_compare():
    wl = w.get_workload("csr_spmm", M=32, K=32, N=8, density=0.2)
    task = SearchTask(wl.dag, inputs=wl.index_data)
    ins, outs = task_arrays(task)
    again, _ = task_arrays(task)
    for t, a, b in zip(task.dag.inputs, ins, again):
        assert np.array_equal(a, b) and a.dtype == t.dtype.np and a.shape == t.shape
        if t.name in wl.index_data:
            assert np.array_equal(a, wl.index_data[t.name])
        else:
            assert np.count_nonzero(a) > 0.9 * a.size
    assert [o.shape for o in outs] == [t.shape for t in task.dag.outputs]
    ref = np.array([[1.0, np.nan], [100.0, -3.0]], np.float32)
    assert compare([ref.copy()], [ref], ["X"]) is None
    assert compare([ref * (1 + 5e-4)], [ref], ["X"]) is None
    assert "1 of 4" in compare([ref + np.array([[0, 0], [0, 0.5]], np.float32)], [ref], ["X"])
    assert compare([np.where(np.isnan(ref), 0, ref)], [ref], ["X"]) is not None
    assert compare([np.array([1, 2])], [np.array([1, 3])], ["I"]) is not None


def test_workers_exit_when_the_parent_is_killed(tmp_path):
    import subprocess
    import sys
    script = ("import os, sys\n"
              "from tecomp.search.measure import LocalMeasurer\n"
              "from tecomp.search.task import TuningOptions\n"
              "m = LocalMeasurer(TuningOptions(n_workers=2))\n"
              "print(*[s.proc.pid for s in m._slots], flush=True)\n"
              "os.kill(os.getpid(), 9)\n")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         cwd=os.getcwd(), timeout=60)
    children = [int(p) for p in out.stdout.split()]
    assert len(children) == 2, out.stderr
    deadline = time.monotonic() + 20
    while any(alive(p) for p in children) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(alive(p) for p in children)


def test_slow_candidates_are_timed_by_one_call():
    task = matmul_task(96)
    # slow_cutoff tiny: every run after the batch's first counts as hopelessly slow
    with LocalMeasurer(TuningOptions(repeat=3, min_repeat_ms=5, n_workers=2, slow_cutoff=1e-9)) as m:
        fast, slow = split_steps(task, 8), tuple(tc.Schedule(task.dag).records())
        res = m.measure([MeasureInput(task, fast), MeasureInput(task, slow),
                         MeasureInput(task, slow, cutoff=0.0)])
    assert len(res[0].costs) == 3
    assert len(res[1].costs) == 1 and res[1].is_valid
    assert len(res[2].costs) == 1 and res[2].is_valid


def test_constant_inputs_are_bound_at_build_and_their_packing_is_not_timed():
    """A task whose weight is a build-time constant (a model's layer): the candidate is built
    with it bound, so its pack stage runs at build time, and it measures right."""
    from tecomp.search.measure_worker import build_candidate, run_candidate
    task0 = matmul_task(48)
    with pytest.raises(ValueError, match="constants names"):
        SearchTask(task0.dag, constants=["nope"])
    task = SearchTask(task0.dag, constants=["B"])
    s = tc.Schedule(task.dag)
    C = task.dag.outputs[0]
    s.cache_read(task.dag.inputs[1], "global", [s[C]], pack=(1, 16))
    steps = tuple(s.records())
    inputs, outputs = task_arrays(task)
    kernel = build_candidate(task, steps, inputs)
    assert kernel.constant_names == ("B",)
    # the packed B is a parameter bound at build time: the timed code has no packing loop
    assert [p.name for p in kernel.func.params] == ["A", "B.global", "matmul"]
    costs = run_candidate(kernel, inputs, outputs, [inputs[0] @ inputs[1]], names=["C"])
    assert len(costs) == 3 and all(c > 0 for c in costs)
    assert build_candidate(task, steps).constant_names == ()  # without the arrays: unbound
    with LocalMeasurer(TuningOptions(**FAST)) as m:
        assert m.measure([MeasureInput(task, steps)])[0].is_valid
