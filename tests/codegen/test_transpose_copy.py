"""Transposing copies emitted as blocked register transposes (tecomp/codegen/llvm_transpose.py):
the shuffle rounds transpose, every panel copy of every size around the block (remainders,
panels narrower than a block, both loop orders, three dtypes) equals numpy's, and copies that are
not exact transposes keep the plain loops."""
import numpy as np
import pytest

import tecomp as tc
from tecomp.codegen.llvm_transpose import copy_nest, transpose_masks, transpose_plan
from tecomp.ir.loop import For, stmts

RNG = np.random.default_rng(23)


@pytest.mark.parametrize("n", [2, 4, 8, 16])
def test_the_shuffle_rounds_transpose(n):
    m = RNG.standard_normal((n, n))
    rows = [m[r] for r in range(n)]
    for pairs in transpose_masks(n):
        new = list(rows)
        for i, j, lo, hi in pairs:
            both = np.concatenate([rows[i], rows[j]])
            new[i], new[j] = both[lo], both[hi]
        rows = new
    np.testing.assert_array_equal(np.array(rows), m.T)


def _panels(m, k, lanes, dtype, order):
    """``Y[a, k, b] = A[a * lanes + b, k]``: rows of A in panels of ``lanes`` (a matmul's A
    packed for a register tile), the loops in ``order`` of ``a``, ``k``, ``b``."""
    A = tc.placeholder((m * lanes, k), dtype, name="A")
    Y = tc.compute((m, k, lanes), lambda a, kk, b: A[a * lanes + b, kk], name="Y")
    dag = tc.ComputeDAG([A, Y])
    s = tc.Schedule(dag)
    ax = dict(zip("akb", s[Y].axes))
    s[Y].reorder(*[ax[c] for c in order])
    return dag, s


def _data(dtype, shape):
    if np.dtype(dtype).kind == "f":
        return RNG.standard_normal(shape).astype(dtype)
    return RNG.integers(-1 << 30, 1 << 30, shape).astype(dtype)


@pytest.mark.parametrize("lanes", [3, 4, 5, 6, 8, 12, 16, 17, 24, 32])
@pytest.mark.parametrize("k", [7, 16, 33, 100])
@pytest.mark.parametrize("order", ["abk", "akb"])
def test_panel_copies_match_numpy(lanes, k, order):
    dag, s = _panels(3, k, lanes, "float32", order)
    x = _data("float32", (3 * lanes, k))
    got = tc.build(dag, schedule=s)(x)
    np.testing.assert_array_equal(got, x.reshape(3, lanes, k).transpose(0, 2, 1))


@pytest.mark.parametrize("dtype", ["float64", "int32", "int8"])
@pytest.mark.parametrize("lanes", [6, 8, 16])
def test_panel_copies_of_other_dtypes(dtype, lanes):
    dag, s = _panels(2, 45, lanes, dtype, "abk")
    x = _data(dtype, (2 * lanes, 45)) if dtype != "int8" else RNG.integers(
        -100, 100, (2 * lanes, 45)).astype("int8")
    got = tc.build(dag, schedule=s)(x)
    np.testing.assert_array_equal(got, x.reshape(2, lanes, 45).transpose(0, 2, 1))


def _inner_nests(func):
    return [x for x in stmts(func.body) if isinstance(x, For) and isinstance(x.body, For)]


def test_a_panel_copy_is_planned_as_a_transpose():
    dag, s = _panels(4, 64, 16, "float32", "abk")
    plans = [transpose_plan(x, 512) for x in _inner_nests(tc.lower(s))]
    planned = [p for p in plans if p is not None]
    assert len(planned) == 1
    p, q, _, n = planned[0]
    assert (p.var.name, q.var.name, n) == ("kk", "b", 16)


def test_a_panel_narrower_than_a_block_takes_a_wide_block():
    dag, s = _panels(4, 64, 6, "float32", "abk")
    (plan,) = [p for p in map(lambda x: transpose_plan(x, 512), _inner_nests(tc.lower(s))) if p]
    assert plan[3] == 8


@pytest.mark.parametrize("shape", [(16, 1, 24), (1, 16, 24), (16, 4, 24), (16, 3, 5, 24)])
def test_a_write_back_with_loops_between_is_a_transpose(shape):
    """``Y[o, .., x] = A[x, .., o]`` vectorized along ``x`` (an NCHW conv tile's write-back, the
    tile vectorized along the channels ``o``): loops of one iteration between ``o`` and ``x`` are
    dropped and others moved outside, so ``o`` and ``x`` are a two-loop transposing copy emitted
    with shuffles, no gather or scatter."""
    A = tc.placeholder(shape[::-1], name="A")
    Y = tc.compute(shape, lambda *ix: A[ix[::-1]], name="Y")
    dag = tc.ComputeDAG([A, Y])
    s = tc.Schedule(dag)
    s[Y].vectorize(s[Y].axes[-1])  # the destination's rows as vectors: gathers from A unless
    (nest,) = [x for x in stmts(tc.lower(s).body) if isinstance(x, For)][:1]  # transposed
    sq = copy_nest(nest)
    while transpose_plan(sq, 256) is None and isinstance(sq.body, For):
        sq = sq.body  # the loops moved outside
    assert transpose_plan(sq, 256)[3] == 8
    k = tc.build(dag, schedule=s)
    assert "gather" not in k.source() and "scatter" not in k.source()
    x = _data("float32", shape[::-1])
    np.testing.assert_array_equal(k(x), x.transpose(tuple(range(len(shape)))[::-1]))


def test_copies_that_are_not_transposes_keep_their_loops():
    # a plain copy (both sides contiguous along one loop), a scaled copy and a 2-d stencil
    A = tc.placeholder((32, 48), name="A")
    plain = tc.compute((32, 48), lambda i, j: A[i, j], name="P")
    scaled = tc.compute((48, 32), lambda j, i: A[i, j] * 2.0, name="S")
    for out in (plain, scaled):
        dag = tc.ComputeDAG([A, out])
        s = tc.Schedule(dag)
        assert all(transpose_plan(x, 512) is None for x in _inner_nests(tc.lower(s)))
        x = _data("float32", (32, 48))
        want = x if out is plain else (x * 2.0).T
        np.testing.assert_array_equal(tc.build(dag, schedule=s)(x), want)


def test_a_transposing_copy_with_an_outer_parallel_loop_and_a_fused_source_row():
    # Q.K^T's pack: K[b, j, h, d] -> K'[b, h, j // 16, d, j % 16], the outer loops fused and parallel
    B, J, H, D, f = 2, 48, 3, 20, 16
    K = tc.placeholder((B, J, H, D), name="K")
    Y = tc.compute((B, H, J // f, D, f), lambda b, h, jo, d, ji: K[b, jo * f + ji, h, d],
                   name="Y")
    dag = tc.ComputeDAG([K, Y])
    s = tc.Schedule(dag)
    b, h, jo, d, ji = s[Y].axes
    s[Y].reorder(b, h, jo, ji, d)
    s[Y].parallel(s[Y].fuse(b, h, jo))
    x = _data("float32", (B, J, H, D))
    got = tc.build(dag, schedule=s)(x)
    np.testing.assert_array_equal(got, x.reshape(B, J // f, f, H, D).transpose(0, 3, 1, 4, 2))
