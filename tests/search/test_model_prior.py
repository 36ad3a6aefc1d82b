"""The cost model's prior: the shipped files, their checks, and a model that ranks before its
task's first measurement."""
import math

import numpy as np
import pytest

from tecomp.search.feature_layout import FEATURE_LEN
from tecomp.search.model_prior import ModelPrior, cpu_prior, load_prior, prior_path, save_prior
from tecomp.search.task import HardwareParams, SearchTask, TuningOptions
from tecomp.testing import workloads as W


@pytest.mark.parametrize("vector_bytes", [32, 64])
def test_the_shipped_priors_load_with_this_feature_layout(vector_bytes):
    p = cpu_prior(HardwareParams(num_cores=2, vector_bytes=vector_bytes))
    assert p is not None and len(p) >= 1000
    assert all(f.ndim == 2 and f.shape[1] == FEATURE_LEN and f.shape[0] >= 1 for f in p.feats)
    assert len(set(p.groups)) >= 20  # operators times tuning runs
    assert np.isfinite(p.costs).mean() > 0.8
    # no prior for a width nothing was measured on
    assert prior_path(16) is None
    assert cpu_prior(HardwareParams(num_cores=2, vector_bytes=16)) is None


def _tiny(rng, n=6, groups=("a", "b")):
    feats = [rng.random((int(rng.integers(1, 4)), FEATURE_LEN)).astype(np.float32)
             for _ in range(n)]
    costs = rng.random(n) + 0.1
    costs[0] = math.inf
    return feats, costs, [groups[i % len(groups)] for i in range(n)]


def test_a_prior_round_trips_and_leaves_groups_out(tmp_path):
    feats, costs, groups = _tiny(np.random.default_rng(0))
    save_prior(tmp_path / "p.npz", feats, costs, groups)
    p = load_prior(tmp_path / "p.npz")
    assert p.name == "p" and len(p) == 6 and p.groups == tuple(groups)
    assert all(np.array_equal(a, b) for a, b in zip(p.feats, feats))
    assert math.isinf(p.costs[0]) and np.allclose(p.costs[1:], costs[1:])
    q = p.without("a")
    assert isinstance(q, ModelPrior) and q.groups == ("b", "b", "b") and len(q.costs) == 3


def test_a_damaged_prior_file_is_a_clear_error(tmp_path):
    bad = tmp_path / "bad.npz"
    bad.write_bytes(b"not an npz")
    with pytest.raises(ValueError, match="not a cost-model prior"):
        load_prior(bad)
    feats, costs, groups = _tiny(np.random.default_rng(1))
    wrong = [f[:, :10] for f in feats]  # another feature layout
    save_prior(tmp_path / "narrow.npz", wrong, costs, groups)
    with pytest.raises(ValueError, match="feature"):
        load_prior(tmp_path / "narrow.npz")
    # an object array (a pickle) is refused, not unpickled
    np.savez(tmp_path / "obj.npz", X=np.array([object()], dtype=object), rows=[1], costs=[1.0],
             group=[0], names=["a"])
    with pytest.raises(ValueError, match="not a cost-model prior"):
        load_prior(tmp_path / "obj.npz")
    with pytest.raises(ValueError, match="length"):
        save_prior(tmp_path / "x.npz", feats, costs[:2], groups)


def test_the_model_ranks_from_the_prior_and_retrains_on_its_own_samples():
    pytest.importorskip("xgboost")
    from tecomp.search.xgb_model import XGBModel
    rng = np.random.default_rng(3)
    # a synthetic rule: throughput grows with feature 5 (prior and task alike)
    def program(v):
        f = rng.random((2, FEATURE_LEN)).astype(np.float32)
        f[:, 5] = v
        return f
    vals = rng.random(300) * 4
    prior = ModelPrior("t", tuple(program(v) for v in vals), 1.0 / (1.0 + vals),
                       tuple(f"op{i % 3}" for i in range(300)))
    m = XGBModel(seed=0, num_boost_round=60)
    assert m.add_prior(prior) == 300 and m.add_prior(prior) == 0  # once only
    assert m.n_prior == 300 and m._should_train()
    test_vals = rng.random(40) * 4
    m.train()
    pred = m.predict_features([program(v) for v in test_vals])
    assert np.corrcoef(pred, test_vals)[0, 1] > 0.8  # it ranks before any own measurement
    trainings = m.n_trainings
    for k in range(16):  # one round of the task's own: retrains, though 16 << 300
        m.add_sample(f"own{k}", program(k / 4), 1.0 / (1.0 + k / 4), "task")
    assert m._should_train()
    m.train()
    assert m.n_trainings == trainings + 1 and not m._should_train()
    m.add_sample("own-more", program(1.0), 0.5, "task")
    assert not m._should_train()  # 1 new < 10% of its 16 own samples


