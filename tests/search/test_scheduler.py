"""The task scheduler: budgets, weights, warm-up, and the network layer sets."""
import pytest

import tecomp as tc
from tecomp.search.cost_model import RandomModel
from tecomp.search.scheduler import _gradient, task_kind
from tecomp.testing import workloads as W
from tecomp.testing.networks import layer_set, layer_specs

FAST = dict(population=16, generations=1, measures_per_round=4, repeat=2, min_repeat_ms=2,
            verbose=False)


def test_layer_sets_have_the_known_flop_totals():
    def gflop(name):
        return sum(w.dag.flop_count() * c for w, c in layer_set(name)) / 1e9
    assert gflop("resnet18") == pytest.approx(3.63, abs=0.02)
    assert gflop("resnet50") == pytest.approx(8.18, abs=0.03)
    assert gflop("mobilenet_v2") == pytest.approx(0.60, abs=0.01)
    assert sum(c for _, c in layer_specs("resnet50")) == 54  # 53 convs + fc
    with pytest.raises(ValueError, match="unknown network"):
        layer_specs("vgg")


def test_a_winograd_layer_set_holds_the_3x3_stride_1_layers_only():
    from tecomp.workloads.networks import method_applies
    wino = layer_set("resnet50", method="winograd")
    assert [(w.params["C"], w.params["H"], c) for w, c in wino] == \
        [(64, 56, 3), (128, 28, 3), (256, 14, 5), (512, 7, 2)]
    assert all(w.dag.outputs[0].op.tag == "conv2d_winograd" for w, _ in wino)
    assert method_applies(("conv", 64, 56, 64, 3, 1, 1, 1), "winograd")
    assert not method_applies(("conv", 64, 56, 64, 3, 2, 1, 1), "winograd")
    assert not method_applies(("conv", 64, 56, 64, 3, 1, 1, 64), "winograd")
    assert not method_applies(("dense", 2048, 1000), "winograd")
    assert method_applies(("dense", 2048, 1000), "implicit_gemm")


@pytest.mark.parametrize("strategy", ["gradient", "round-robin"])
def test_tune_tasks_spends_the_budget_and_warms_up_every_task(tmp_path, strategy):
    tasks = [tc.SearchTask(W.matmul(n, n, n).dag) for n in (16, 24, 32)]
    # a warm-up round each, then one the strategy gives
    res = tc.tune_tasks(tasks, trials=16, log=str(tmp_path / "net.jsonl"), weights=[1, 2, 3],
                        options=tc.TuningOptions(**FAST), strategy=strategy,
                        cost_model_factory=lambda t: RandomModel(0))
    assert sum(res.allocation) == 16 and all(a >= 4 for a in res.allocation)
    assert all(r.best_schedule is not None for r in res.results)
    assert res.history[-1][0] == 16 and res.weighted_latency > 0
    lat = [h[1] for h in res.history[len(tasks) - 1:]]
    assert all(b <= a for a, b in zip(lat, lat[1:]))  # best latencies never get worse


class _Result:
    def __init__(self, cost, trials):
        self.best_cost, self.trials = cost, trials


class _Tuner:
    """What ``_gradient`` reads of a TaskTuner: best cost, trials, FLOPs and the compute tag."""

    def __init__(self, cost, trials, flops, tag="conv"):
        self.result, self.flops = _Result(cost, trials), flops
        self.task = type("t", (), {"dag": type("d", (), {"compute_stages": [], "outputs": [
            type("o", (), {"op": type("op", (), {"tag": tag})})]})})


def test_a_resumed_network_tuning_does_not_warm_up_again(tmp_path):
    tasks = [tc.SearchTask(W.matmul(n, n, n).dag) for n in (16, 24, 32)]
    log = str(tmp_path / "net.jsonl")
    opt = tc.TuningOptions(**{**FAST, "measures_per_round": 2}, eps_greedy=0.0)  # rounds of 2
    tc.tune_tasks(tasks, trials=6, log=log, options=opt,
                  cost_model_factory=lambda t: RandomModel(0))
    # resumed: every task has its round in the log, so the budget follows the gradient, and a
    # weight of 0 leaves tasks 0 and 1 none of it (a warm-up would go to them first). Measured
    # latencies do not decide it: under load they are noisy enough to outweigh a finite ratio.
    res = tc.tune_tasks(tasks, trials=4, log=log, weights=[0, 0, 1], options=opt,
                        cost_model_factory=lambda t: RandomModel(0))
    assert res.allocation == [0, 0, 4]
    with pytest.raises(ValueError, match="finite and >= 0"):
        tc.tune_tasks(tasks, trials=4, weights=[1, -1, 1], options=opt)


