"""The search's decisions as a typed value: the JSON form reads v1 logs (string step indices) and
writes the same shape back, so old and new logs both load and record keys never change."""
import json
import os

import numpy as np
import pytest

from tecomp.schedule.records import Record, load_records
from tecomp.search.cost_model import RandomModel
from tecomp.search.decisions import Decisions, MutationKind
from tecomp.search.evolution import MUTATION_WEIGHTS, EvolutionarySearch
from tecomp.search.target_search import generate_sketches, materialize
from tecomp.search.task import HardwareParams, SearchTask, TuningOptions
from tecomp.search.tune import tune
from tecomp.testing import workloads as W

V1_LOG = os.path.join(os.path.dirname(__file__), "..", "data", "matmul1024_v1.jsonl")


def _raw_lines(path):
    with open(path) as f:
        return [line.rstrip("\n") for line in f if line.strip()]


@pytest.mark.nodevice
def test_v1_records_round_trip_byte_for_byte():
    """Every record of the checked-in v1 log: its decisions read as Decisions and written back
    give the same JSON (same keys, same order), and the record's line and key are unchanged."""
    lines = _raw_lines(V1_LOG)
    recs = load_records(V1_LOG)
    assert len(recs) == len(lines) == 6
    for line, r in zip(lines, recs):
        d = Decisions.from_json(r.decisions)
        assert d.sketch and d.tile and all(isinstance(k, int) for k in d.tile)
        assert all(isinstance(v, tuple) for v in d.tile.values())
        assert d.chunk is None and d.pack is None  # v1 logs predate these tables
        assert d.to_json() == r.decisions
        assert json.dumps(d.to_json()) == json.dumps(r.decisions)  # same key order too
        again = Record(r.workload_key, r.target, r.steps, d.to_json(), r.result, r.data_hash,
                       r.flop_count, version=r.version)
        assert again.key == r.key
        assert again.to_json() == line


@pytest.mark.nodevice
def test_v1_decisions_replay_the_recorded_schedule():
    """The decisions of a v1 record, given to their sketch, give back the record's schedule
    (the same de-duplication key) without drawing anything: the log predates weight packing,
    so its tables say "no pack", as that version did."""
    wl = W.matmul(1024, 1024, 1024)
    recs = load_records(V1_LOG)
    task = SearchTask(wl.dag, target=recs[0].target,
                      hardware=HardwareParams(num_cores=16, vector_bytes=64))
    search = EvolutionarySearch(task, TuningOptions(), RandomModel(0))
    for r in recs:
        d = Decisions.from_json(r.decisions).with_table(MutationKind.PACK, {"A": 0, "B": 0})
        idx = search.sketch_index(d.sketch)
        assert idx is not None, d.sketch
        c = materialize(task, idx, search.sketches[idx], d, None)  # no rng: nothing is sampled
        assert c is not None and c.key == r.key
        js = search.decisions_of(c).to_json()
        assert {k: v for k, v in js.items() if k not in ("chunk", "pack")} == r.decisions


@pytest.mark.nodevice
def test_damaged_decisions_are_dropped_not_fatal():
    d = Decisions.from_json({"sketch": 3, "tile": {"x": "junk", "1": [0, -1], "2": [4, 2.5],
                                                   "3": [2, 4]},
                             "loc": 5, "unroll": [1, 2], "vec": {"C": True, "D": 1}, "extra": {}})
    assert d.sketch == "" and d.tile == {1: (0, -1), 3: (2, 4)}  # values checked by annotators
    assert d.loc is None and d.unroll is None and d.vec == {"D": 1}
    assert Decisions.from_json(None) == Decisions() == Decisions.from_json("nonsense")
    assert Decisions.coerce(d) is d


@pytest.mark.nodevice
def test_tables_are_copies_and_with_table_replaces_one():
    d = Decisions.from_json({"tile": {"0": [2, 4]}, "vec": {"C": 1}})
    t = d.tables((MutationKind.TILE, MutationKind.PAR))
    t[MutationKind.TILE][0] = (8, 8)
    assert d.tile == {0: (2, 4)} and t[MutationKind.PAR] == {}
    e = d.with_table(MutationKind.VEC, {"C": 0}).with_sketch("tile")
    assert (e.vec, d.vec, e.sketch, e.tile) == ({"C": 0}, {"C": 1}, "tile", {0: (2, 4)})
    assert e.to_json() == {"sketch": "tile", "tile": {"0": [2, 4]}, "vec": {"C": 0}}
    assert Decisions.from_tables(t).to_json() == {"tile": {"0": [8, 8]}, "par": {}}
    assert list(MUTATION_WEIGHTS) == [MutationKind.TILE, MutationKind.UNROLL, MutationKind.LOC,
                                      MutationKind.PAR, MutationKind.VEC, MutationKind.CHUNK,
                                      MutationKind.PACK]


@pytest.mark.nodevice
@pytest.mark.parametrize("target", ["llvm", "cuda"])
def test_fresh_candidates_write_the_v1_shape(target):
    """A CPU candidate has all seven tables, a GPU one tile/vec/unroll, keys as strings and
    lengths as lists: the JSON records have always had."""
    task = SearchTask(W.matmul(32, 32, 32).dag, target=target)
    sks = generate_sketches(task)
    rng = np.random.default_rng(0)
    c = None
    while c is None:
        c = materialize(task, 0, sks[0], {}, rng)
    js = c.decisions.to_json()
    want = (["tile", "loc", "par", "vec", "unroll", "chunk", "pack"] if target == "llvm"
            else ["tile", "vec", "unroll"])
    assert list(js) == want
    assert all(isinstance(k, str) and isinstance(v, list) for k, v in js["tile"].items())
    assert Decisions.from_json(js) == c.decisions
    assert materialize(task, 0, sks[0], js, None).key == c.key


def test_fresh_tuning_log_round_trips(tmp_path):
    """Records written by a fresh tuning read back to the same decisions and, given to their
    sketches, to the same schedules."""
    wl = W.matmul(32, 32, 32)
    log = str(tmp_path / "t.jsonl")
    task = SearchTask(wl.dag)
    opt = TuningOptions(seed=3, population=16, generations=1, n_workers=1, repeat=1,
                        min_repeat_ms=1, verbose=False)
    tune(task, trials=6, log=log, options=opt, cost_model=RandomModel(3))
    lines, recs = _raw_lines(log), load_records(log)
    assert len(recs) == len(lines) >= 4
    search = EvolutionarySearch(task, opt, RandomModel(0))
    for line, r in zip(lines, recs):
        d = Decisions.from_json(r.decisions)
        assert json.dumps(d.to_json(), separators=(",", ":")) in line
        idx = search.sketch_index(d.sketch)
        c = materialize(task, idx, search.sketches[idx], d, None)
        assert c.key == r.key
