"""Short output rows fused before tiling (``analysis.row_fusion``, the ``+rows`` sketches) and
the address merge that keeps their register tiles in registers (``arith.merge_fused_dims``)."""
import re

import numpy as np
import pytest

import tecomp as tc
from tecomp.ir import dtype as dt
from tecomp.ir.arith import merge_fused_dims
from tecomp.ir.expr import BinOpKind, Var, binary
from tecomp.ir.loop import Scope
from tecomp.search import analysis as an
from tecomp.search.target_search import generate_sketches, materialize
from tecomp.search.task import SearchTask
from tecomp.testing import workloads as W


def _conv(layout, size, stride=1, method="direct", C=16, O=32, k=3):
    return W.conv2d(1, C, size, size, O, k, k, stride, k // 2, 1, 1, layout, method)


def _rows(wl):
    return [(i, s) for i, s in enumerate(generate_sketches(SearchTask(wl.dag)))
            if s.name.endswith("+rows")]


def test_merge_fused_dims():
    f = Var("f", dt.INDEX)
    g = Var("g", dt.INDEX)
    div, mod = binary(BinOpKind.FLOORDIV, f, 7), binary(BinOpKind.MOD, f, 7)
    # (n, f // 7, f % 7, o) row-major over (1, 7, 7, 32): the pixel pair is f with stride 32
    out = merge_fused_dims((g, div, mod, g), (7 * 7 * 32, 7 * 32, 32, 1))
    assert [(e is f or e is g, s) for e, s in out] == [(True, 1568), (True, 32), (True, 1)]
    assert out[1][0] is f
    # a box wider than the fused row (a padded image: 9 columns) keeps both indices
    assert len(merge_fused_dims((div, mod), (9 * 32, 32))) == 2
    # different dividends, or different divisors, keep both
    assert len(merge_fused_dims((div, binary(BinOpKind.MOD, g, 7)), (7, 1))) == 2
    assert len(merge_fused_dims((binary(BinOpKind.FLOORDIV, f, 6), mod), (7, 1))) == 2


def test_row_fusion_picks_short_rows_outside_the_vector():
    def rows_of(wl, vector=None):
        state = tc.Schedule(wl.dag).state
        sid = next(i for i, s in enumerate(state.stages) if s.op is wl.dag.outputs[0].op)
        r = an.row_fusion(state, sid, vector)
        return None if r is None else [state.stages[sid].iters[k].name for k in r]

    assert rows_of(_conv("NHWC", 7)) == ["y", "x"]
    assert rows_of(_conv("NHWC", 14, 2)) == ["y", "x"]  # 7x7 output
    assert rows_of(_conv("NHWC", 28)) is None  # rows long enough
    assert rows_of(_conv("NCHW", 7)) is None  # the 7-wide rows carry the vector
    assert rows_of(_conv("NCHW", 7), "o") == ["y", "x"]  # the channels carry it
    assert rows_of(_conv("NHWC", 7, O=8)) is None  # too few channels for a vector
    # an NCHW image 8 rows high, 32 wide: the channels and the rows index different inputs
    assert rows_of(W.conv2d(1, 16, 8, 32, 32, 3, 3, 1, 1, 1, 1, "NCHW", "direct")) is None


def test_fused_rows_is_not_an_rfactor_piece():
    """The parallel loop's stop at a rows accumulator (annotate._parallel) looks for loops fused
    from the stage's own axes: an rfactor's partials loop, made of fused reduction pieces, is
    not one."""
    wl = _conv("NHWC", 7, C=64, O=64)
    (i, sk), = _rows(wl)
    state = tc.Schedule(wl.dag, sk.steps).state
    assert any(an.fused_rows(st) for st in state.stages if not st.is_placeholder)
    x = tc.placeholder((4, 7, 7), name="x")
    ry, rx = tc.reduce_axis(7, name="ry"), tc.reduce_axis(7, name="rx")
    s = tc.compute((4,), lambda c: tc.sum(x[c, ry, rx], axis=[ry, rx]), name="s")
    dag = tc.ComputeDAG([x, s])
    for sk2 in generate_sketches(SearchTask(dag)):
        st = tc.Schedule(dag, sk2.steps).state
        for stage in st.stages:
            if not stage.is_placeholder:
                assert not an.fused_rows(stage), (sk2.name, [it.name for it in stage.iters])


@pytest.mark.parametrize("layout,size,stride,method", [
    ("NHWC", 7, 1, "direct"), ("NHWC", 13, 2, "direct"), ("NCHW", 7, 1, "direct"),
    ("NCHW", 6, 1, "channels_last"), ("NCHW", 7, 1, "blocked")])
def test_rows_sketches_compute_the_convolution(layout, size, stride, method):
    wl = _conv(layout, size, stride, method)
    rows = _rows(wl)
    assert rows, [s.name for s in generate_sketches(SearchTask(wl.dag))]
    task = SearchTask(wl.dag)
    rng = np.random.default_rng(1)
    x = wl.make_inputs(rng)
    ref = wl.reference(x)[0]
    for i, sk in rows:
        assert "fuse1" in sk.name  # the accumulator only at the outer tile
        for _ in range(3):
            c = materialize(task, i, sk, {}, rng)
            assert c is not None
            local = next(s for s in c.state.stages if s.scope is Scope.LOCAL)
            assert any("@" in it.name for it in local.iters), [it.name for it in local.iters]
            k = tc.build(wl.dag, schedule=tc.Schedule(wl.dag, c.steps), cache=False)
            np.testing.assert_allclose(k(*x), ref, rtol=1e-3, atol=1e-3)


def test_rows_register_tile_stays_in_registers():
    """A 6x16 tile across the rows of a 7x7 NHWC image: each reduction step loads the weight
    vectors and broadcasts six pixels, and no accumulator goes through memory."""
    wl = _conv("NHWC", 7, C=64, O=64)
    task = SearchTask(wl.dag)
    (i, sk), = _rows(wl)
    holes = {h: v for h, v in sk.holes.items() if type(v).__name__ == "TileHole"}
    n, f, o, ry, rx, rc = sorted(holes)
    d = {"sketch": sk.name, "tile": {str(n): [1, 1, 1], str(f): [9, 1, 6], str(o): [2, 1, 16],
                                     str(ry): [1], str(rx): [1], str(rc): [1]},
         "unroll": {"conv2d.local": 64}, "vec": {"conv2d.local": 0}, "par": {"conv2d": 3},
         "loc": {"pad": 0}}
    c = materialize(task, i, sk, d, np.random.default_rng(0))
    k = tc.build(wl.dag, schedule=tc.Schedule(wl.dag, c.steps), cache=False)
    rng = np.random.default_rng(2)
    x = wl.make_inputs(rng)
    np.testing.assert_allclose(k(*x), wl.reference(x)[0], rtol=1e-3, atol=1e-3)
    if "+avx2" not in tc.Target.parse("llvm").features and \
            "+avx512f" not in tc.Target.parse("llvm").features:
        pytest.skip("no 256-bit vectors here")
    asm = k.compiled.assembly()
    # the innermost loops (a label to its own back branch) with a 6x16 tile's FMAs, 12 on ymm
    # registers (AVX2) or 6 on zmm (AVX-512): every accumulator stays in a register (no vector
    # store inside the loop)
    bodies = []
    for m in re.finditer(r"^(\.LBB\w+):$", asm, re.M):
        back = re.search(rf"^\s*j\w+\s+{re.escape(m.group(1))}$", asm[m.end():], re.M)
        b = asm[m.end():m.end() + back.start()] if back else ""
        fmas = 6 if re.search(r"vfmadd\w+\s+.*%zmm", b) else 12
        if b.count("vfmadd") >= fmas and b.count("vbroadcastss") >= 6 \
                and not re.search(r"^\.LBB\w+:", b, re.M):  # innermost loops only
            bodies.append(b)
    assert bodies, asm[:4000]
    for b in bodies:
        assert not re.search(r"vmov[au]ps\s+%[yz]mm\d+, -?\d*\(", b), b


def test_cover_spans_the_extent():
    from tecomp.search.register_tile import cover
    assert cover([1, 1, 6], 49) == [9, 1, 6]  # nine 6-row tiles, one outer tile
    assert cover([9, 1, 6], 49) == [9, 1, 6]
    assert cover([1, 7, 1], 49) == [7, 7, 1]
    assert cover([3, 3, 1], 49) == [49, 1, 1]  # 3 does not divide 49 tiles: the middle goes
    assert cover([7], 49) == [49]
    assert cover([], 49) == []


def test_rows_samples_are_register_tiles_over_every_row():
    """The fused rows' hole covers its extent, and every fresh sample draws a register tile
    along it (the reason for the sketch)."""
    from tecomp.search.sketch_rule import TileHole
    wl = _conv("NHWC", 7, C=64, O=64)
    task = SearchTask(wl.dag)
    (i, sk), = _rows(wl)
    covers = [h for h in sk.holes.values() if type(h) is TileHole and h.covers]
    assert [h.extent for h in covers] == [49]
    rng = np.random.default_rng(3)
    for _ in range(30):
        c = materialize(task, i, sk, {}, rng)
        lengths = c.decisions.to_json()["tile"][str(covers[0].step)]
        assert np.prod(lengths) >= 49, lengths
        assert lengths[-1] > 1, lengths  # a register tile's rows (at least 2 here)


def test_parallel_loop_stops_at_the_rows_accumulator():
    """Fused past the loop the accumulator is computed at, the parallel loop would cut the fused
    rows into pieces of rows, each needing a box of two rows: it stops there."""
    wl = _conv("NHWC", 7, C=64, O=64)
    task = SearchTask(wl.dag)
    (i, sk), = _rows(wl)
    rng = np.random.default_rng(4)
    seen = set()
    for _ in range(20):
        c = materialize(task, i, sk, {}, rng)
        local = next(s for s in c.state.stages if s.scope is Scope.LOCAL)
        out = c.state.stages[local.attach[0]]
        first = out.iters[0].name
        seen.add(first)
        assert ".1" not in first, [it.name for it in out.iters]  # no loop inside the attach
        assert local.region[1][1] == 7 and local.region[2][1] == 7  # every row, whole
    assert "n.0@y@x.0@o.0" in seen, seen  # the default: every outer loop in parallel


def test_covering_hole_mutates_among_its_inner_levels():
    """A factor moved to the outermost level of a covering hole would be moved back by
    materialization (a wasted mutation): mutation keeps them among the inner levels."""
    from tecomp.search.evolution import _mutate_tile
    from tecomp.search.sketch_rule import TileHole
    rng = np.random.default_rng(5)
    for covers, share in ((True, 0.85), (False, None)):
        hole = TileHole(0, 49, 4, covers=covers)
        spans = sum(np.prod(_mutate_tile(rng, [1, 7, 7], hole)) == 49 for _ in range(300)) / 300
        if covers:
            assert spans >= share, spans
        else:
            assert spans < 0.85, spans  # (the plain hole does move factors outside)