def test_gradient_prefers_heavy_tasks_and_tasks_without_a_valid_result():
    tuners = [_Tuner(1e-3, 16, 1e8), _Tuner(1e-3, 16, 1e8), _Tuner(float("inf"), 16, 1e8)]
    hist = [[1e-3], [1e-3], [float("inf")]]
    g = [_gradient(i, tuners, [1, 10, 1], hist) for i in range(3)]
    assert g[1] < g[0] < 0 and g[2] == float("-inf")


def test_a_task_far_behind_its_similar_tasks_is_expected_to_catch_up():
    # two layers of one FLOP count: one at 160 GFLOP/s, one at 20 after its first round; the
    # lagging one is expected to reach 80 (1/BETA of 160) in its next round, far more than
    # 1/trials of it
    tuners = [_Tuner(1e9 / 160e9, 64, 1e9), _Tuner(1e9 / 20e9, 16, 1e9)]
    hist = [[t.result.best_cost] for t in tuners]
    g = [_gradient(i, tuners, [1, 1], hist) for i in range(2)]
    assert g[1] < g[0] < 0
    assert g[1] == pytest.approx(0.8 * (1e9 / 80e9 - 1e9 / 20e9) / 16)  # rounds of 16 trials


def test_tasks_compare_flop_rates_only_with_tasks_that_compute_alike():
    """A fused group's output tag is its epilogue's: a softmax ending in a select and a matmul
    ending in a bias add both end 'elemwise'. The softmax must not be expected to reach the
    matmul's FLOP rate, or the budget goes to it (BERT: 368 of 640 trials to a layer of 1% of
    the latency)."""
    mm = W.matmul(64, 64, 64).dag
    sm = W.softmax(64, 64).dag
    dw = W.conv2d(1, 16, 8, 8, 16, 3, 3, padding=1, groups=16, layout="NHWC").dag
    full = W.conv2d(1, 16, 8, 8, 16, 3, 3, padding=1, layout="NHWC").dag
    kinds = [task_kind(d) for d in (mm, sm, dw, full)]
    assert len(set(kinds)) == 4, kinds  # a depthwise conv is not a dense one either
    assert task_kind(W.matmul(32, 16, 8).dag) == kinds[0]

    class T(_Tuner):
        def __init__(self, cost, trials, flops, dag):
            super().__init__(cost, trials, flops)
            self.task = type("t", (), {"dag": dag})
    # the matmul at 150 GFLOP/s, the softmax at 5: each only as fast as its own kind
    tuners = [T(1e9 / 150e9, 64, 1e9, mm), T(1e6 / 5e9, 64, 1e6, sm)]
    hist = [[t.result.best_cost] for t in tuners]
    g = [_gradient(i, tuners, [1, 1], hist) for i in range(2)]
    assert g[0] < g[1] < 0
    assert g[1] == pytest.approx(0.8 * -(1e6 / 5e9) / 64 / 16)


def test_a_resumed_task_is_not_starved_by_the_task_picked_last():
    """Two layers alike in latency, trials and weight: one was tuned in this run (its rounds are
    in the history, the last two improved), the other only in the resumed log. Their next rounds
    are worth the same; the per-round slope once divided the resumed one's by all its records."""
    a, b = _Tuner(1e-3, 400, 1e8), _Tuner(1e-3, 400, 1e8)
    hist = [[1e-3], [1.2e-3] * 11 + [1.1e-3, 1e-3]]  # a: the log's round only; b: 12 rounds
    g = [_gradient(i, [a, b], [1, 1], hist, per_round=16) for i in range(2)]
    assert g[0] < 0 and g[1] < g[0]  # b's own slope adds to the same forward estimate
    assert g[0] == pytest.approx(_gradient(1, [a, b], [1, 1], [[1e-3], [1e-3]]))
    assert _gradient(0, [a, b], [1, 1], hist, per_round=64) == pytest.approx(g[0] / 4)


def test_a_stuck_task_draws_less_and_less():
    """A lagging layer whose best has not moved for many rounds: its forward estimate (the rate
    of the fastest similar task) halves for every WINDOW stale rounds, so the budget moves on."""
    from tecomp.search.scheduler import WINDOW
    slow, fast = _Tuner(2e-3, 400, 1e8), _Tuner(1e-3, 400, 2e8)
    grads = [_gradient(0, [slow, fast], [1, 1], [[2e-3] * (1 + k * WINDOW), [1e-3]])
             for k in range(4)]
    assert grads[0] < 0
    for a, b in zip(grads, grads[1:]):
        assert b == pytest.approx(a / 2)


