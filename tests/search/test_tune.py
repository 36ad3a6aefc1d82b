"""tc.tune end to end: records, resume, kill -9, crashing and hanging candidates."""
import ctypes
import functools
import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import tecomp as tc
from tecomp.schedule.records import ErrorKind, MeasureResult, load_records
from tecomp.search.cost_model import RandomModel
from tecomp.search.measure import LocalMeasurer
from tecomp.testing import workloads as W

FAST = dict(population=24, generations=1, measures_per_round=8, repeat=2, min_repeat_ms=2,
            verbose=False)


def _task(n=32):
    wl = W.matmul(n, n, n)
    return wl, tc.SearchTask(wl.dag)


def test_tune_finds_a_valid_schedule_and_logs_every_trial(tmp_path):
    wl, task = _task()
    log = tmp_path / "mm.jsonl"
    res = tc.tune(task, trials=8, log=str(log), options=tc.TuningOptions(**FAST),
                  cost_model=RandomModel(0))
    assert res.trials == 8 and res.best_schedule is not None and res.best_gflops > 0
    recs = load_records(str(log))
    assert len(recs) == 8 and len({r.key for r in recs}) == 8
    assert all(r.decisions.get("sketch") for r in recs)
    x = wl.make_inputs(np.random.default_rng(0))
    k = tc.build(wl.dag, log=str(log))
    np.testing.assert_allclose(k(*x), wl.reference(x)[0], rtol=1e-4, atol=1e-4)
    assert res.search_seconds > 0 and res.measure_seconds > 0 and res.peak_rss_mb > 0


def test_resume_never_measures_a_state_twice(tmp_path):
    _, task = _task()
    log = str(tmp_path / "mm.jsonl")
    opt = tc.TuningOptions(**FAST)
    # the same seed: the rerun draws what the first run measured, and must measure others
    tc.tune(task, trials=4, log=log, options=opt, cost_model=RandomModel(0))
    tc.tune(task, trials=4, log=log, options=opt, cost_model=RandomModel(0))
    keys = [r.key for r in load_records(log)]
    assert len(keys) == 8 and len(set(keys)) == 8



def test_resume_starts_from_the_best_record_that_replays(tmp_path):
    """A log whose fastest records do not replay (damaged, or from another version) must not
    set the best cost (and so every round's slow cutoff) nor leave best_schedule empty."""
    wl, task = _task()
    log = str(tmp_path / "mm.jsonl")
    opt = tc.TuningOptions(**FAST)
    tc.tune(task, trials=4, log=log, options=opt, cost_model=RandomModel(0))
    lines = open(log).read().splitlines()
    bogus = json.loads(lines[0])
    bogus["steps"] = [["ZZ", 1]]
    bogus["result"]["costs"] = [1e-9]
    with open(log, "a") as f:
        f.write(json.dumps(bogus) + "\n")
    with pytest.warns(RuntimeWarning, match="do not replay"):
        res = tc.tune(task, trials=4, log=log, options=opt, cost_model=RandomModel(1))
    assert res.best_cost > 1e-7 and res.best_schedule is not None and res.trials == 4
    x = wl.make_inputs(np.random.default_rng(0))
    k = tc.build(wl.dag, schedule=res.best_schedule)
    np.testing.assert_allclose(k(*x), wl.reference(x)[0], rtol=1e-4, atol=1e-4)


CHILD = textwrap.dedent("""
    import sys
    import tecomp as tc
    from tecomp.search.cost_model import RandomModel
    from tecomp.testing import workloads as W
    task = tc.SearchTask(W.matmul(32, 32, 32).dag)
    opt = tc.TuningOptions(population=24, generations=1, measures_per_round=4, repeat=2,
                           min_repeat_ms=2, verbose=False)
    tc.tune(task, trials=400, log=sys.argv[1], options=opt, cost_model=RandomModel(1))
""")


def test_kill_9_during_tuning_then_resume_loses_nothing(tmp_path):
    log = str(tmp_path / "killed.jsonl")
    p = subprocess.Popen([sys.executable, "-c", CHILD, log])
    deadline = time.time() + 120
    while time.time() < deadline:
        if os.path.exists(log) and sum(1 for _ in open(log)) >= 8:
            break
        time.sleep(0.2)
    p.send_signal(signal.SIGKILL)
    p.wait()
    before = load_records(log)
    assert len(before) >= 8
    _, task = _task()
    tc.tune(task, trials=4, log=log, options=tc.TuningOptions(**FAST), cost_model=RandomModel(2))
    after = load_records(log)
    assert [r.key for r in after[:len(before)]] == [r.key for r in before]
    assert len(after) == len(before) + 4
    assert len({r.key for r in after}) == len(after)


def crash_or_hang(marks, call, outputs, steps):
    """Test hook (runs in the measurement worker): the first candidate with a split whose
    innermost length is 3 segfaults, the first whose innermost length is 6 hangs (a file in
    directory ``marks`` remembers each across the fresh workers a fault costs)."""
    inner = [r[3][-1] for r in steps if r[0] == "SP"]
    for size, kind, fault in ((3, "crash", lambda: ctypes.string_at(0)),
                              (6, "hang", lambda: time.sleep(1e9))):
        mark = os.path.join(marks, kind)
        if size in inner and not os.path.exists(mark):
            open(mark, "w").close()
            return fault
    return None


