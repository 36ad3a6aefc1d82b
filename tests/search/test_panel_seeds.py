"""Panel seeds: BLAS-structured first programs of a tiled reduction (search/panel_seeds.py)."""
import numpy as np
import pytest

import tecomp as tc
from tecomp.search.cost_model import RandomModel
from tecomp.search.decisions import MutationKind
from tecomp.search.evolution import unique_sketch_names
from tecomp.search.panel_seeds import MAX_SEEDS, panel_seeds, seed_shapes
from tecomp.search.register_tile import register_shapes
from tecomp.search.target_search import generate_sketches, materialize
from tecomp.search.tune import TaskTuner


def _matmul_task(m, n, k):
    A = tc.placeholder((m, k), name="A")
    B = tc.placeholder((k, n), name="B")
    return tc.SearchTask(tc.ComputeDAG([A, B, tc.ops.matmul(A, B)]), target="llvm")


def _seeds(task, n_shapes=2, seed=0):
    sketches = generate_sketches(task)
    names = unique_sketch_names(sketches)
    return sketches, names, panel_seeds(task, sketches, names, RandomModel(0), n_shapes, seed)


def test_seed_shapes_prefer_more_fmas_per_load_and_little_padding():
    # AVX-512: 32 registers of 16 floats. 6x4 does 2.4 FMAs a load and pads 1024 rows to 1026
    assert seed_shapes(16, 32, 1024, 1024, 2)[0] == (6, 4)
    # 96 columns: a 4-vector tile pads them to 128, a 3- or 2-vector tile does not
    first = seed_shapes(16, 32, 1024, 96, 1)[0]
    assert 96 % (first[1] * 16) == 0
    # AVX2: 4x3 does more FMAs a load than 6x2, but 24 lanes leave a partial last panel of 1024
    # columns in every row tile (on Zen 1, 62 GFLOP/s against 74)
    assert seed_shapes(8, 16, 1024, 1024, 1)[0] == (6, 2)
    assert seed_shapes(8, 16, 1024, 960, 1)[0] == (4, 3)  # 960 = 40 x 24
    # an NCHW conv's 56 columns: two vectors with the last one half padding, not one vector
    # (a broadcast per FMA)
    assert seed_shapes(8, 16, 64, 56, 1)[0][1] == 2
    for lanes, regs in ((16, 32), (8, 16), (4, 16)):
        for s in seed_shapes(lanes, regs, 300, 200, 3):
            assert s in register_shapes(lanes, regs, 300, 200)