def test_the_similar_tasks_rate_is_trusted_less_after_many_rounds():
    """A lagging task (a quarter of its similar task's rate) expects half that rate in its next
    round; after 3 more rounds without reaching it, half that gain; after 6, a quarter. The
    1/trials estimate stays whole."""
    from tecomp.search.scheduler import ALPHA, WINDOW
    fast = _Tuner(1e-3, 64, 1e8)

    def grad(trials):
        slow = _Tuner(4e-3, trials, 1e8)
        return _gradient(0, [slow, fast], [1, 1], [[4e-3], [1e-3]])
    gain = (4e-3 - 2e-3) / 16 * (1 - ALPHA)  # reaching 1/BETA of the fast task's rate
    assert grad(16) == pytest.approx(-gain)
    assert grad(16 * (1 + WINDOW)) == pytest.approx(-gain / 2)
    assert grad(16 * (1 + 2 * WINDOW)) == pytest.approx(-gain / 4)
    assert grad(16 * 200) == pytest.approx(-(1 - ALPHA) * 4e-3 / (16 * 200) / 16)


def test_geomean_objective_weighs_relative_gains():
    # a big layer tuned for 64 trials and a small one tuned for 16: the small one's next round is
    # expected to cut more of its own latency (1/trials), the big one's more milliseconds
    tuners = [_Tuner(1e-1, 64, 1e10), _Tuner(1e-3, 16, 1e8)]
    hist = [[1e-1] * 4, [1e-3]]
    lat = [_gradient(i, tuners, [1, 1], hist, "latency") for i in range(2)]
    geo = [_gradient(i, tuners, [1, 1], hist, "geomean") for i in range(2)]
    assert lat[0] < lat[1] < 0  # latency: the big layer first
    assert geo[1] < geo[0] < 0  # geomean: the small layer
    with pytest.raises(ValueError, match="unknown objective"):
        tc.tune_tasks([tc.SearchTask(W.matmul(8, 8, 8).dag)], trials=1, objective="max")


def test_tasks_share_one_default_cost_model(tmp_path, monkeypatch):
    """Without a factory, one model serves every task (Ansor's shared model): it is made once,
    for the list of tasks, and sees every task's measurements."""
    from tecomp.search import scheduler
    made = []

    class Counting(RandomModel):
        def __init__(self):
            super().__init__(0)
            self.seen = set()

        def update(self, inputs, results):
            self.seen.update(c.state.dag.workload_key for c in inputs)

    def fake_default(tasks, options):
        made.append((tasks, Counting()))
        return made[-1][1]
    monkeypatch.setattr(scheduler, "default_cost_model", fake_default)
    tasks = [tc.SearchTask(W.matmul(n, n, n).dag) for n in (16, 24)]
    tc.tune_tasks(tasks, trials=8, log=str(tmp_path / "net.jsonl"),  # a round each
                  options=tc.TuningOptions(**FAST))
    assert len(made) == 1 and made[0][0] == tasks
    assert made[0][1].seen == {t.workload_key for t in tasks}


def test_feature_extractor_serves_several_tasks():
    from tecomp.search.features import FeatureExtractor
    from tecomp.testing.workloads import csr_spmm
    a, b = csr_spmm(32, 32, 8, density=0.2, seed=1), csr_spmm(32, 32, 8, density=0.2, seed=2)
    ta = tc.SearchTask(a.dag, inputs=a.index_data)
    tb = tc.SearchTask(b.dag, inputs=b.index_data)
    fx = FeatureExtractor([ta, tb])
    assert fx._info(ta.dag).data["indptr"].tolist() == list(a.index_data["indptr"])
    assert fx._info(tb.dag).data["indptr"].tolist() == list(b.index_data["indptr"])


