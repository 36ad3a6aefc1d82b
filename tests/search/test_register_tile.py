"""Register-tile sampling (tecomp.search.register_tile): micro-tiles that fill the register file
without spilling, drawn for the tiled stages of fresh samples."""
import collections

import numpy as np

import tecomp as tc
from tecomp.search.decisions import Decisions, MutationKind
from tecomp.search.register_tile import register_shapes
from tecomp.search.target_search import generate_sketches, materialize
from tecomp.testing.random_schedules import sampled_candidates


def test_shapes_fit_the_register_file_and_hide_the_fma_latency():
    for lanes, regs in ((8, 16), (16, 32), (4, 32)):
        shapes = register_shapes(lanes, regs, 64, 256)
        assert shapes
        for rows, nvec in shapes:
            # accumulators, the operand vectors and a broadcast all in registers
            assert rows * nvec + nvec + 1 <= regs and 2 * rows * nvec >= regs
    avx2 = register_shapes(8, 16, 1024, 1024)
    assert {(6, 2), (4, 3), (4, 2), (2, 4), (14, 1)} <= set(avx2)
    assert (8, 2) not in avx2 and (7, 1) not in avx2 and (3, 1) not in avx2
    # 14 accumulators + 2 operand vectors + a broadcast: one register too many (LLVM spills)
    assert (7, 2) not in avx2 and (3, 4) not in avx2
    assert (14, 2) in register_shapes(16, 32, 64, 256)
    assert (15, 2) not in register_shapes(16, 32, 64, 256)
    # a 7-wide axis whole (no tail) may use fewer accumulators
    assert (7, 1) in register_shapes(8, 16, 7, 512)
    assert register_shapes(8, 16, 3, 8) == []  # too small a tile to fill the registers


def test_fresh_matmul_samples_include_non_divisor_register_tiles():
    A = tc.placeholder((1024, 256), name="A")
    B = tc.placeholder((256, 1024), name="B")
    dag = tc.ComputeDAG([A, B, tc.ops.matmul(A, B)])
    task = tc.SearchTask(dag, target="llvm")
    sketches = generate_sketches(task)
    rng = np.random.default_rng(0)
    lanes = task.hardware.vector_bytes // 4
    inner = collections.Counter()
    for n in range(240):
        k = n % len(sketches)
        c = materialize(task, k, sketches[k], Decisions(), rng)
        if c is None:
            continue
        holes = sketches[k].holes
        tiles = c.decisions.table(MutationKind.TILE)
        vec = next(v for i, v in tiles.items() if getattr(holes[i], "vector", False))
        rows = next(v for i, v in tiles.items()
                    if getattr(holes[i], "parts", 0) == 4 and not holes[i].vector)
        inner[(rows[-1], vec[-1])] += 1
    fitting = {(r, v) for r, v in inner if v % lanes == 0
               and (r, v // lanes) in register_shapes(lanes, task.hardware.vector_registers,
                                                       1024, 1024)}
    assert sum(inner[s] for s in fitting) >= 240 * 0.2
    assert any(1024 % r for r, _ in fitting)  # e.g. 6 rows: not a divisor of 1024


def test_a_register_tiling_replays_unchanged():
    """Its outer levels span the tiles rounded up (171 tiles of 6 rows over 1024): replaying the
    decisions (an elite, a mutation's parent) keeps them instead of sampling new ones."""
    A = tc.placeholder((1024, 64), name="A")
    B = tc.placeholder((64, 1024), name="B")
    task = tc.SearchTask(tc.ComputeDAG([A, B, tc.ops.matmul(A, B)]), target="llvm")
    sketches = generate_sketches(task)
    checked = 0
    for n, (k, c) in enumerate(sampled_candidates(task, 200, np.random.default_rng(3))):
        tiles = c.decisions.table(MutationKind.TILE)
        again = materialize(task, k, sketches[k], c.decisions, np.random.default_rng(n))
        assert again.decisions.table(MutationKind.TILE) == tiles
        checked += any(1024 % v[-1] for v in tiles.values() if v)
    assert checked > 10
