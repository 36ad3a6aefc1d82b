"""Tuning records: JSON round trips that replay to the same loop IR, logs that survive truncation,
garbage and newer versions, best-record selection, ``tc.build(dag, log=...)``, and appends that a
``kill -9`` cannot corrupt."""
import json
import math
import os
import signal
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest

import tecomp as tc
from tecomp.schedule import (
    STEP_KINDS,
    ErrorKind,
    MeasureResult,
    Record,
    Schedule,
    append_records,
    best_record,
    default_cpu_schedule,
    load_records,
)
from tecomp.schedule.records import RECORD_VERSION, measured_keys
from tecomp.testing import workloads as W
from tecomp.testing.step_schedules import EVERY_STEP_KIND

TARGET = str(tc.Target.parse("llvm"))


def _rec(dag_or_key, steps, cost=1e-3, error=ErrorKind.NONE, target=TARGET, **kw):
    key = dag_or_key if isinstance(dag_or_key, str) else dag_or_key.workload_key
    costs = () if cost is None else (cost, cost * 1.1, cost * 0.9)
    return Record(key, target, steps, kw.pop("decisions", {}),
                  MeasureResult(costs, error=error,
                                error_msg="" if error is ErrorKind.NONE else "failed"),
                  **kw)


SCHEDULES = EVERY_STEP_KIND


def test_record_json_round_trip_replays_every_step_kind(tmp_path):
    codes = set()
    path = tmp_path / "log.jsonl"
    made = []
    for n, make in enumerate(SCHEDULES):
        wl, s = make()
        rec = _rec(wl.dag, s.records(), cost=1e-3 * (n + 1), decisions={"tile": [8, 3], "n": n},
                   data_hash="abc", flop_count=1.5e6)
        line = rec.to_json()
        assert "\n" not in line and ", " not in line
        assert list(json.loads(line)) == ["v", "key", "target", "steps", "decisions", "result",
                                          "data", "flops"]
        assert Record.from_json(line) == rec
        append_records(path, [rec])
        made.append((wl, s))
        codes |= {st[0] for st in s.records()}
    assert codes == set(STEP_KINDS), (  # every step kind went through a record
        f"step kinds without a schedule here: {sorted(set(STEP_KINDS) - codes)}")
    loaded = load_records(path)
    assert len(loaded) == len(made)
    for rec, (wl, s) in zip(loaded, made):
        assert rec.workload_key == wl.dag.workload_key and rec.target == TARGET
        assert rec.key == s.key  # the de-dup key survives the file
        assert str(Schedule.from_records(wl.dag, rec.steps).lower()) == str(s.lower())
        assert rec.result.is_valid and rec.flop_count == 1.5e6 and rec.data_hash == "abc"
    assert measured_keys(path) == {s.key for _, s in made}
    assert measured_keys(loaded, workload_key=made[0][0].dag.workload_key) == {made[0][1].key}


def test_measure_result_costs_and_errors():
    ok = MeasureResult((1.0, 3.0))
    assert ok.mean_cost == 2.0 and ok.is_valid and ok.timestamp > 0
    assert MeasureResult(()).mean_cost == math.inf and not MeasureResult(()).is_valid
    bad = MeasureResult((1.0,), error=ErrorKind.RUN_TIMEOUT)
    assert bad.mean_cost == math.inf and not bad.is_valid
    assert MeasureResult((math.inf,)).mean_cost == math.inf
    # non-finite costs are written as null (strict JSON) and read back as infinity
    r = Record("k", "llvm", [], {}, MeasureResult((math.inf,), error="run_error", error_msg="boom"))
    line = r.to_json()
    assert "null" in line and "Infinity" not in line and '"error":"run_error"' in line
    back = Record.from_json(line)
    assert back.result.costs == (math.inf,) and back.result.error is ErrorKind.RUN_ERROR
    assert back.result.error_msg == "boom"


