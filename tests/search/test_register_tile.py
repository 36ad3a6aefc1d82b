"""Register-tile sampling (tecomp.search.register_tile): micro-tiles that fill the register file
without spilling, drawn for the tiled stages of fresh samples."""
import collections

import numpy as np

import tecomp as tc
from tecomp.search.decisions import Decisions, MutationKind
from tecomp.search.register_tile import register_shapes, shape_weights
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


def test_the_draw_favours_tiles_with_more_fmas_per_load():
    avx2 = register_shapes(8, 16, 128, 64)
    w = dict(zip(avx2, shape_weights(avx2)))
    assert abs(sum(w.values()) - 1) < 1e-9 and min(w.values()) > 0
    # a one-vector tile broadcasts once per FMA: each is drawn less often than a two-vector one
    assert max(p for (_, v), p in w.items() if v == 1) < min(p for (_, v), p in w.items() if v > 1)
    assert sum(p for (_, v), p in w.items() if v == 1) < 0.4
    assert w[(6, 2)] > w[(4, 2)] and w[(4, 3)] > w[(3, 3)]


def _fresh_tiles(task, n: int, seed: int):
    """``(holes, tile decisions)`` of ``n`` fresh samples, the task's sketches in turn."""
    sketches = generate_sketches(task)
    rng = np.random.default_rng(seed)
    for j in range(n):
        k = j % len(sketches)
        c = materialize(task, k, sketches[k], Decisions(), rng)
        if c is not None:
            yield sketches[k].holes, c.decisions.table(MutationKind.TILE)


def test_fresh_matmul_samples_include_non_divisor_register_tiles():
    A = tc.placeholder((1024, 256), name="A")
    B = tc.placeholder((256, 1024), name="B")
    dag = tc.ComputeDAG([A, B, tc.ops.matmul(A, B)])
    task = tc.SearchTask(dag, target="llvm")
    lanes = task.hardware.vector_bytes // 4
    inner = collections.Counter()
    for holes, tiles in _fresh_tiles(task, 240, 0):
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


def _attention_pv():
    """``O[b, i, h, d] = sum_k P[b, h, i, k] V[b, k, h, d]``: ``h`` indexes both operands."""
    P = tc.placeholder((1, 12, 64, 64), name="P")
    V = tc.placeholder((1, 64, 12, 32), name="V")
    k = tc.reduce_axis(64, name="k")
    O = tc.compute((1, 64, 12, 32), lambda b, i, h, d: tc.sum(P[b, h, i, k] * V[b, k, h, d],
                                                              axis=k), name="O")
    return tc.ComputeDAG([P, V, O])


def test_batch_axes_index_every_operand():
    from tecomp.schedule.state import State
    from tecomp.search.analysis import batch_axes
    dag = _attention_pv()
    assert batch_axes(State(dag), 2) == {"b", "h"}
    A = tc.placeholder((64, 32), name="A")
    B = tc.placeholder((32, 48), name="B")
    assert batch_axes(State(tc.ComputeDAG([A, B, tc.ops.matmul(A, B)])), 2) == set()
    # a grouped conv's output channel reaches the input only through its group (o // 8): the
    # rows of one group share the input, so it is no batch axis
    X = tc.placeholder((32, 16), name="X")
    W = tc.placeholder((32, 8), name="W")
    c = tc.reduce_axis(8, name="c")
    G = tc.compute((32, 16), lambda o, x: tc.sum(X[(o // 8) * 8 + c, x] * W[o, c], axis=c),
                   name="G")
    assert batch_axes(State(tc.ComputeDAG([X, W, G])), 2) == set()


def test_register_tiles_take_their_rows_off_the_batch_axes():
    task = tc.SearchTask(_attention_pv(), target="llvm")
    inner = collections.Counter()
    for holes, tiles in _fresh_tiles(task, 400, 1):
        for i, v in tiles.items():
            h = holes[i]
            if getattr(h, "parts", 0) == 4 and not h.vector and h.extent > 1:
                inner[("batch" if h.batch else "other", v[-1])] += 1
    # 9, 11 or 13 rows come only from register tiles (no divisor of 12, no "nice" length of the
    # non-divisible draw): the rows axis i has them, the head axis h never
    odd = (9, 11, 13)
    assert sum(inner[("other", r)] for r in odd) > 20
    assert sum(inner[("batch", r)] for r in odd) == 0
