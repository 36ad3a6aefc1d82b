"""Guard versioning (tecomp.lowering.guard_split): whole tiles of non-divisible splits run without
their guards, the tail keeps them, and results stay exact."""
import numpy as np
import pytest

import tecomp as tc
from tecomp.ir import dtype as dt
from tecomp.ir.expr import BinOpKind, Const, Load, Var, binary, cast
from tecomp.ir.loop import Buffer, For, ForKind, IfThenElse, PrimFunc, Store, stmts, verify
from tecomp.ir.traverse import walk
from tecomp.lowering import lower_state, version_guards
from tecomp.workloads.hand_schedules import matmul_schedule
from tecomp.workloads.reference import ref_conv2d


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
    # (a packed B's padding select is versioned too: the first version with one inside it)
    cols = next(v for v in versions if any(isinstance(x, IfThenElse) and x.else_ is not None
                                           for x in stmts(v.then)))
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


def _padded_conv(rng, depthwise: bool):
    """A random NCHW conv whose zero padding is inlined (a select per element read), tiled
    over output rows and columns with vectorized columns."""
    C = int(rng.integers(1, 5))
    H, W = (int(x) for x in rng.integers(5, 30, size=2))
    k, stride, pad = int(rng.choice([1, 3, 5])), int(rng.integers(1, 3)), int(rng.integers(0, 3))
    O = C if depthwise else int(rng.integers(1, 5))
    data = tc.placeholder((1, C, H, W), name="data")
    weight = tc.placeholder((O, 1 if depthwise else C, k, k), name="weight")
    out = tc.ops.conv2d(data, weight, stride=stride, padding=pad, groups=C if depthwise else 1)
    dag = tc.ComputeDAG([data, weight, out])
    s = tc.Schedule(dag)
    pad_t = next((st.tensor for st in dag.compute_stages if st.name == "pad"), None)
    if pad_t is not None:
        s[pad_t].compute_inline()
    C_ = dag.outputs[0]
    n, o, y, x = s[C_].axes
    yo, yi = s[C_].split(y, factor=int(rng.integers(1, 4)))
    xo, xi = s[C_].split(x, factor=int(rng.choice([4, 8, 16])))
    s[C_].reorder(n, o, yo, xo, yi, xi)
    if rng.random() < 0.7:
        s[C_].parallel(s[C_].fuse(n, o, yo, xo) if rng.random() < 0.5 else s[C_].fuse(n, o, yo))
    s[C_].vectorize(xi)
    return dag, s, dict(stride=stride, padding=pad, groups=C if depthwise else 1)


def _selects_in_vector_stores(stmt) -> int:
    from tecomp.ir.expr import Select
    from tecomp.ir.traverse import walk
    return sum(1 for f in stmts(stmt) if isinstance(f, For) and f.kind is ForKind.VECTORIZED
               for st in stmts(f.body) if isinstance(st, Store)
               for e in walk(st.value) if isinstance(e, Select))


