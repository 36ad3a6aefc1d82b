"""factor_out: split a sum over several axes into two sums by distributivity.

``s[b] = sum_{i,j} x[b,i] W[i,j] y[b,j]`` computed as written costs two multiplies per point;
``y[b,j]`` does not depend on ``i``, so ``s[b] = sum_j y[b,j] * (sum_i x[b,i] W[i,j])``: a matmul
and a short dot product, one multiply-add per point. On a chain ``sum_{k,l} A[i,k] B[k,l]
C[l,j]`` the partial sum also drops the axis ``j`` it no longer reads: O(n^3) instead of O(n^4).
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import ClassVar

from ..ir import dtype as dt
from ..ir.expr import BinOp, Const, IterKind, IterVar, Reduce, TensorRead
from ..ir.opkind import BinOpKind, ReduceKind
from ..ir.tensor import ComputeOp, Tensor
from ..ir.traverse import free_vars, substitute, walk
from .compute_steps import insert_stage
from .state import ComputeLocation, ScheduleError, StageState
from .steps import Step, checked_iter, checked_stage, iter_repr, register_step, stage_repr

__all__ = ["FactorOutStep", "product_factors", "split_factors", "partial_axes", "factor_position",
           "root_reduction_loops"]


def product_factors(e) -> list:
    """The factors of a product tree ``a * b * ...`` in order (``[e]`` when ``e`` is no product)."""
    if isinstance(e, BinOp) and e.op is BinOpKind.MUL:
        return product_factors(e.a) + product_factors(e.b)
    return [e]


def split_factors(op, axis) -> tuple[list, list]:
    """``op``'s summand split by reduction ``axis``: (kept, hoisted), where the hoisted factors
    read none of the other reduction axes, so they can multiply the partial sum over those axes
    instead of every term of it."""
    others = {id(a) for a in op.reduce_axes if a is not axis}
    kept, hoisted = [], []
    for f in product_factors(op.body.source):
        (kept if any(id(v) in others for v in free_vars(f)) else hoisted).append(f)
    return kept, hoisted


def partial_axes(op, axis, kept) -> tuple[list, bool]:
    """The spatial axes of ``op`` the kept factors read, in order, and whether they read
    ``axis``: the partial sums' axes but for ``axis``'s place among them."""
    used = {id(v) for f in kept for v in free_vars(f)}
    return [a for a in op.axes if id(a) in used], id(axis) in used


def root_reduction_loops(stage) -> dict:
    """Loop index -> reduction axis, for the loops of ``stage`` that are a root reduction axis
    itself (every one of an untransformed stage)."""
    root = stage.nest().root_values
    return {n: a for a in stage.op.reduce_axes for n, it in enumerate(stage.iters)
            if root[a] is it.var}


def factor_position(op, axis) -> int:
    """Where ``axis`` goes among the partial sums' axes: before the first spatial axis that some
    kept factor reads contiguously (its last index), so that axis stays innermost for both
    sums (``A[i,k] B[k,l] C[l,j]`` along ``k``: ``P[k, j] = B @ C``, then ``A @ P``); else last
    (``x[b,i] W[i,j] y[b,j]`` along ``j``: ``P[b, j] = x @ W``)."""
    kept, _ = split_factors(op, axis)
    lasts = {id(x.indices[-1]) for f in kept for x in walk(f)
             if isinstance(x, TensorRead) and x.indices}
    keep, _ = partial_axes(op, axis, kept)
    return next((n for n, a in enumerate(keep) if id(a) in lasts), len(keep))


def _product(factors):
    return functools.reduce(lambda a, b: a * b, factors)


@register_step
@dataclass(frozen=True)
class FactorOutStep(Step):
    """Sum reduction ``iter_id`` (a root reduction axis of an untransformed stage that reduces
    over at least one more) becomes the only reduction of the stage; a new stage ``NAME.fo``
    before it sums the factors that read the other reduction axes over them, over the spatial
    axes those factors read and this axis (at position ``factor_iter_id`` among them, when the
    factors read it). The stage then sums ``NAME.fo`` times the other factors along this axis."""
    code: ClassVar[str] = "FO"
    stage_id: int
    iter_id: int
    factor_iter_id: int

    def apply(self, state):
        s = checked_stage(state, self.stage_id, "factor_out")
        it = checked_iter(s, self.iter_id, "factor_out")
        op, name = s.op, s.name
        red = op.body
        if not isinstance(red, Reduce) or red.kind is not ReduceKind.SUM:
            raise ScheduleError(f"factor_out: '{name}' is not a sum reduction")
        if s.relations or s.location is not ComputeLocation.ROOT or op.is_ragged:
            raise ScheduleError(f"factor_out: '{name}' must be an untransformed stage at root "
                                f"with a dense output")
        axis = root_reduction_loops(s).get(self.iter_id)
        if axis is None or len(op.reduce_axes) < 2:
            raise ScheduleError(f"factor_out: loop '{it.name}' of '{name}' is not a root "
                                f"reduction axis of a sum over several axes")
        if any(a.const_extent is None for a in op.axes + op.reduce_axes):
            raise ScheduleError(f"factor_out: '{name}' has data-dependent extents")
        kept, hoisted = split_factors(op, axis)
        if not kept or not hoisted:
            raise ScheduleError(f"factor_out: every factor of '{name}' reads "
                                f"{'some' if kept else 'none'} of the other reduction axes; "
                                f"nothing to factor out along '{it.name}'")
        kf = IterVar(axis.name, Const(0, dt.INDEX), Const(axis.const_extent, dt.INDEX),
                     IterKind.SPATIAL)
        keep_axes, reads_axis = partial_axes(op, axis, kept)
        if not 0 <= self.factor_iter_id <= len(keep_axes):
            raise ScheduleError(f"factor_out: factor axis position {self.factor_iter_id} out of "
                                f"range 0..{len(keep_axes)}")
        if reads_axis:
            keep_axes.insert(self.factor_iter_id, axis)
        if not keep_axes:
            raise ScheduleError(f"factor_out: the partial sum of '{name}' along '{it.name}' "
                                f"would have no axes")
        spatial = tuple(kf if a is axis else a for a in keep_axes)
        others = tuple(a for a in op.reduce_axes if a is not axis)
        fo_op = ComputeOp(f"{name}.fo", spatial,
                          Reduce(ReduceKind.SUM, substitute(_product(kept), {axis: kf}), others),
                          tag=op.tag)
        fo = Tensor(fo_op, tuple(a.const_extent for a in spatial), s.tensor.dtype, fo_op.name)
        fresh = {a: IterVar(a.name, a.begin, a.end, IterKind.SPATIAL) for a in op.axes}
        r = IterVar(axis.name, Const(0, dt.INDEX), Const(axis.const_extent, dt.INDEX),
                    IterKind.REDUCE)
        fresh[axis] = r
        partial = fo[tuple(fresh[a] for a in keep_axes)]
        source = _product([partial] + [substitute(f, fresh) for f in hoisted])
        s.op = ComputeOp(name, tuple(fresh[a] for a in op.axes),
                         Reduce(ReduceKind.SUM, source, (r,)), checks=op.checks, tag=op.tag)
        s.relations = []
        s.invalidate()
        insert_stage(state, self.stage_id, StageState(fo, fo_op))

    def python(self, state):
        s, i = stage_repr(state, self.stage_id), iter_repr(state, self.stage_id, self.iter_id)
        return f"s.factor_out({s}, {i}, factor_axis={self.factor_iter_id})"
