"""Issue 16, items 6-9: tuning logs never lose work and never take a tuning down.

Unwritable logs fail before anything is measured; a deeply nested or impossible line is skipped
with a warning; impossible options are refused at construction; a second tuning of a log in use
is refused.
"""
import json
import os
import subprocess
import sys
import warnings

import numpy as np
import pytest

import tecomp as tc
from tecomp.schedule.log_schedule import schedule_from_log
from tecomp.schedule.records import (
    ErrorKind,
    MeasureResult,
    Record,
    append_records,
    load_records,
)
from tecomp.search.cost_model import RandomModel
from tecomp.search.log_lock import LogBusyError, LogLock
from tecomp.search.measure import LocalMeasurer
from tecomp.testing import workloads as W

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FAST = dict(population=16, generations=1, measures_per_round=4, repeat=2, min_repeat_ms=2,
            verbose=False)


class CountingMeasurer:
    """A real LocalMeasurer that counts what it was asked to measure."""

    def __init__(self):
        self.inner, self.asked = LocalMeasurer(tc.TuningOptions(**FAST)), 0

    def measure(self, inputs):
        self.asked += len(inputs)
        return self.inner.measure(inputs)

    def close(self):
        self.inner.close()


@pytest.fixture(scope="module")
def mm():
    wl = W.matmul(16, 16, 16)
    return wl, tc.SearchTask(wl.dag)


# ------------------------------------------------------------------------- 6: unwritable log
@pytest.mark.parametrize("where", ["a directory", "under a file"])
def test_unwritable_log_fails_before_anything_is_measured(tmp_path, mm, where):
    (tmp_path / "file.txt").write_text("x")
    log = tmp_path if where == "a directory" else tmp_path / "file.txt" / "log.jsonl"
    m = CountingMeasurer()
    try:
        with pytest.raises(OSError, match=r"tuning log .* cannot be written: "):
            tc.tune(mm[1], trials=4, log=str(log), options=tc.TuningOptions(**FAST),
                    cost_model=RandomModel(0), measurer=m)
        with pytest.raises(OSError, match="cannot be written"):
            tc.tune_tasks([mm[1]], trials=4, log=str(log), options=tc.TuningOptions(**FAST),
                          measurer=m)
    finally:
        m.close()
    assert m.asked == 0


# ------------------------------------------------------------------------- 7: deep JSON lines
def _good_line(mm, cost=1e-3, costs=None, error="none") -> str:
    wl, task = mm
    steps = tc.Schedule(wl.dag).records()
    res = MeasureResult(costs=(cost,) if costs is None else costs, error=error)
    return Record(task.workload_key, str(task.target), steps, {}, res).to_json()


def test_a_deeply_nested_line_is_skipped_with_a_warning(tmp_path, mm):
    log = tmp_path / "deep.jsonl"
    log.write_text("[" * 100000 + "]" * 100000 + "\n" + _good_line(mm) + "\n"
                   + '{"v":1,"key":' + "[" * 50000 + "\n")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        recs = load_records(log)
    assert len(recs) == 1
    msgs = [str(w.message) for w in caught]
    assert len(msgs) == 2 and all("nested too deeply" in m for m in msgs)
    assert "deep.jsonl:1:" in msgs[0] and "deep.jsonl:3:" in msgs[1]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        assert schedule_from_log(mm[0].dag, log, mm[1].target) is not None  # tc.build's path
        k = tc.build(mm[0].dag, log=str(log))
    x = mm[0].make_inputs(np.random.default_rng(0))
    np.testing.assert_allclose(k(*x), mm[0].reference(x)[0], rtol=1e-4, atol=1e-4)
    p = subprocess.run([sys.executable, "-m", "tecomp.cli", "best", str(log)], cwd=tmp_path,
                       capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, PYTHONPATH=ROOT))
    assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr
    assert "nested too deeply" in p.stderr and mm[1].workload_key[:16] in p.stdout


# ------------------------------------------------------------------------- 8: impossible records
@pytest.mark.parametrize("costs, error, why", [
    ((0.0,), "none", "positive seconds"), ((-1.0,), "none", "positive seconds"),
    ((), "none", "without error must have costs")])
def test_impossible_records_are_skipped_at_read(tmp_path, mm, costs, error, why):
    log = tmp_path / "bad.jsonl"
    bad = _good_line(mm, costs=(1e-3,), error=error)
    obj = json.loads(bad)
    obj["result"]["costs"] = list(costs)
    log.write_text(json.dumps(obj) + "\n" + _good_line(mm, cost=2e-3) + "\n")
    with pytest.warns(RuntimeWarning, match=why):
        recs = load_records(log)
    assert [r.cost for r in recs] == [2e-3]


@pytest.mark.parametrize("opt", [dict(population=0), dict(measures_per_round=0),
                                 dict(repeat=0), dict(n_workers=0), dict(eps_greedy=1.5),
                                 dict(run_timeout=0.0), dict(build_timeout=float("inf"))])
def test_impossible_options_are_refused_at_construction(opt):
    name = next(iter(opt))
    with pytest.raises(ValueError, match=rf"TuningOptions\.{name} must be"):
        tc.TuningOptions(**opt)


# ------------------------------------------------------------------------- 9: two writers
def test_a_second_tuning_of_a_log_in_use_is_refused(tmp_path, mm):
    log = tmp_path / "busy.jsonl"
    m = CountingMeasurer()
    try:
        with LogLock(log):
            with pytest.raises(LogBusyError, match="being written by another tuning"):
                tc.tune(mm[1], trials=4, log=str(log), options=tc.TuningOptions(**FAST),
                        cost_model=RandomModel(0), measurer=m)
        assert m.asked == 0
        # another process holding the lock is seen too
        code = (f"import sys, time; from tecomp.search.log_lock import LogLock\n"
                f"with LogLock({str(log)!r}):\n    print('held', flush=True); time.sleep(60)")
        p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
                             env=dict(os.environ, PYTHONPATH=ROOT))
        try:
            assert p.stdout.readline().strip() == "held"
            with pytest.raises(LogBusyError):
                tc.tune_tasks([mm[1]], trials=4, log=str(log), options=tc.TuningOptions(**FAST),
                              measurer=m)
        finally:
            p.kill()
            p.wait()
        # released: the tuning runs and logs
        res = tc.tune(mm[1], trials=4, log=str(log), options=tc.TuningOptions(**FAST),
                      cost_model=RandomModel(0), measurer=m)
        assert res.trials == 4 and len(load_records(log)) == 4
    finally:
        m.close()


def test_records_round_trip_unchanged(tmp_path, mm):
    log = tmp_path / "ok.jsonl"
    append_records(log, [Record.from_json(_good_line(mm, cost=c)) for c in (1e-3, 5e-4)])
    assert [r.cost for r in load_records(log)] == [1e-3, 5e-4]
    assert ErrorKind.NONE is load_records(log)[0].result.error


def test_a_log_with_a_byte_order_mark_keeps_its_first_record(tmp_path, mm):
    log = tmp_path / "bom.jsonl"
    log.write_bytes(b"\xef\xbb\xbf" + (_good_line(mm, cost=1e-3) + "\n").encode())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert [r.cost for r in load_records(log)] == [1e-3]
