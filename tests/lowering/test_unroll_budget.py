"""The unroll budget: functions that would emit too much code get their outermost unrolled loops
back as serial loops, compute the same, and small functions are left alone."""
import numpy as np
import pytest

import tecomp as tc
from tecomp.ir import dtype as dt
from tecomp.ir.expr import Const, Load, Var
from tecomp.ir.loop import Buffer, For, ForKind, PrimFunc, Store, seq, stmts
from tecomp.lowering import unroll_budget
from tecomp.lowering.unroll_budget import bound_unrolling, emitted_size
from tecomp.workloads.hand_schedules import matmul_schedule


def _matmul(m, n, k):
    A = tc.placeholder((m, k), name="A")
    B = tc.placeholder((k, n), name="B")
    return tc.ComputeDAG([A, B, tc.ops.matmul(A, B)])


def _kinds(func):
    return [s.kind for s in stmts(func.body) if isinstance(s, For)]


def test_emitted_size_counts_unrolled_trips_and_vector_chunks():
    a = Buffer("a", (64,), dt.float32)
    i, j = Var("i", dt.INDEX), Var("j", dt.INDEX)
    store = Store(a, (i,), Load(a, (i,)))
    one = emitted_size(store)
    inner = For(j, Const(0, dt.INDEX), Const(4, dt.INDEX), ForKind.UNROLLED, store)
    outer = For(i, Const(0, dt.INDEX), Const(16, dt.INDEX), ForKind.VECTORIZED, inner)
    # the loops' own bounds are 2 nodes each; 4 unrolled trips, 16 lanes = 2 chunks of 8
    assert emitted_size(inner) == 2 + 4 * one
    assert emitted_size(outer) == 2 + 2 * (2 + 4 * one)
    serial = For(j, Const(0, dt.INDEX), Const(4, dt.INDEX), ForKind.SERIAL, store)
    assert emitted_size(serial) == 2 + one


def test_a_function_within_the_budget_is_the_same_object():
    dag = _matmul(16, 16, 16)
    func = tc.lower(matmul_schedule(dag, tile_i=4, tile_j=8, unroll_k=2))
    assert emitted_size(func.body) <= unroll_budget.UNROLL_BUDGET
    assert bound_unrolling(func) is func
    with pytest.raises(ValueError, match="positive"):
        bound_unrolling(func, 0)


@pytest.mark.parametrize("budget", [60, 200, 600])
def test_over_the_budget_outer_unrolled_loops_turn_serial_and_compute_the_same(budget,
                                                                               monkeypatch):
    """A non-divisible register tile with k unrolled (guard versions copy the nest): bounded to a
    small budget it fits (or has no unrolled loop left), keeps the innermost unrolled loops
    longest, and still equals numpy natively and on the emulator."""
    m, n, k = 37, 45, 29
    dag = _matmul(m, n, k)
    sched = matmul_schedule(dag, tile_i=6, tile_j=24, unroll_k=4)
    free = tc.lower(sched)
    assert emitted_size(free.body) > budget
    bounded = bound_unrolling(free, budget)
    size = emitted_size(bounded.body)
    assert size <= budget or ForKind.UNROLLED not in _kinds(bounded)
    assert _kinds(bounded).count(ForKind.UNROLLED) < _kinds(free).count(ForKind.UNROLLED)
    assert len(_kinds(bounded)) == len(_kinds(free))  # loops change kind, none disappears
    monkeypatch.setattr(unroll_budget, "UNROLL_BUDGET", budget)
    assert emitted_size(tc.lower(sched).body) == size
    rng = np.random.default_rng(budget)
    a = rng.standard_normal((m, k)).astype("float32")
    b = rng.standard_normal((k, n)).astype("float32")
    kern = tc.build(dag, schedule=sched, cache=False)
    np.testing.assert_allclose(kern(a, b), a @ b, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(kern.emulate(a, b), a @ b, rtol=1e-4, atol=1e-4)


def test_the_largest_outermost_nest_is_demoted_first():
    """Two unrolled nests, one eight times the other: a budget between the two sizes demotes
    only the large one, and only its outer loop."""
    a = Buffer("a", (8, 64), dt.float32)
    i, j, p, q = (Var(x, dt.INDEX) for x in "ijpq")
    c = lambda v: Const(v, dt.INDEX)  # noqa: E731
    big = For(i, c(0), c(8), ForKind.UNROLLED,
              For(j, c(0), c(64), ForKind.UNROLLED, Store(a, (i, j), Const(1.0, dt.float32))))
    small = For(p, c(0), c(8), ForKind.UNROLLED,
                For(q, c(0), c(8), ForKind.UNROLLED, Store(a, (p, q), Const(2.0, dt.float32))))
    func = PrimFunc("f", [a], seq(big, small))
    budget = emitted_size(small) + emitted_size(big) // 4
    out = bound_unrolling(func, budget)
    kinds = {s.var.name: s.kind for s in stmts(out.body) if isinstance(s, For)}
    assert kinds == {"i": ForKind.SERIAL, "j": ForKind.UNROLLED,
                     "p": ForKind.UNROLLED, "q": ForKind.UNROLLED}
    assert emitted_size(out.body) <= budget


def test_a_nest_past_max_unroll_is_left_for_the_check_to_refuse():
    """One unrolled nest past MAX_UNROLL is the schedule's error (tests/e2e/test_hardening_limits):
    the budget does not quietly make it serial."""
    from tecomp.ir.loop import MAX_UNROLL
    a = Buffer("a", (4 * MAX_UNROLL,), dt.float32)
    i = Var("i", dt.INDEX)
    loop = For(i, Const(0, dt.INDEX), Const(4 * MAX_UNROLL, dt.INDEX), ForKind.UNROLLED,
               Store(a, (i,), Load(a, (i,))))
    func = PrimFunc("f", [a], loop)
    assert bound_unrolling(func, 10) is func


def test_shared_sub_expressions_are_counted_once():
    """A value squared 40 times over shares each level's node (2^40 paths as a tree): the size is
    the distinct nodes, found at once, as the emitter's per-node cache emits them."""
    from tecomp.ir.expr import BinOpKind, binary
    a = Buffer("a", (4,), dt.float32)
    i = Var("i", dt.INDEX)
    v = Load(a, (i,))
    for _ in range(40):
        v = binary(BinOpKind.MUL, v, v)
    n = emitted_size(Store(a, (i,), v))  # (a failing assert must not print the tree)
    assert n == 40 + 2  # the products, the load, and i (the load's and the store's index)
