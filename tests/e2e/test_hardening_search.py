"""Issue 16, item 10: a search never dies from one candidate or one mutation.

The layer normalization (sum -> mean -> sum of squared deviations -> normalize) has two sketches
named ``tile+rfactor`` (one per reduction); its measured programs were looked up by name, came
back as the other sketch's, and ``mutate`` raised ``KeyError`` on their tile decisions.
"""
import json

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tecomp as tc
from tecomp.schedule.records import MeasureResult, Record, append_records, load_records
from tecomp.search.cost_model import RandomModel
from tecomp.search.evolution import EvolutionarySearch, mutate
from tecomp.search.measure import LocalMeasurer
from tecomp.search.target_search import materialize
from tecomp.testing.random_dags import layer_norm_dag, random_dags

FAST = dict(population=16, generations=1, measures_per_round=8, repeat=1, min_repeat_ms=1,
            verbose=False)


def _check_log(dag, make_inputs, reference, log):
    x = make_inputs(np.random.default_rng(1))
    k = tc.build(dag, log=str(log))
    got = k(*x)
    got = got if isinstance(got, tuple) else (got,)
    for g, r in zip(got, reference(x)):
        np.testing.assert_allclose(g, r, rtol=2e-3, atol=2e-3)


def test_measured_programs_of_same_named_sketches_come_back_to_their_sketch():
    dag, _, _ = layer_norm_dag()
    task = tc.SearchTask(dag)
    search = EvolutionarySearch(task, tc.TuningOptions(**FAST), RandomModel(0))
    names = [sk.name for sk in search.sketches]
    assert len(set(names)) < len(names)  # the DAG that crashed has repeated sketch names
    assert len(set(search.sketch_names)) == len(names)
    rng = np.random.default_rng(0)
    for i in range(len(search.sketches)):
        c = None
        while c is None:
            c = materialize(task, i, search.sketches[i], {}, rng)
        search.tell([c], [MeasureResult(costs=(1e-3 * (i + 1),))])
        assert search.sketch_index(search.decisions_of(c).sketch) == i
    picked = search.ask(8)  # mutates the elites of every sketch: raised KeyError before
    assert picked and search.failures == 0
    for c in picked:
        for _ in range(5):
            mutate(task, search.sketches, c, rng)


@pytest.mark.slow
def test_tune_the_layer_norm_and_build_from_its_log(tmp_path):
    dag, make_inputs, reference = layer_norm_dag(16, 96)
    log = tmp_path / "ln.jsonl"
    res = tc.tune(tc.SearchTask(dag), trials=8, log=str(log), options=tc.TuningOptions(**FAST),
                  cost_model=RandomModel(0))
    assert res.trials == 8 and np.isfinite(res.best_cost)
    _check_log(dag, make_inputs, reference, log)


def test_crafted_decisions_in_a_resumed_log_do_not_stop_the_search(tmp_path):
    dag, make_inputs, reference = layer_norm_dag(8, 32)
    task = tc.SearchTask(dag)
    steps = tc.Schedule(dag).records()
    bad = [{"sketch": "tile", "tile": {"x": "junk"}}, {"sketch": "tile+rfactor", "loc": 5},
           {"sketch": "tile", "tile": {"1": [0, -1]}, "unroll": [1, 2]}]
    log = tmp_path / "crafted.jsonl"
    append_records(log, [Record(task.workload_key, str(task.target), steps + [["PR", 0, 0,
                                "auto_unroll_max_step", n]], d, MeasureResult(costs=(1e-3,)))
                         for n, d in enumerate(bad)])
    res = tc.tune(task, trials=8, log=str(log), options=tc.TuningOptions(**FAST),
                  cost_model=RandomModel(0))
    assert res.trials == 8
    assert len(load_records(log)) == 8 + len(bad)
    assert all(json.loads(r.to_json()) for r in load_records(log))


@pytest.mark.slow
def test_tune_the_issue_layer_norm_512x768(tmp_path):
    dag, make_inputs, reference = layer_norm_dag()
    log = tmp_path / "ln.jsonl"
    opts = dict(FAST, population=64, generations=2, measures_per_round=16)
    res = tc.tune(tc.SearchTask(dag), trials=64, log=str(log), options=tc.TuningOptions(**opts),
                  cost_model=RandomModel(0))
    assert res.trials == 64
    _check_log(dag, make_inputs, reference, log)


@pytest.fixture(scope="module")
def measurer():
    m = LocalMeasurer(tc.TuningOptions(**FAST))
    yield m
    m.close()


@pytest.mark.slow
@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(case=random_dags(max_stages=5, dtypes=("float32",)), seed=st.integers(0, 2**16))
def test_random_dags_tune_without_dying(case, seed, measurer):
    dag, make_inputs = case
    data = make_inputs(np.random.default_rng(seed))
    index_data = {t.name: a for t, a in zip(dag.inputs, data) if t.dtype.is_int}
    opts = tc.TuningOptions(**dict(FAST, seed=seed))
    res = tc.tune(tc.SearchTask(dag, inputs=index_data), trials=16, options=opts,
                  cost_model=RandomModel(seed), measurer=measurer)
    assert res.trials > 0
