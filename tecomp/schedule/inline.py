"""Inlining: reads of inlined stages are replaced by their expressions (recursively)."""
from __future__ import annotations

from ..ir.expr import Expr, TensorRead
from ..ir.traverse import substitute, transform, walk
from .state import ComputeLocation, State

__all__ = ["expand_inline", "effective_readers", "stage_exprs"]


def expand_inline(state: State, e: Expr, by_tensor: dict | None = None) -> Expr:
    """``e`` with every read of an inlined stage replaced by that stage's body."""
    if by_tensor is None:
        by_tensor = {id(s.tensor): s for s in state.stages}

    def fn(x):
        if isinstance(x, TensorRead):
            s = by_tensor.get(id(x.tensor))
            if s is not None and s.location is ComputeLocation.INLINE:
                idx = [transform(i, fn) for i in x.indices]
                body = substitute(s.op.body, dict(zip(s.op.axes, idx)))
                return transform(body, fn)
        return None
    return transform(e, fn)


def stage_exprs(stage) -> list:
    """The expressions of a stage that read tensors: its body and its loop bounds."""
    op = stage.op
    out = [op.body]
    for a in op.axes + op.reduce_axes:
        out += [a.begin, a.end]
    return out


def effective_readers(state: State, sid: int) -> set:
    """Indices of non-inlined stages that read stage ``sid``'s tensor, directly or through inlined
    stages."""
    t = state.stages[sid].tensor
    by_tensor = {id(s.tensor): s for s in state.stages}
    out = set()
    for n, s in enumerate(state.stages):
        if s.is_placeholder or s.location is ComputeLocation.INLINE:
            continue
        for e in stage_exprs(s):
            if any(isinstance(x, TensorRead) and x.tensor is t
                   for x in walk(expand_inline(state, e, by_tensor))):
                out.add(n)
                break
    return out
