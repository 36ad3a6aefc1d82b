"""A log carried from another CPU: its best programs seed the search here, and the learned model
trains on their order from the first round (``TuningOptions.cross_target_seeds``)."""
import dataclasses
import shutil

import numpy as np
import pytest

import tecomp as tc
from tecomp.schedule.records import append_records, load_records
from tecomp.search.cost_model import RandomModel
from tecomp.search.tune import TaskTuner
from tecomp.testing import workloads as W

# panel seeds off: these tests count the carried log's seeds and the model's first training
FAST = dict(population=24, generations=1, measures_per_round=8, repeat=2, min_repeat_ms=2,
            verbose=False, panel_seeds=0)
OTHER_CPU = "llvm -mcpu=icelake-server -mattr=+avx,+avx2,+fma"
# one worker under `pytest -n 2 --dist loadgroup`: the carried log (`_carried_once`) is tuned once
pytestmark = pytest.mark.xdist_group("cross_target")


def _other_cpu_log(tmp_path, task, trials=24):
    """A log of ``task`` measured here, relabelled as tuned on another CPU, with made-up costs
    that rank the programs in reverse log order (so that "best" is not what a search here would
    find first on its own)."""
    here = str(tmp_path / "here.jsonl")
    tc.tune(task, trials=trials, log=here, options=tc.TuningOptions(**FAST, seed=3),
            cost_model=RandomModel(3))
    recs = load_records(here)
    moved = [dataclasses.replace(r, target=OTHER_CPU,
                                 result=dataclasses.replace(r.result, costs=[1e-3 / (i + 1)]))
             for i, r in enumerate(recs) if r.result.is_valid]
    log = str(tmp_path / "carried.jsonl")
    append_records(log, moved)
    return log, moved[::-1]  # best first


@pytest.fixture(scope="module")
def _carried_once(tmp_path_factory):
    """The carried log of a 32x32x32 matmul, tuned once per module (24 trials: the cost of
    these tests)."""
    return _other_cpu_log(tmp_path_factory.mktemp("carried"), tc.SearchTask(W.matmul(32, 32, 32).dag))


@pytest.fixture
def carried(_carried_once, tmp_path):
    """``(log, best first)``: a copy of the carried log of its own for each test (they tune into
    it and append to it)."""
    log, best_first = _carried_once
    mine = str(tmp_path / "carried.jsonl")
    shutil.copyfile(log, mine)
    return mine, best_first


def test_the_first_round_measures_the_other_cpus_best_programs(carried):
    wl = W.matmul(32, 32, 32)
    task = tc.SearchTask(wl.dag)
    log, best_first = carried
    res = tc.tune(task, trials=8, log=log, options=tc.TuningOptions(**FAST, seed=11),
                  cost_model=RandomModel(11))
    assert res.trials == 8
    mine = [r for r in load_records(log) if r.target == str(task.target)]
    assert len(mine) == 8
    # a round of 8 has 7 model picks, of which up to half (3) are the carried log's best
    assert {r.key for r in best_first[:3]} <= {r.key for r in mine}
    # the carried records do not count as measured here, and the new ones build and run right
    x = wl.make_inputs(np.random.default_rng(0))
    k = tc.build(wl.dag, log=log)
    np.testing.assert_allclose(k(*x), wl.reference(x)[0], rtol=1e-4, atol=1e-4)


def test_without_seeds_the_carried_log_is_not_used(carried):
    task = tc.SearchTask(W.matmul(32, 32, 32).dag)
    log, _ = carried
    tuner = TaskTuner(task, tc.TuningOptions(**FAST, cross_target_seeds=0), RandomModel(0), log)
    assert tuner.search.seeds == [] and tuner.resumed == 0
    tuner = TaskTuner(task, tc.TuningOptions(**FAST, cross_target_seeds=2), RandomModel(0), log)
    assert len(tuner.search.seeds) == 2 and tuner.resumed == 0


def test_the_learned_model_trains_on_the_other_cpu_in_a_group_of_its_own(carried):
    pytest.importorskip("xgboost")
    from tecomp.search.xgb_model import XGBModel
    task = tc.SearchTask(W.matmul(32, 32, 32).dag)
    log, best_first = carried
    model = XGBModel(task)
    tuner = TaskTuner(task, tc.TuningOptions(**FAST), model, log)
    assert model.n_valid == len(best_first) and model.booster is None
    assert set(model.groups) == {f"{task.workload_key} @ {OTHER_CPU}"}
    picks = tuner.search.ask(8)  # the first prediction trains on them
    assert model.booster is not None and len(picks) == 8
    # the model learned the carried order: the best carried program outscores the worst
    from tecomp.search.record_candidates import candidates_from_records
    cands, _, _ = candidates_from_records(task.dag, [best_first[0], best_first[-1]])
    hi, lo = model.predict(cands)
    assert hi > lo


def test_a_damaged_carried_record_seeds_nothing(carried):
    task = tc.SearchTask(W.matmul(32, 32, 32).dag)
    log, best_first = carried
    bad = dataclasses.replace(best_first[0], decisions={"sketch": 7, "tiles": "nonsense"},
                              result=dataclasses.replace(best_first[0].result, costs=[1e-9]))
    append_records(log, [bad])
    res = tc.tune(task, trials=8, log=log, options=tc.TuningOptions(**FAST),
                  cost_model=RandomModel(0))
    assert res.trials == 8 and res.best_schedule is not None