def test_crashing_and_hanging_candidates_are_errors_and_tuning_goes_on(tmp_path):
    wl, task = _task(48)  # 48 = 2^4 * 3: tilings with 3 and 6 come up often
    log = str(tmp_path / "faults.jsonl")
    # two rounds: the first already crashes and hangs (each fault costs a fresh worker, the
    # cost of this test: one of each), the second shows tuning goes on; a valid run takes
    # milliseconds
    opt = tc.TuningOptions(**FAST, run_timeout=0.5)
    with LocalMeasurer(opt, prepare=functools.partial(crash_or_hang, str(tmp_path))) as m:
        res = tc.tune(task, trials=16, log=log, options=opt, cost_model=RandomModel(3), measurer=m)
    kinds = {r.result.error for r in load_records(log)}
    assert ErrorKind.CRASH in kinds and ErrorKind.RUN_TIMEOUT in kinds
    assert res.trials == 16 and res.best_schedule is not None
    assert ErrorKind.NONE in kinds
    msg = [r.result.error_msg for r in load_records(log) if r.result.error is ErrorKind.CRASH][0]
    assert msg
    json.dumps(res.errors)


def test_register_tile_cap_spreads_a_round_over_register_tiles():
    """With ``max_per_register_tile=1`` a round's model picks all differ in their innermost
    structure (when the population offers that many)."""
    from tecomp.search.cost_model import RandomModel
    from tecomp.search.evolution import EvolutionarySearch, register_tile
    task = tc.SearchTask(W.matmul(64, 64, 64).dag)
    opt = tc.TuningOptions(population=64, generations=1, eps_greedy=0.0, max_per_register_tile=1,
                           fresh_picks=0, verbose=False)
    picks = EvolutionarySearch(task, opt, RandomModel(0)).ask(8)
    assert len(picks) == 8
    assert len({register_tile(c) for c in picks}) == 8
    uncapped = tc.TuningOptions(population=64, generations=1, eps_greedy=0.0, verbose=False)
    assert len(EvolutionarySearch(task, uncapped, RandomModel(0)).ask(8)) == 8


class LikesOneStructure:
    """A cost model that scores one tile structure (the first it sees) far above the rest."""

    def __init__(self):
        self.target, self.rng = None, np.random.default_rng(0)

    def update(self, inputs, results):
        pass

    def predict(self, candidates):
        from tecomp.search.evolution import tile_structure
        if self.target is None and candidates:
            self.target = tile_structure(candidates[0])
        return np.array([10.0 + self.rng.random() if tile_structure(c) == self.target
                         else self.rng.random() for c in candidates])


def test_diverse_picks_take_distinct_tile_structures():
    """A model sure of one tile structure fills a round with its near-copies (other outer tiles,
    unroll depths); ``diverse_picks`` of the picks then go to distinct structures."""
    from tecomp.search.evolution import EvolutionarySearch, tile_structure
    task = tc.SearchTask(W.matmul(64, 64, 64).dag)
    base = dict(population=64, generations=2, eps_greedy=0.0, per_sketch_picks=0, fresh_picks=0,
                verbose=False)
    greedy = EvolutionarySearch(task, tc.TuningOptions(**base), LikesOneStructure()).ask(8)
    assert len({tile_structure(c) for c in greedy}) < 8
    diverse = EvolutionarySearch(task, tc.TuningOptions(**base, diverse_picks=8),
                                 LikesOneStructure()).ask(8)
    assert len(diverse) == 8 and len({tile_structure(c) for c in diverse}) == 8


class LikesMeasuredTiles:
    """A cost model that scores the register tiles it was told of far above the rest."""

    def __init__(self):
        self.known, self.rng = set(), np.random.default_rng(0)

    def update(self, inputs, results):
        from tecomp.search.evolution import register_tile
        self.known |= {register_tile(c) for c in inputs}

    def predict(self, candidates):
        from tecomp.search.evolution import register_tile
        return np.array([10.0 + self.rng.random() if register_tile(c) in self.known
                         else self.rng.random() for c in candidates])


