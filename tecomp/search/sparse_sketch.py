"""Sketch rules for stages with data-dependent loops (sparse rows): CSR/BSR SpMM and SDDMM.

Dense multi-level tiling does not fit a sparse stage: its reduction ``k`` runs over a row's
nonzeros (``[indptr[i], indptr[i+1])``), so it must sit inside the row loop, and it cannot be split
or cached by tile. What pays instead (the structure of hand-written SpMM kernels):

- SpMM (:class:`SparseRowTiling`): rows outer (parallel; balanced by the ``chunk`` decision of
  :mod:`.annotate`, since rows differ in length); the dense dimension ``N`` tiled, a tile of ``T``
  columns of the output row accumulated in a ``local`` cache (registers) computed at the column-tile
  loop, its inner ``V`` columns vectorized, so each nonzero costs ``T / V`` vector FMAs on one
  contiguous piece of a dense row. BSR: the block rows ``bs_r`` are split off the row loop (inside
  the column tile) and the block columns ``bs_c`` are unrolled inside the nonzero loop.
- SDDMM (:class:`SparseRaggedRows`): rows outer (parallel, balanced), the row's nonzeros, and the
  dot product over ``K`` split so that its inner part can be unrolled.

Tile sizes are holes (``T`` and ``V`` are the inner lengths of one split of ``N``); parallel fusion,
balance, vectorization and unrolling are decisions (:mod:`.annotate`). Nothing depends on the index
data's row lengths, so a tuned schedule is valid for any index data of the same shapes; and no
rule splits a loop whose extent is the nnz (the nonzero loops have data-dependent extents), so a
record serves the same DAG with any nnz through its family key
(:mod:`tecomp.schedule.record_family`).
"""
from __future__ import annotations

from ..ir.expr import BinOp, BinOpKind, Const, IterKind, TensorRead, Var
from ..ir.loop import Scope
from ..ir.traverse import walk
from ..schedule.compute_steps import CacheReadStep, CacheWriteStep, ComputeAtStep
from ..schedule.rfactor import RfactorStep
from ..schedule.state import Annotation, ComputeLocation, ScheduleError
from ..schedule.steps import AnnotationStep, ReorderStep, SplitStep
from . import analysis as an
from .sketch_rule import FollowHole, RuleResult, SketchRule, TileHole

__all__ = ["SparseRowTiling", "SparseRaggedRows", "SPARSE_RULES", "row_axis", "row_block",
           "panel_operand", "MAX_UNROLLED_BLOCK"]

#: block columns up to this many are unrolled inside the nonzero loop
MAX_UNROLLED_BLOCK = 16


def row_axis(op):
    """The spatial axis the data-dependent reduction bounds depend on (the sparse row), or None."""
    bounds = [e for r in op.reduce_axes if r.const_extent is None for e in (r.begin, r.end)]
    used = {id(v) for e in bounds for v in walk(e) if isinstance(v, Var)}
    rows = [a for a in op.axes if id(a) in used]
    return rows[0] if len(rows) == 1 else None


def row_block(op, axis) -> int:
    """Rows per sparse row of the index data: ``d`` when the reduction bounds read ``axis // d``
    (BSR block rows), else 1."""
    for r in op.reduce_axes:
        if r.const_extent is not None:
            continue
        for e in (r.begin, r.end):
            for x in walk(e):
                if isinstance(x, BinOp) and x.op is BinOpKind.FLOORDIV and x.a is axis \
                        and isinstance(x.b, Const) and x.b.value > 1:
                    return int(x.b.value)
    return 1


def _is_sparse_reduction(s) -> bool:
    return not s.is_placeholder and bool(s.op.reduce_axes) and \
        any(r.const_extent is None for r in s.op.reduce_axes)