def test_default_models_take_the_prior_unless_told_not():
    pytest.importorskip("xgboost")
    from tecomp.search.tune import default_cost_model
    task = SearchTask(W.matmul(16, 16, 16).dag)
    shipped = cpu_prior(task.hardware)
    with_prior = default_cost_model(task, TuningOptions(verbose=False))
    without = default_cost_model(task, TuningOptions(verbose=False, model_prior=False))
    assert without.n_prior == 0 and without.keys == []
    assert with_prior.n_prior == (len(shipped) if shipped is not None else 0)
    with pytest.raises(ValueError, match="model_prior"):
        TuningOptions(model_prior="yes")


def test_a_model_with_a_prior_saves_and_loads(tmp_path):
    pytest.importorskip("xgboost")
    from tecomp.search.xgb_model import XGBModel
    feats, costs, groups = _tiny(np.random.default_rng(4), n=40, groups=("a", "b", "c"))
    save_prior(tmp_path / "p.npz", feats, costs, groups)
    m = XGBModel(seed=0)
    m.add_prior(load_prior(tmp_path / "p.npz"))
    assert m.num_boost_round == 150  # fewer rounds on a prior's many programs
    m.add_sample("own", feats[1], 0.5, "task")
    m.train()
    m.save(tmp_path / "m.npz")
    back = XGBModel.from_file(tmp_path / "m.npz")
    assert back.n_prior == 40 and back.num_boost_round == 150 and len(back.keys) == 41
    assert np.allclose(back.predict_features(feats[:5]), m.predict_features(feats[:5]))
    assert XGBModel(seed=0, num_boost_round=300).num_boost_round == 300


def test_a_first_training_on_the_prior_alone_is_shared_within_the_process():
    pytest.importorskip("xgboost")
    from tecomp.search.xgb_model import XGBModel
    feats, costs, groups = _tiny(np.random.default_rng(5), n=60, groups=("a", "b", "c"))
    prior = ModelPrior("shared", tuple(feats), costs, tuple(groups))
    first = XGBModel(seed=7, num_boost_round=40)
    first.add_prior(prior)
    first.train()
    again = XGBModel(seed=7, num_boost_round=40)
    again.add_prior(prior)
    again.train()
    # the same booster, not retrained: same scores, and its own copy
    assert again.booster is not first.booster
    assert np.array_equal(again.predict_features(feats), first.predict_features(feats))
    # what decides the booster is in the key: another seed, other costs or an own sample train anew
    other_seed = XGBModel(seed=8, num_boost_round=40)
    other_seed.add_prior(prior)
    changed = ModelPrior("shared", tuple(feats), costs * np.linspace(1, 3, 60), tuple(groups))
    other_costs = XGBModel(seed=7, num_boost_round=40)
    other_costs.add_prior(changed)
    own = XGBModel(seed=7, num_boost_round=40)
    own.add_prior(prior)
    own.add_sample("own", feats[1], 0.5, "task")
    fresh = XGBModel(seed=7, num_boost_round=40)
    fresh.add_prior(prior)
    keys = {m._prior_only_key() for m in (fresh, other_seed, other_costs)}
    assert len(keys) == 3 and None not in keys and own._prior_only_key() is None
    own.train()  # with its own sample: a training of its own, then none shared
    assert own._prior_only_key() is None and first._prior_only_key() is None