@pytest.mark.parametrize("line, match", [
    ('{"v": 1, "target": "llvm", "steps": [], "result": {"costs": [], "error": "none"}}', "'key'"),
    ('{"v": 1, "key": "k", "target": "llvm", "steps": [], "result": {"costs": []}}', "'error'"),
    ('{"key": "k"}', "version"),
    (f'{{"v": {RECORD_VERSION + 1}, "key": "k"}}', "newer"),
    ('{"v": 1, "key": "k", "target": "llvm", "steps": [], '
     '"result": {"costs": [], "error": "exploded"}}', "unknown error kind"),
    ('{"v": 1, "key": "k", "target": "llvm", "steps": [3], '
     '"result": {"costs": [], "error": "none"}}', "steps"),
    ('[1, 2]', "object"),
    ('{"v": 1, "key": "k", "tar', "JSON"),
])
def test_from_json_rejects_with_clear_messages(line, match):
    with pytest.raises(ValueError, match=match):
        Record.from_json(line)


def test_optional_fields_default():
    r = Record.from_json('{"v":1,"key":"k","target":"llvm","steps":[["CI",1]],'
                         '"result":{"costs":[0.5],"error":"none"}}')
    assert r.decisions == {} and r.data_hash == "" and r.flop_count == 0.0
    assert r.result.mean_cost == 0.5


# ----------------------------------------------------------------------------- damaged logs
def _write_lines(path, recs):
    append_records(path, recs)
    return path.read_text().splitlines(keepends=True)


