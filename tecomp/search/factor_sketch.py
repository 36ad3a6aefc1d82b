"""The factor-out sketch rule: a sum over several axes whose summand has factors that read only
some of them is computed as two sums (:class:`~tecomp.schedule.factor_out.FactorOutStep`) when
that does less arithmetic, as an einsum path optimizer would; the rules then tile each sum.

Measured on the bilinear form ``sum_{i,j} x[b,i] W[i,j] y[b,j]`` (the operator suite's, 256 x 512
x 512): as written it is two multiplies per point, the factored form a matmul (one multiply-add)
and a 131k-point dot product; torch computes ``((x @ W) * y).sum(1)``.
"""
from __future__ import annotations

import math

from ..ir.expr import Reduce, TensorRead
from ..ir.opkind import ReduceKind
from ..ir.traverse import walk
from ..schedule.factor_out import (
    FactorOutStep,
    factor_position,
    partial_axes,
    product_factors,
    root_reduction_loops,
    split_factors,
)
from ..schedule.state import ComputeLocation
from .sketch_rule import RuleResult, SketchRule

__all__ = ["FactorReduction", "factoring_work"]


def _extent(axes) -> int:
    return math.prod(a.const_extent for a in axes)


def factoring_work(op) -> tuple[int, list]:
    """The multiplies and adds of ``op`` as written, and ``[(axis, work)]``: those of ``op``
    factored along each reduction axis where factoring hoists a factor that reads a tensor. A
    point of a product of ``n`` factors costs ``n`` (``n - 1`` multiplies and an add)."""
    body = op.body
    if not isinstance(body, Reduce) or body.kind is not ReduceKind.SUM or op.is_ragged \
            or len(op.reduce_axes) < 2 \
            or any(a.const_extent is None for a in op.axes + op.reduce_axes):
        return 0, []
    written = _extent(op.axes + op.reduce_axes) * len(product_factors(body.source))
    out = []
    for axis in op.reduce_axes:
        kept, hoisted = split_factors(op, axis)
        if not kept or not any(isinstance(x, TensorRead) for f in hoisted for x in walk(f)):
            continue  # (a constant factor costs a multiply, not a read: not worth a stage)
        spatial, reads_axis = partial_axes(op, axis, kept)
        keep = spatial + [axis] * reads_axis
        if not keep:
            continue
        others = [a for a in op.reduce_axes if a is not axis]
        partial = _extent(keep) * _extent(others) * len(kept)
        out.append((axis, partial + _extent(op.axes) * axis.const_extent * (len(hoisted) + 1)))
    return written, out


class FactorReduction(SketchRule):
    """An untransformed sum at root over several axes that does less work factored
    (:func:`factoring_work`): one sketch per cheapest axis, each going on at the stage itself
    (now one sum over that axis) and then the partial sums before it. Factoring removes work
    every later structure would repeat, so the unfactored sketches are dropped."""
    name = "factor"

    def _best(self, p, sid):
        s = p.state.stages[sid]
        if s.is_placeholder or s.relations or s.location is not ComputeLocation.ROOT:
            return []
        written, work = factoring_work(s.op)
        least = min((w for _, w in work), default=written)
        return [a for a, w in work if w == least] if least < written else []

    def meet(self, p, sid, task):
        return RuleResult.APPLY_AND_SKIP_REST if self._best(p, sid) else RuleResult.SKIP

    def apply(self, p, sid, task):
        out = []
        s = p.state.stages[sid]
        loop_of = {id(a): n for n, a in root_reduction_loops(s).items()}
        for axis in self._best(p, sid):
            pos = loop_of[id(axis)]
            q = p.copy()
            q.apply(FactorOutStep(sid, pos, factor_position(s.op, axis)))
            q.tag("factor")
            out.append((q, sid + 1))  # the stage (now after its partial sums) first
        return out