class SparseRowTiling(SketchRule):
    """SpMM-like stages (a reduction over a row's nonzeros, rectangular output): cache the output
    tile, tile and vectorize the dense dimension, rows outer."""
    name = "sparse_rows"

    def meet(self, p, sid, task):
        s = p.state.stages[sid]
        if s.is_placeholder or s.relations or s.location is not ComputeLocation.ROOT \
                or s.scope is not Scope.GLOBAL or s.op.is_ragged or not _is_sparse_reduction(s):
            return RuleResult.SKIP
        spatial = [a for a in s.op.axes]
        if len(spatial) != 2 or row_axis(s.op) is None or row_axis(s.op) is not spatial[0] \
                or spatial[1].const_extent is None:
            return RuleResult.SKIP
        return RuleResult.APPLY_AND_SKIP_REST

    def apply(self, p, sid, task):
        op = p.state.stages[sid].op
        bs_r = row_block(op, op.axes[0])
        if bs_r > 1 and op.axes[0].const_extent % bs_r:
            raise ScheduleError(f"sparse rows: {op.axes[0].const_extent} rows are not whole blocks "
                                f"of {bs_r}")
        out = []
        panel = panel_operand(op) if bs_r == 1 else None
        if panel is not None:
            q = p.copy()
            _tile(q, sid, 1, panel)
            out.append((q, sid))  # (the copy sits before the cache: rules leave it, computed at)
        _tile(p, sid, bs_r)
        return [(p, sid - 1)] + out


def panel_operand(op) -> tuple | None:
    """``(tensor, dim)`` of the operand an SpMM reads along its column axis at data-dependent
    rows (``dense[indices[p], j]``, dim 1), which its column panels can copy; None if none."""
    col = op.axes[1]
    found = {}
    for x in walk(op.body):
        if not isinstance(x, TensorRead):
            continue
        dims = [d for d, i in enumerate(x.indices) if i is col]
        rest = [v for i in x.indices if i is not col for v in walk(i)]  # the other indices
        if len(dims) == 1 and any(isinstance(v, TensorRead) for v in rest) \
                and not any(v is col for v in rest):
            found.setdefault(id(x.tensor), (x.tensor, dims[0]))
    return next(iter(found.values())) if len(found) == 1 else None


def _tile(p, sid: int, bs_r: int, panel: tuple | None = None) -> None:
    """The SpMM tiling of stage ``sid``: rows outer (``panel`` None), or, with ``panel`` (see
    :func:`panel_operand`), the column tiles outer with that operand packed one column panel at
    a time inside them (``sparse_cols``: a panel of the dense rows, ``K x T``, stays in the cache
    of the core that multiplies it by every sparse row; rows outer read a tile of each of a
    row's dense rows from memory at a data-dependent place, and the rows' power-of-two stride
    maps them onto a few cache sets)."""
    st = p.state
    n_cols = st.stages[sid].op.axes[1].const_extent
    copy = src = None
    if panel is not None:
        src = next(k for k, s in enumerate(st.stages) if s.tensor is panel[0])
        copy = p.apply(CacheReadStep(src, Scope.GLOBAL, (sid,), (panel[1], 1)))
        sid += 1
    p.apply(CacheWriteStep(sid, Scope.LOCAL))
    local, out = sid, sid + 1
    row_name, col_name = (it.name for it in st.stages[out].iters[:2])
    if bs_r > 1:
        p.apply(SplitStep(out, st.iter_index(out, row_name), (bs_r,), True))
        order_rows = [f"{row_name}.0", f"{row_name}.1"]
    else:
        order_rows = [row_name]
    # N = outer x T/V x V: the tile T is computed in the cache, V is its vector width
    split = p.apply(SplitStep(out, st.iter_index(out, col_name), (1, 1), True),
                    lambda i: TileHole(i, n_cols, 3))
    cols = [f"{col_name}.{k}" for k in range(3)]
    if copy is None:
        order, at = [order_rows[0], cols[0]] + order_rows[1:] + cols[1:], cols[0]
    else:
        p.sketch.holes[copy] = FollowHole(copy, split, ((0, 2),))  # panels of T columns
        order, at = [cols[0], row_name] + cols[1:], row_name
    p.apply(ReorderStep(out, tuple(st.iter_index(out, nm) for nm in order)))
    p.apply(ComputeAtStep(local, out, st.iter_index(out, at)))
    if copy is not None:
        p.apply(ComputeAtStep(src + 1, out, st.iter_index(out, cols[0])))
    # the cache: row, the nonzeros (and block columns), then the tile's columns
    lrow, lcol = (it.name for it in st.stages[local].iters[:2])
    p.apply(SplitStep(local, st.iter_index(local, lcol), (1,), True),
            lambda i: FollowHole(i, split, ((1, 2),)))
    reds = [it.name for it in st.stages[local].iters if it.kind is IterKind.REDUCE]
    lorder = [lrow] + reds + [f"{lcol}.0", f"{lcol}.1"]
    p.apply(ReorderStep(local, tuple(st.iter_index(local, nm) for nm in lorder)))
    for nm in reds:  # BSR block columns: unrolled inside the nonzero loop
        it = st.stages[local].iters[st.iter_index(local, nm)]
        if it.const_extent is not None and 1 < it.const_extent <= MAX_UNROLLED_BLOCK:
            p.apply(AnnotationStep(local, st.iter_index(local, nm), Annotation.UNROLL))
    p.tag("sparse_cols" if copy is not None else
          "sparse_rows" + (f"_b{bs_r}" if bs_r > 1 else ""))