def test_an_inlined_padding_reads_interior_tiles_without_selects():
    rng = np.random.default_rng(3)
    data = tc.placeholder((1, 8, 40, 40), name="data")
    weight = tc.placeholder((8, 1, 3, 3), name="weight")
    out = tc.ops.conv2d(data, weight, stride=2, padding=1, groups=8)
    dag = tc.ComputeDAG([data, weight, out])
    s = tc.Schedule(dag)
    s[next(st.tensor for st in dag.compute_stages if st.name == "pad")].compute_inline()
    n, o, y, x = s[out].axes
    xo, xi = s[out].split(x, factor=4)
    s[out].parallel(s[out].fuse(n, o, y, xo))  # the selects version at the parallel loop
    s[out].vectorize(xi)
    plain = lower_state(s.state)
    func = version_guards(plain)
    verify(func)
    assert _selects_in_vector_stores(plain.body) > 0
    versions = [x for x in stmts(func.body) if isinstance(x, IfThenElse) and x.else_ is not None]
    assert versions, "the padding's selects were not versioned"
    inner = [v for v in versions if _selects_in_vector_stores(v.then) == 0]
    assert inner, "no version reads without selects"
    assert all(_selects_in_vector_stores(v.else_) > 0 for v in inner)  # the border keeps them
    a = rng.standard_normal((1, 8, 40, 40)).astype("float32")
    w = rng.standard_normal((8, 1, 3, 3)).astype("float32")
    kern = tc.build(dag, schedule=s)
    ref = ref_conv2d(a, w, stride=2, padding=1, groups=8)
    np.testing.assert_allclose(kern(a, w), ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("seed", range(8))
def test_random_inlined_paddings_match_the_default_schedule(seed):
    rng = np.random.default_rng(100 + seed)
    dag, s, params = _padded_conv(rng, depthwise=bool(seed % 2))
    a = rng.standard_normal(tuple(dag.inputs[0].shape)).astype("float32")
    w = rng.standard_normal(tuple(dag.inputs[1].shape)).astype("float32")
    kern = tc.build(dag, schedule=s)
    ref = ref_conv2d(a, w, **params)
    np.testing.assert_allclose(kern(a, w), ref, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(kern.emulate(a, w), ref, rtol=1e-4, atol=1e-4)


def test_a_tail_tile_versions_its_whole_vectors_below_unit_loops():
    """Unit tile loops (extent 1) under a version do not re-version the tail with the same
    predicate: the version depth is left for the loop that splits the tail tile's whole vectors
    (columns 96..119 of a 96..143 tile of 130 columns) from its last, partial one."""
    dag = _matmul(8, 130, 16)
    C = dag.outputs[0]
    s = tc.Schedule(dag)
    i, j = s[C].axes
    (k,) = s[C].reduce_axes
    jo, ji = s[C].split(j, factor=48)
    jo, u1 = s[C].split(jo, factor=1)
    jo, u2 = s[C].split(jo, factor=1)
    jo, u3 = s[C].split(jo, factor=1)
    j2, j3 = s[C].split(ji, factor=24)
    s[C].reorder(jo, u3, u2, u1, i, k, j2, j3)
    s[C].vectorize(j3)
    func = version_guards(lower_state(s.state))
    verify(func)
    top = next(x for x in stmts(func.body) if isinstance(x, IfThenElse) and x.else_ is not None)
    inner = [x for x in stmts(top.else_) if isinstance(x, IfThenElse) and x.else_ is not None]
    # the version that splits them is at the two-vector loop (j2) of the tail
    halves = {id(x.var) for x in stmts(top.else_) if isinstance(x, For)
              and isinstance(x.extent, Const) and x.extent.value == 2}
    at_j2 = [v for v in inner if any(isinstance(x, Var) and id(x) in halves
                                     for x in walk(v.cond))]
    assert at_j2, "the tail tile's whole vectors were not versioned"
    assert all(_guards_in_vector_loops(v.then) == 0 and _guards_in_vector_loops(v.else_) > 0
               for v in at_j2)
    rng = np.random.default_rng(0)
    a = rng.standard_normal((8, 16)).astype("float32")
    b = rng.standard_normal((16, 130)).astype("float32")
    kern = tc.build(dag, schedule=s)
    np.testing.assert_allclose(kern(a, b), a @ b, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(kern.emulate(a, b), a @ b, rtol=1e-4, atol=1e-4)


def _column_selects(stmt) -> int:
    """The selects whose condition reads the column loops (``x.*``) in ``stmt``'s stores."""
    from tecomp.ir.expr import Select
    return sum(1 for st in stmts(stmt) if isinstance(st, Store) for e in walk(st.value)
               if isinstance(e, Select) and any(isinstance(v, Var) and v.name.startswith("x.")
                                                for v in walk(e.cond)))


def test_a_serial_column_loop_splits_at_the_padding():
    """The column loop of a row tile (serial, inside the parallel row loop) runs as three loops:
    the first column chunk and the last with the padding's selects, the interior without them and
    without any test per chunk; the result and the emulator's are the reference's."""
    rng = np.random.default_rng(5)
    data = tc.placeholder((1, 4, 30, 34), name="data")
    weight = tc.placeholder((4, 1, 3, 3), name="weight")
    out = tc.ops.conv2d(data, weight, stride=2, padding=1, groups=4)  # 15 x 17 outputs
    dag = tc.ComputeDAG([data, weight, out])
    s = tc.Schedule(dag)
    s[next(st.tensor for st in dag.compute_stages if st.name == "pad")].compute_inline()
    n, o, y, x = s[out].axes
    xo, xi = s[out].split(x, factor=4)  # 5 chunks, the last one partial
    s[out].reorder(n, o, y, xo, *s[out].reduce_axes, xi)
    s[out].parallel(s[out].fuse(n, o, y))
    s[out].vectorize(xi)
    func = version_guards(lower_state(s.state))
    verify(func)
    cols = [f for f in stmts(func.body) if isinstance(f, For) and f.var.name == "x.0"]
    spans = sorted({(int(f.begin.value), int(f.extent.value)) for f in cols})
    assert (1, 3) in spans and (0, 1) in spans and (4, 1) in spans, spans
    for f in cols:  # (the border rows' version keeps the rows' selects in every piece)
        interior = (int(f.begin.value), int(f.extent.value)) == (1, 3)
        assert (_column_selects(f.body) == 0) == interior
    a = rng.standard_normal((1, 4, 30, 34)).astype("float32")
    w = rng.standard_normal((4, 1, 3, 3)).astype("float32")
    kern = tc.build(dag, schedule=s)
    ref = ref_conv2d(a, w, stride=2, padding=1, groups=4)
    np.testing.assert_allclose(kern(a, w), ref, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(kern.emulate(a, w), ref, rtol=1e-5, atol=1e-5)
