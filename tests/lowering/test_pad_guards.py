"""Private tiles compute their padding instead of masking it (lowering/pad_guards.py)."""
import numpy as np
import pytest

import tecomp as tc
from tecomp.ir.loop import IfThenElse, Scope, Store, stmts
from tecomp.lowering import lower
from tecomp.workloads import builders as W


def _register_tile(m, n, k, rows, lanes, pack: bool, ksplit: int | None = None,
                   pack_rows: bool = False):
    """``C = A.B`` with a ``rows x lanes`` tile of C accumulated in a local buffer over all of k,
    B packed in panels of ``lanes`` columns (or read in place), the tile loops outermost."""
    wl = W.matmul(m, n, k)
    s = tc.Schedule(wl.dag)
    A, B = wl.dag.inputs
    C = wl.dag.outputs[0]
    CC = s.cache_write(C, "local")
    if pack:
        s.cache_read(B, "global", [CC], pack=(1, lanes))
    if pack_rows:
        s.cache_read(A, "global", [CC], pack=(0, rows))
    i, j = s[C].axes
    io, ii = s[C].split(i, factor=rows)
    jo, ji = s[C].split(j, factor=lanes)
    s[C].reorder(io, jo, ii, ji)
    s[C].parallel(s[C].fuse(io, jo))
    s[C].vectorize(ji)
    s[CC].compute_at(s[C], s[C].axes[0])
    ci, cj = s[CC].axes
    (kk,) = s[CC].reduce_axes
    if ksplit:
        ko, ki = s[CC].split(kk, factor=ksplit)
        s[CC].reorder(ko, ki, ci, cj)
    else:
        s[CC].reorder(kk, ci, cj)
    s[CC].vectorize(cj)
    return wl, s


def _local_guards(func) -> list:
    """The guards around stores to local buffers (not the versioning of whole tiles: an if with
    an else)."""
    return [s for s in stmts(func.body) if isinstance(s, IfThenElse) and s.else_ is None
            and any(isinstance(x, Store) and x.buffer.scope is Scope.LOCAL for x in stmts(s.then))]


def _check(wl, s):
    rng = np.random.default_rng(0)
    a, b = (rng.uniform(-1, 1, t.shape).astype("float32") for t in wl.dag.inputs)
    got = tc.build(wl.dag, target="llvm", schedule=s)(a, b)
    np.testing.assert_allclose(got, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)


def test_a_packed_tiles_padded_lanes_are_computed_not_masked():
    # 100 columns in panels of 24: the last panel holds 4 real columns. Its packed panel is
    # allocated whole and zero-filled, so the tile's accumulation needs no lane guard
    wl, s = _register_tile(44, 100, 37, 4, 24, pack=True)
    assert _local_guards(lower(s)) == []
    _check(wl, s)


@pytest.mark.parametrize("case", ["unpacked", "split reduction"])
def test_guards_stay_where_a_padded_point_would_read_out_of_bounds_or_add_to_a_sum(case):
    if case == "unpacked":  # B read in place: a padded lane would read past B's last column
        wl, s = _register_tile(45, 100, 37, 4, 24, pack=False)
    else:  # 37 = 3 x 13 - 2: the padded reductions would add to valid sums
        wl, s = _register_tile(44, 96, 37, 4, 24, pack=True, ksplit=13)
    assert _local_guards(lower(s))
    _check(wl, s)


def test_padded_rows_keep_the_guard_when_they_read_past_the_input():
    # 45 rows in tiles of 4: the last tile's 3 padded rows would read A[45..47]; the lanes are
    # whole (96 = 4 x 24), so the only guard is the rows'
    wl, s = _register_tile(45, 96, 37, 4, 24, pack=True)
    assert _local_guards(lower(s))
    _check(wl, s)


def test_a_scalar_loops_guard_stays_where_its_padding_could_be_computed():
    # A packed in panels of 4 rows: the padded rows would read zeros inside A's copy, but their
    # guard is a branch of the scalar row loop, which skips their work instead of masking lanes
    wl, s = _register_tile(45, 96, 37, 4, 24, pack=True, pack_rows=True)
    f = lower(s)
    assert _local_guards(f)
    assert "A.global" in str(f)
    _check(wl, s)


@pytest.mark.parametrize("seed", range(10))
def test_random_register_tiles_compute_the_matmul_whether_or_not_their_guards_drop(seed):
    rng = np.random.default_rng(seed)
    m, n, k = (int(v) for v in rng.integers(5, 70, 3))
    rows, lanes = int(rng.integers(1, 7)), int(rng.choice([4, 8, 16, 24]))
    ksplit = int(rng.integers(2, k)) if rng.random() < 0.5 else None
    wl, s = _register_tile(m, n, k, rows, lanes, pack=bool(rng.random() < 0.7), ksplit=ksplit,
                           pack_rows=bool(rng.random() < 0.5))
    _check(wl, s)