@pytest.mark.parametrize("fresh", [0, 4])
def test_fresh_picks_take_the_best_fresh_random_samples(fresh, monkeypatch):
    """A model sure of the measured programs' register tiles ranks their mutants first, and a
    round picks only those; ``fresh_picks`` of its picks go to the best-scored of the round's
    fresh random samples."""
    from tecomp.search.evolution import EvolutionarySearch
    # fresh samples drawn as register micro-tiles often repeat a measured register tile, which
    # this model then ranks with the mutants: draw them from the divisors only here
    monkeypatch.setattr("tecomp.search.register_tile.REGISTER_TILE_PROB", 0.0)

    class Search(EvolutionarySearch):
        def random_candidate(self):
            c = super().random_candidate()
            if c is not None:
                self.sampled.add(c.key)
            return c

    task = tc.SearchTask(W.matmul(64, 64, 64).dag)
    opt = tc.TuningOptions(population=64, generations=2, eps_greedy=0.0, per_sketch_picks=0,
                           verbose=False, fresh_picks=fresh)
    from tecomp.search.evolution import register_tile
    model = LikesMeasuredTiles()
    search = Search(task, opt, model)
    search.sampled = set()
    first = search.ask(8)
    search.tell(first, [MeasureResult(costs=(1e-3,))] * len(first))
    search.sampled = set()
    second = search.ask(8)
    assert len(second) == 8
    # a fresh sample may draw a measured register tile too and rank with the mutants, so
    # without fresh picks the round is the model's top (measured tiles) whatever their origin
    fresh_ones = [c for c in second if c.key in search.sampled]
    if fresh:
        assert len(fresh_ones) >= fresh
        # the quota is what brings in fresh samples of tiles nobody measured
        assert len([c for c in fresh_ones if register_tile(c) not in model.known]) <= fresh
    else:
        assert all(register_tile(c) in model.known for c in second)


class LikesSketch0:
    """A cost model that scores sketch 0 high and every other sketch low."""

    def update(self, inputs, results):
        pass

    def predict(self, candidates):
        return np.array([1.0 if c.sketch == 0 else 0.0 for c in candidates])


def test_a_round_takes_the_models_best_candidates():
    """Without a cap, every non-random pick of a round is among the model's best: a model that
    scores one sketch high gets only that sketch (eps_greedy 0)."""
    from tecomp.search.evolution import EvolutionarySearch
    task = tc.SearchTask(W.matmul(64, 64, 64).dag)

    opt = tc.TuningOptions(population=64, generations=1, eps_greedy=0.0, per_sketch_picks=0,
                           fresh_picks=0, verbose=False)
    picks = EvolutionarySearch(task, opt, LikesSketch0()).ask(8)
    assert len(picks) == 8 and all(c.sketch == 0 for c in picks)


def test_every_sketch_gets_its_best_pick_each_round():
    """``per_sketch_picks`` reserves each sketch's best candidates before the global ranking, so
    a model that favours one sketch still measures the others' best."""
    from tecomp.search.evolution import EvolutionarySearch
    task = tc.SearchTask(W.matmul(64, 64, 64).dag)

    opt = tc.TuningOptions(population=64, generations=1, eps_greedy=0.0, per_sketch_picks=1,
                           sketch_warmup=0, fresh_picks=0, verbose=False)
    search = EvolutionarySearch(task, opt, LikesSketch0())
    picks = search.ask(8)
    assert {c.sketch for c in picks} == set(range(len(search.sketches)))
    assert sum(c.sketch == 0 for c in picks) == 8 - (len(search.sketches) - 1)


@pytest.mark.parametrize("share", [0.0, 0.1])
def test_every_sketch_keeps_a_niche_in_the_generations(share):
    """With ``sketch_share`` each sketch's members breed among themselves in a share of each
    generation's slots, though the model scores one sketch alone above zero; without it the
    next generation is (almost surely) that sketch's alone."""
    from tecomp.search.evolution import EvolutionarySearch
    task = tc.SearchTask(W.matmul(64, 64, 64).dag)
    opt = tc.TuningOptions(population=60, generations=1, sketch_share=share, verbose=False)
    search = EvolutionarySearch(task, opt, LikesSketch0())
    assert len(search.sketches) > 1
    pop = [c for c in (search.random_candidate() for _ in range(200)) if c is not None]
    scores = LikesSketch0().predict(pop)
    counts = np.bincount([c.sketch for c in search._next_generation(pop, scores)],
                         minlength=len(search.sketches))
    others = counts[1:]
    if share:
        assert all(n >= int(0.6 * share * opt.population) for n in others), counts
    else:
        assert others.sum() == 0, counts


def test_a_sketch_without_data_gets_an_equal_share_of_the_round():
    """Until ``sketch_warmup`` programs of a sketch ran, the sketch gets an equal share of each
    round's model picks; after that, ``per_sketch_picks``."""
    from tecomp.search.evolution import EvolutionarySearch
    task = tc.SearchTask(W.matmul(64, 64, 64).dag)
    opt = tc.TuningOptions(population=64, generations=1, eps_greedy=0.0, per_sketch_picks=1,
                           sketch_warmup=4, fresh_picks=0, verbose=False)
    search = EvolutionarySearch(task, opt, LikesSketch0())
    n_sk = len(search.sketches)
    n = 4 * n_sk
    counts = np.bincount([c.sketch for c in search.ask(n)], minlength=n_sk)
    assert list(counts) == [4] * n_sk
    for i, sk in enumerate(search.sketches):  # four valid programs of every sketch measured
        for j in range(4):
            search.remember(f"k{i}-{j}", 1e-3, {"sketch": sk.name})
    counts = np.bincount([c.sketch for c in search.ask(n)], minlength=n_sk)
    assert list(counts[1:]) == [1] * (n_sk - 1) and counts[0] == n - (n_sk - 1)
