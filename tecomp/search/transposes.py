"""Stages that change a tensor's layout, and loops that write across the rows of what they
store: predicates the sketch rules and the annotation share (split from :mod:`.analysis`,
which re-exports them)."""
from __future__ import annotations

from ..ir.expr import BinOp, BinOpKind, Const, TensorRead, Var
from ..ir.loop import Scope
from ..ir.traverse import walk
from ..schedule.state import State

__all__ = ["transposing_stages", "transpose_axes", "writes_across_rows"]


def transposing_stages(state: State) -> set:
    """Indices of the compute stages that change a tensor's layout: they read an input with
    their own axes (each index an axis, maybe shifted, as in padding) in another order, as an
    NCHW -> NHWC copy does. Its reads stride across the input, so at root it runs once; computed
    at or inlined into a reader's tiles, it would stride again for every tile that overlaps
    another (a Winograd input tile, a convolution's window)."""
    return {sid for sid, s in enumerate(state.stages) if _transposed_read(s) is not None}


def transpose_axes(state: State, sid: int) -> tuple | None:
    """``(write axis, read axis)`` of a layout-changing stage (:func:`transposing_stages`): the
    names of its innermost axis (contiguous in what it writes) and of the axis that indexes the
    last dimension of the tensor it reads (contiguous in what it reads), when they differ; a
    tile over both makes every cache line read and written whole. None for other stages."""
    s = state.stages[sid]
    order = _transposed_read(s)
    if order is None:
        return None
    axes = s.op.axes
    write, read = axes[-1].name, axes[order[-1]].name
    return None if write == read else (write, read)


def _transposed_read(s) -> list | None:
    """The order of the stage's own axes in the indices of a read that permutes them, if any.
    An axis that indexes two dimensions (``o // 16`` and ``o % 16``: a blocked layout read back)
    counts where it is last; ``c0 * 16 + c1`` (a blocked layout written) counts both axes."""
    if s.is_placeholder or s.op.reduce_axes or s.op.is_ragged:
        return None
    pos = {id(a): k for k, a in enumerate(s.op.axes)}
    for x in walk(s.op.body):
        if not isinstance(x, TensorRead):
            continue
        found = [_index_axes(i, pos) for i in x.indices]
        if any(f is None for f in found):
            continue
        flat = [k for f in found for k in f]
        order = [k for n, k in enumerate(flat) if k not in flat[n + 1:]]
        if order != sorted(order):
            return order
    return None


def _index_axes(e, pos: dict) -> list | None:
    """Positions of the axes in index ``e`` if it is simple: an axis plus an optional constant
    shift, an axis divided or taken modulo by a constant, or ``axis * const + axis``."""
    if isinstance(e, Var):
        return [pos[id(e)]] if id(e) in pos else None
    if not isinstance(e, BinOp):
        return None
    if e.op in (BinOpKind.ADD, BinOpKind.SUB) and isinstance(e.b, Const):
        return _index_axes(e.a, pos) if isinstance(e.a, Var) else None
    if e.op in (BinOpKind.FLOORDIV, BinOpKind.MOD) and isinstance(e.b, Const):
        return _index_axes(e.a, pos) if isinstance(e.a, Var) else None
    if e.op is BinOpKind.ADD and isinstance(e.a, BinOp) and e.a.op is BinOpKind.MUL \
            and isinstance(e.a.a, Var) and isinstance(e.a.b, Const) and isinstance(e.b, Var):
        outer, inner = _index_axes(e.a.a, pos), _index_axes(e.b, pos)
        return outer + inner if outer and inner else None
    return None


def writes_across_rows(state: State, sid: int) -> bool:
    """Whether the innermost loop of global stage ``sid`` moves only dimensions of what it
    writes other than the last (a transposing copy ordered to read its source's rows whole:
    ``B[j, k]`` packed to ``[j/64][k][64]`` with ``k`` innermost), so that its points are stored
    a row apart. A loop fused over the trailing dimensions moves the last one too, and a local
    tile buffer is laid out in loop order: both write contiguously."""
    s = state.stages[sid]
    if not s.iters or len(s.op.axes) < 2 or s.scope is not Scope.GLOBAL:
        return False
    var = s.iters[-1].var
    values = {id(a): v for a, v in s.nest().root_values.items()}

    def moves(a) -> bool:
        return any(x is var for x in walk(values.get(id(a), a)))
    return not moves(s.op.axes[-1]) and any(moves(a) for a in s.op.axes[:-1])