class SparseRaggedRows(SketchRule):
    """SDDMM-like stages (one output per nonzero, a dense reduction each): rows outer, the row's
    nonzeros, the reduction split. Two sketches: the split alone (its inner part unrolls), and the
    inner part factored out (rfactor) into a partials stage ``NAME.rf[nnz, V]`` whose ``V`` lanes
    are vectorized: without reassociation (no fast-math) that is the only way to vectorize a dot
    product; the stage then sums each nonzero's ``V`` partials."""
    name = "sparse_ragged"

    def meet(self, p, sid, task):
        s = p.state.stages[sid]
        if s.is_placeholder or s.relations or s.location is not ComputeLocation.ROOT \
                or not s.op.is_ragged or not an.has_data_dependent_loops(p.state, sid):
            return RuleResult.SKIP
        reds = [r for r in s.op.reduce_axes if r.const_extent is not None and r.const_extent > 1]
        return RuleResult.APPLY_AND_SKIP_REST if reds else RuleResult.SKIP

    def apply(self, p, sid, task):
        st = p.state
        first = None
        for it in list(st.stages[sid].iters):
            if it.kind is IterKind.REDUCE and it.const_extent is not None and it.const_extent > 1:
                p.apply(SplitStep(sid, st.iter_index(sid, it.name), (1,), True),
                        lambda i, ext=it.const_extent: TileHole(i, ext, 2))
                first = it.name if first is None else first
        out = []
        q = p.copy()
        q.tag("sparse_ragged")
        out.append((q, sid - 1))
        if first is not None and len(st.stages[sid].op.reduce_axes) == 1:
            r = p.copy()
            n_axes = len(r.state.stages[sid].op.axes)
            r.apply(RfactorStep(sid, r.state.iter_index(sid, f"{first}.1"), n_axes))
            # the partials stage (now at sid): rows, nonzeros, the rest of the reduction, the lanes
            rf = r.state.stages[sid]
            lanes = [it.name for it in rf.iters if it.kind is IterKind.SPATIAL
                     and it.const_extent is not None and it.name.endswith(".f")]
            others = [it.name for it in rf.iters if it.name not in lanes]
            r.apply(ReorderStep(sid, tuple(r.state.iter_index(sid, nm) for nm in others + lanes)))
            r.tag("sparse_ragged_rf")
            out.append((r, sid - 1))
        return out


#: the sparse rules, tried right after inlining, before the dense rules (they claim only sparse
#: stages, which the dense tiling would order badly)
SPARSE_RULES = [SparseRowTiling(), SparseRaggedRows()]