def test_a_task_replays_the_best_programs_of_tasks_with_its_sketches(monkeypatch):
    """Matmuls of two shapes share their sketches: the second task's search gets the first's best
    decisions and replays them on its own sketches; a conv shares nothing with them."""
    import numpy as np

    from tecomp.search import evolution
    from tecomp.search.decisions import Decisions, MutationKind
    from tecomp.search.scheduler import _transfer
    opt = tc.TuningOptions(**FAST)
    tasks = [tc.SearchTask(W.matmul(n, n, n).dag) for n in (32, 48)]
    tasks.append(tc.SearchTask(W.conv2d(1, 8, 8, 8, 8, 3, 3, padding=1, layout="NHWC").dag))
    searches = [evolution.EvolutionarySearch(t, opt, RandomModel(0)) for t in tasks]
    sigs = [evolution.sketch_signature(s) for s in searches]
    assert sigs[0] == sigs[1] != sigs[2]
    a = searches[0]
    c = evolution.materialize(a.task, 0, a.sketches[0], Decisions(), np.random.default_rng(1))
    a.remember(c.key, 1e-3, a.decisions_of(c))
    tuners = [type("T", (), {"search": s, "result": type("R", (), {"best_gflops": 1.0})})
              for s in searches]
    assert _transfer(tuners, sigs, 2) == [] and _transfer(tuners, sigs, 0) == []
    seeds = _transfer(tuners, sigs, 1)
    assert [d.table(MutationKind.TILE) for d in seeds] == [c.decisions.table(MutationKind.TILE)]
    b = searches[1]
    b.transfer = seeds
    seen = []
    real = evolution.materialize

    def spy(task, idx, sketch, decisions, rng):
        seen.append(decisions.table(MutationKind.TILE))
        return real(task, idx, sketch, decisions, rng)
    monkeypatch.setattr(evolution, "materialize", spy)
    assert b.ask(4)
    assert c.decisions.table(MutationKind.TILE) in seen


def test_a_layer_sets_weights_are_the_constants_of_its_tasks():
    # a network's weights are constants: the layer-set tasks (tecomp tune --network) measure a
    # packed weight packed at build time, as tc.compile_model runs it
    import numpy as np

    from tecomp.search.task import SearchTask
    from tecomp.testing.networks import layer_weights
    layers = layer_set("resnet18", layout="NCHW")
    conv, dense = layers[0][0], layers[-1][0]
    assert layer_weights(conv) == ("weight",)
    assert layer_weights(dense) == (dense.dag.inputs[1].name,)
    assert dense.dag.inputs[1].shape == (512, 1000)  # the (K, O) matrix, not the activations
    task = SearchTask(conv.dag, constants=layer_weights(conv))
    assert task.constants == ("weight",)
    x = conv.make_inputs(np.random.default_rng(0))
    k = tc.build(conv.dag, constants={"weight": x[1]})
    assert k.constant_names == ("weight",)
    assert len(k.call_inputs(x)) == 1 and k.call_inputs(x)[0] is x[0]  # the data only
    np.testing.assert_allclose(k(x[0]), conv.reference(x)[0], rtol=1e-4, atol=1e-4)


def test_a_round_on_an_alternative_counts_by_what_it_takes_off_the_sets_fastest():
    """Of two ways to compute one layer (1 ms and 2 ms so far), a round on the slower one is
    worth only what brings it below the faster; the faster one's gain counts whole."""
    from types import SimpleNamespace

    from tecomp.search.scheduler import _through_minimum
    tuners = [SimpleNamespace(result=SimpleNamespace(best_cost=c)) for c in (1.0, 2.0, 3.0)]
    grads = {0: -0.1, 1: -0.5, 2: -0.7}
    _through_minimum(grads, [0, 1], tuners, [1.0, 1.0, 1.0], "latency", 1)
    assert grads[0] == pytest.approx(-0.1) and grads[1] == pytest.approx(0.0)
    assert grads[2] == -0.7  # not in the set: untouched
    # weight 2: -3.0 is 1.5 ms off the slower one's 2 ms, 0.5 ms below the faster one's 1 ms
    grads = {0: -0.1, 1: -3.0}
    _through_minimum(grads, [0, 1], tuners, [2.0, 2.0], "latency", 1)
    assert grads[1] == pytest.approx(2.0 * (0.5 - 1.0))


def test_a_network_tuning_reads_its_log_once(tmp_path, monkeypatch):
    """Every task resumes from the log, which is parsed once for all of them (a shipped ResNet-50
    log took 0.6 s a task to parse)."""
    from tecomp.search import scheduler, tune
    tasks = [tc.SearchTask(W.matmul(n, n, n).dag) for n in (16, 24)]
    log = str(tmp_path / "net.jsonl")
    opt = tc.TuningOptions(**FAST)
    tc.tune_tasks(tasks, trials=8, log=log, options=opt, cost_model_factory=lambda t: RandomModel(0))
    reads = []
    for mod in (scheduler, tune):
        real = mod.load_records
        monkeypatch.setattr(mod, "load_records", lambda *a, _r=real, **k: reads.append(a) or _r(*a, **k))
    res = tc.tune_tasks(tasks, trials=4, log=log, options=opt,
                        cost_model_factory=lambda t: RandomModel(0))
    assert all(r.best_schedule is not None for r in res.results)  # both resumed from the log
    assert len([a for a in reads if a[0] == log]) == 1