def test_truncated_last_line_is_skipped_with_a_warning(tmp_path):
    path = tmp_path / "log.jsonl"
    recs = [_rec("wk", [["CI", n]], cost=1e-3 * (n + 1)) for n in range(4)]
    lines = _write_lines(path, recs)
    last = lines[-1]
    path.write_text("".join(lines[:-1]) + last[:len(last) // 2])  # killed mid-line
    with pytest.warns(RuntimeWarning, match=r"log\.jsonl:4:"):
        loaded = load_records(path)
    assert loaded == recs[:3]
    # a resumed tuning appends after the broken line without gluing onto it
    extra = _rec("wk", [["CI", 9]])
    append_records(path, [extra])
    with pytest.warns(RuntimeWarning, match=r"log\.jsonl:4:"):
        assert load_records(path) == recs[:3] + [extra]


def test_garbage_blank_comment_and_newer_lines(tmp_path):
    path = tmp_path / "sub" / "dir" / "log.jsonl"  # parents are created
    a, b = _rec("wk", [["CI", 1]]), _rec("wk", [["CI", 2]])
    append_records(path, [a])
    newer = json.loads(a.to_json())
    newer["v"] = RECORD_VERSION + 1
    with open(path, "a") as f:
        f.write("\n# a comment\n\x00\x01garbage{{\n")
        f.write(json.dumps(newer) + "\n")
    append_records(path, [b])
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        assert load_records(path) == [a, b]
    msgs = [str(x.message) for x in w]
    assert all(issubclass(x.category, RuntimeWarning) for x in w) and len(msgs) == 2
    assert "log.jsonl:4:" in msgs[0] and "JSON" in msgs[0]
    assert "log.jsonl:5:" in msgs[1] and "newer" in msgs[1]


def test_missing_file_raises(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.jsonl"):
        load_records(tmp_path / "nope.jsonl")


def test_append_from_two_batches(tmp_path):
    path = tmp_path / "log.jsonl"
    first = [_rec("wk", [["CI", n]]) for n in range(3)]
    second = [_rec("wk2", [["CR", n]]) for n in range(2)]
    assert append_records(path, first) == 3
    assert append_records(str(path), second) == 2
    assert append_records(path, []) == 0
    assert load_records(path) == first + second
    assert path.read_text().count("\n") == 5


# ----------------------------------------------------------------------------- best record
def test_best_record_picks_lowest_valid_cost_of_the_workload_and_target():
    recs = [
        _rec("wk", [["CI", 1]], cost=3e-3),
        _rec("wk", [["CI", 2]], cost=2e-3, data_hash="d1"),
        _rec("wk", [["CI", 3]], cost=1e-6, error=ErrorKind.WRONG_ANSWER),
        _rec("wk", [["CI", 4]], cost=None),  # no costs
        _rec("other", [["CI", 5]], cost=1e-7),
        _rec("wk", [["CI", 6]], cost=1e-7, target="cuda -arch=sm_90"),
        _rec("wk", [["CI", 7]], cost=1e-7, target="llvm -mcpu=some-other-cpu"),
    ]
    best = best_record(recs, "wk", TARGET, data_hash="unrelated")  # data_hash does not filter
    assert best is recs[1]
    assert best_record(recs, "nothing", TARGET) is None
    assert best_record(recs, "wk", "cuda -arch=sm_90") is recs[5]


def test_best_record_falls_back_to_the_same_target_kind_with_a_warning(tmp_path):
    path = tmp_path / "log.jsonl"
    recs = [_rec("wk", [["CI", 1]], cost=2e-3, target="llvm -mcpu=znver3"),
            _rec("wk", [["CI", 2]], cost=1e-3, target="llvm -mcpu=skylake"),
            _rec("wk", [["CI", 3]], cost=1e-4, target="cuda -arch=sm_80")]
    append_records(path, recs)
    with pytest.warns(UserWarning, match="another CPU"):
        best = best_record(path, "wk", "llvm -mcpu=icelake-server")
    assert best == recs[1]
    with pytest.warns(UserWarning, match="sm_80"):
        assert best_record(path, "wk", "cuda -arch=sm_90") == recs[2]


# ----------------------------------------------------------------------------- tc.build(log=)
@pytest.fixture
def mm():
    wl = W.matmul(33, 20, 17)
    C = wl.dag.outputs[0]
    fast = Schedule(wl.dag)
    i, j = fast[C].axes
    io, ii = fast[C].split(i, factor=4)
    jo, ji = fast[C].split(j, factor=8)
    fast[C].reorder(io, jo, fast[C].reduce_axes[0], ii, ji)
    fast[C].vectorize(ji)
    slow = Schedule(wl.dag)
    slow[C].split(slow[C].axes[1], factor=5)
    return wl, fast, slow


def test_build_from_log_uses_the_best_record_and_computes_right(tmp_path, mm):
    wl, fast, slow = mm
    dag = wl.dag
    path = tmp_path / "log.jsonl"
    append_records(path, [
        _rec(dag, slow.records(), cost=5e-3),
        _rec(dag, [["SP", 1, 1, [2], True]], cost=1e-9, error=ErrorKind.BUILD_ERROR),
        _rec("another-workload", slow.records(), cost=1e-9),
        _rec(dag, fast.records(), cost=1e-3),
        _rec(dag, slow.records(), cost=1e-9, target="cuda -arch=sm_90"),
    ])
    k = tc.build(dag, "llvm", log=path)
    assert str(k.func) == str(fast.lower())
    inputs = wl.make_inputs(np.random.default_rng(0))
    np.testing.assert_allclose(k(*inputs), wl.reference(inputs)[0], rtol=1e-4, atol=1e-4)
    # a log appended to later is re-read
    append_records(path, [_rec(dag, slow.records(), cost=1e-4)])
    assert str(tc.build(dag, log=str(path)).func) == str(slow.lower())


def test_build_skips_a_best_record_that_does_not_replay(tmp_path, mm):
    wl, fast, _ = mm
    path = tmp_path / "log.jsonl"
    append_records(path, [_rec(wl.dag, [["SP", 1, 7, [4], True]], cost=1e-6),  # no loop 7
                          _rec(wl.dag, [["ZZ", 1]], cost=2e-6),  # a step kind we don't know
                          _rec(wl.dag, fast.records(), cost=1e-3)])
    with pytest.warns(UserWarning, match="do not replay"):
        k = tc.build(wl.dag, log=path)
    assert str(k.func) == str(fast.lower())
    # none replays: an error naming why
    bad = tmp_path / "bad.jsonl"
    append_records(bad, [_rec(wl.dag, [["ZZ", 1]], cost=2e-6)])
    with pytest.raises(LookupError, match="replays"):
        tc.build(wl.dag, log=bad)


def test_build_missing_workload(tmp_path, mm):
    wl, fast, _ = mm
    path = tmp_path / "log.jsonl"
    append_records(path, [_rec("some-other-key", fast.records()),
                          _rec("some-other-key", fast.records(), cost=2e-3)])
    with pytest.raises(LookupError) as ei:
        tc.build(wl.dag, log=path)
    msg = str(ei.value)
    assert wl.dag.workload_key in msg and TARGET in msg
    assert "2 record(s)" in msg and "some-other-key" in msg and "on_missing" in msg
    with pytest.warns(UserWarning, match="default schedule"):
        k = tc.build(wl.dag, log=path, on_missing="default")
    assert str(k.func) == str(tc.lower(default_cpu_schedule(wl.dag)))
    inputs = wl.make_inputs(np.random.default_rng(1))
    np.testing.assert_allclose(k(*inputs), wl.reference(inputs)[0], rtol=1e-4, atol=1e-4)
    # only failed measurements for it
    failed = tmp_path / "failed.jsonl"
    append_records(failed, [_rec(wl.dag, fast.records(), error=ErrorKind.RUN_TIMEOUT)])
    with pytest.raises(LookupError, match="failed"):
        tc.build(wl.dag, log=failed)
    with pytest.raises(FileNotFoundError):
        tc.build(wl.dag, log=tmp_path / "missing.jsonl", on_missing="default")


def test_build_argument_validation(tmp_path, mm):
    wl, fast, _ = mm
    with pytest.raises(ValueError, match="not both"):
        tc.build(wl.dag, schedule=fast, log=tmp_path / "x.jsonl")
    with pytest.raises(ValueError, match="on_missing"):
        tc.build(wl.dag, log=tmp_path / "x.jsonl", on_missing="ignore")


# ----------------------------------------------------------------------------- kill -9
_WRITER = textwrap.dedent("""
    import sys
    from tecomp.schedule.records import MeasureResult, Record, append_records
    path, n = sys.argv[1], 0
    while True:
        batch = [Record("wk", "llvm -mcpu=x", [["SP", 1, 0, [n + b + 1], True]], {"n": n + b},
                        MeasureResult((1e-3,), build_seconds=0.1), flop_count=1e6)
                 for b in range(7)]
        append_records(path, batch)
        n += len(batch)
        print(n, flush=True)
""")


def test_kill_9_during_appends_loses_nothing_appended(tmp_path):
    path = tmp_path / "log.jsonl"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [os.path.dirname(os.path.dirname(tc.__file__)), os.environ.get("PYTHONPATH", "")]))
    p = subprocess.Popen([sys.executable, "-c", _WRITER, str(path)], stdout=subprocess.PIPE,
                         text=True, env=env)
    try:
        reported = 0
        while reported < 200:
            line = p.stdout.readline()
            assert line, "the writer died"
            reported = int(line)
        os.kill(p.pid, signal.SIGKILL)
    finally:
        if p.poll() is None:
            os.kill(p.pid, signal.SIGKILL)
        p.wait()
        p.stdout.close()
    assert p.returncode == -signal.SIGKILL
    raw = path.read_bytes()
    complete = raw.count(b"\n")
    with warnings.catch_warnings(record=True) as w:  # at most one truncated-line warning
        warnings.simplefilter("always")
        recs = load_records(path)
    assert len(w) <= 1 and (len(w) == 0) == raw.endswith(b"\n")
    ns = [r.decisions["n"] for r in recs]
    assert ns == list(range(len(ns)))  # nothing lost, nothing out of order
    # every complete line loads, and every batch reported as appended is there
    assert len(recs) == complete >= reported
    assert best_record(recs, "wk", "llvm -mcpu=x").result.is_valid


def test_a_records_key_is_made_once_and_a_copy_gets_its_own():
    import dataclasses
    import pickle
    rec = Record("w" * 32, "llvm", [["SP", 2, 0, [8], True]], {}, MeasureResult([1e-3]))
    assert rec.key == '[["SP",2,0,[8],true]]' and rec.key is rec.key
    other = dataclasses.replace(rec, steps=[["CI", 1]])
    assert other.key == '[["CI",1]]' and rec.key == '[["SP",2,0,[8],true]]'
    assert other != rec and pickle.loads(pickle.dumps(rec)) == rec
    assert Record.from_json(rec.to_json()) == rec
