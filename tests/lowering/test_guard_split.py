"""Guard versioning (tecomp.lowering.guard_split): whole tiles of non-divisible splits run without
their guards, the tail keeps them, and results stay exact."""
import numpy as np
import pytest

import tecomp as tc
from tecomp.ir import dtype as dt
from tecomp.ir.expr import BinOpKind, Const, Load, Var, binary, cast
from tecomp.ir.loop import Buffer, For, ForKind, IfThenElse, PrimFunc, Store, stmts, verify
from tecomp.lowering import lower_state, version_guards
from tecomp.workloads.hand_schedules import matmul_schedule


def _matmul(m, n, k):
    A = tc.placeholder((m, k), name="A")
    B = tc.placeholder((k, n), name="B")
    return tc.ComputeDAG([A, B, tc.ops.matmul(A, B)])


def _guards_in_vector_loops(stmt) -> int:
    return sum(1 for s in stmts(stmt) if isinstance(s, For) and s.kind is ForKind.VECTORIZED
               for x in stmts(s.body) if isinstance(x, IfThenElse))


def test_whole_tiles_run_unguarded_and_the_tail_guarded():
    dag = _matmul(100, 100, 64)
    s = matmul_schedule(dag, tile_i=6, tile_j=24)
    plain = lower_state(s.state)
    func = version_guards(plain)
    verify(func)
    versions = [x for x in stmts(func.body) if isinstance(x, IfThenElse) and x.else_ is not None]
    assert versions, "no loop was versioned"
    # column tile whole (outer version), then row tile whole (the version inside the row-tile
    # loop): no guard is left in its vector loops; the tails keep theirs
    cols = versions[0]
    rows = next(x for x in stmts(cols.then) if isinstance(x, IfThenElse) and x.else_ is not None)
    assert _guards_in_vector_loops(rows.then) == 0
    assert _guards_in_vector_loops(rows.else_) > 0
    assert _guards_in_vector_loops(cols.else_) > 0
    assert _guards_in_vector_loops(plain.body) > 0


@pytest.mark.parametrize("seed", range(6))
def test_random_non_divisible_tiles_match_numpy(seed):
    rng = np.random.default_rng(seed)
    m, n, k = (int(x) for x in rng.integers(5, 70, size=3))
    ti, tj, uk = int(rng.integers(1, 9)), int(rng.choice([8, 16, 24, 40])), int(rng.integers(1, 5))
    dag = _matmul(m, n, k)
    s = matmul_schedule(dag, tile_i=ti, tile_j=tj, unroll_k=uk, pack=bool(seed % 2))
    a = rng.standard_normal((m, k)).astype("float32")
    b = rng.standard_normal((k, n)).astype("float32")
    kern = tc.build(dag, schedule=s)
    np.testing.assert_allclose(kern(a, b), a @ b, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(kern.emulate(a, b), a @ b, rtol=1e-4, atol=1e-4)


def test_guards_that_always_hold_are_dropped_and_divisible_tiles_are_untouched():
    dag = _matmul(96, 96, 32)
    s = matmul_schedule(dag, tile_i=6, tile_j=24)
    plain = lower_state(s.state)
    assert version_guards(plain) is plain  # nothing guarded: the same function


def test_data_dependent_guards_are_kept():
    """A sparse row's end is a loaded value: no whole-tile predicate exists for it."""
    i, j = Var("i"), Var("j")
    ptr = Buffer("ptr", (9,), dt.int32)
    out = Buffer("out", (8, 8), dt.float32)
    cond = binary(BinOpKind.LT, j, cast(Load(ptr, (i,)), dt.INDEX))
    body = For(i, Const(0, dt.INDEX), Const(8, dt.INDEX), ForKind.SERIAL,
               For(j, Const(0, dt.INDEX), Const(8, dt.INDEX), ForKind.VECTORIZED,
                   IfThenElse(cond, Store(out, (i, j), Const(1.0, dt.float32)))))
    func = PrimFunc("f", [ptr, out], body)
    assert version_guards(func) is func