def test_matmul_seeds_tile_the_registers_in_panel_and_blocked_structures():
    task = _matmul_task(512, 512, 256)
    sketches, names, seeds = _seeds(task)
    assert 0 < len(seeds) <= MAX_SEEDS
    lanes = task.hardware.vector_bytes // 4
    best = seed_shapes(lanes, task.hardware.vector_registers, 512, 512, 1)[0]
    kinds = set()
    for d in seeds:
        assert d.sketch in names
        sk = sketches[names.index(d.sketch)]
        tiles = d.table(MutationKind.TILE)
        holes = {i: h for i, h in sk.holes.items() if getattr(h, "parts", 0) == 4}
        vec = [tiles[i] for i, h in holes.items() if h.vector]
        rows = [tiles[i] for i, h in holes.items() if not h.vector]
        assert vec and all(v[1] == 1 and v[-1] % lanes == 0 for v in vec)
        step = [tiles[i][-1] for i, h in sk.holes.items() if getattr(h, "parts", 0) == 2]
        pack = d.table(MutationKind.PACK)
        assert pack.get("A") == 0
        if rows[0][0] == 1:  # blocked: all the row tiles inside a block of 64 reductions
            kinds.add("blocked")
            assert step == [64] and pack.get("B") == 0 and vec[0][0] == 1
        else:  # panel: B's columns are the lanes, packed; each row tile runs all of k over a
            kinds.add("panel")  # block of panels of 256 KB at most that divides the panels
            assert rows[0][1] == 1 and step == [4] and pack.get("B", 0) > 0
            width, block = vec[0][-1], vec[0][0]
            assert (512 // width) % block == 0 and block * width * 256 * 4 <= 256 * 1024
            assert block > 1 or 2 * width * 256 * 4 > 256 * 1024
        assert all(v == 1 for v in d.table(MutationKind.VEC).values())
    assert kinds == {"panel", "blocked"}
    assert any(d.table(MutationKind.PACK).get("B@panel") for d in seeds)
    first = seeds[0].table(MutationKind.TILE)
    assert {v[-1] for v in first.values()} >= {best[0], best[1] * lanes}


def test_panels_that_all_fit_in_a_block_are_swept_one_at_a_time():
    task = _matmul_task(128, 128, 64)  # B: 32 KB
    sketches, names, seeds = _seeds(task)
    for d in seeds:
        sk = sketches[names.index(d.sketch)]
        tiles = d.table(MutationKind.TILE)
        assert all(tiles[i][0] == 1 for i, h in sk.holes.items()
                   if getattr(h, "parts", 0) == 4 and h.vector)


def test_seeded_programs_compute_the_matmul():
    task = _matmul_task(100, 80, 36)  # no extent a multiple of a register tile
    sketches, names, seeds = _seeds(task)
    assert seeds
    rng = np.random.default_rng(0)
    a, b = rng.uniform(-1, 1, (100, 36)).astype("float32"), \
        rng.uniform(-1, 1, (36, 80)).astype("float32")
    for d in seeds:
        k = names.index(d.sketch)
        c = materialize(task, k, sketches[k], d.with_sketch(""), rng)
        assert c is not None
        # the seed's decisions are complete: materializing them again draws nothing
        assert c.decisions.with_sketch(d.sketch) == d
        kern = tc.build(task.dag, schedule=c.state)
        np.testing.assert_allclose(kern(a, b), a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)


def test_the_seeds_are_the_same_for_the_same_seed_and_capped_for_many_sketches():
    task = _matmul_task(256, 256, 128)
    assert _seeds(task, seed=3)[2] == _seeds(task, seed=3)[2]
    A = tc.placeholder((128, 64), name="A")
    B = tc.placeholder((64, 128), name="B")
    C = tc.placeholder((128, 96), name="C")
    chain = tc.SearchTask(tc.ComputeDAG([A, B, C, tc.ops.matmul(tc.ops.matmul(A, B), C)]),
                          target="llvm")
    sketches, _, seeds = _seeds(chain)
    assert len(sketches) > MAX_SEEDS // 2 and len(seeds) == MAX_SEEDS
    assert _seeds(task, n_shapes=0)[2] == []


def test_no_seeds_without_a_tiled_reduction():
    X = tc.placeholder((64, 256), name="X")
    Y = tc.compute((64, 256), lambda i, j: X[i, j] * 2.0, name="Y")
    assert _seeds(tc.SearchTask(tc.ComputeDAG([X, Y]), target="llvm"))[2] == []


@pytest.mark.parametrize("n", [0, 2])
def test_the_tuner_measures_the_seeds_first(n):
    task = _matmul_task(128, 128, 64)
    tuner = TaskTuner(task, tc.TuningOptions(verbose=False, panel_seeds=n), RandomModel(0))
    assert bool(tuner.search.seeds) == bool(n)
    if n:
        first = tuner.search.ask(8)
        keys = {c.key for c in first}
        sketches = tuner.search.sketches
        seeded = [materialize(task, tuner.search.sketch_index(d.sketch),
                              sketches[tuner.search.sketch_index(d.sketch)], d.with_sketch(""),
                              np.random.default_rng(0)) for d in tuner.search.seeds]
        assert sum(c.key in keys for c in seeded) >= min(len(seeded), 3)


def test_panel_seeds_must_be_a_count():
    with pytest.raises(ValueError):
        tc.TuningOptions(panel_seeds=-1)
