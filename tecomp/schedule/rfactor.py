"""rfactor: turn one piece of a reduction into a spatial axis of a new stage of partial results."""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ..ir import dtype as dt
from ..ir.expr import Const, IterKind, IterVar, Reduce, select
from ..ir.tensor import ComputeOp, Tensor
from ..ir.traverse import free_vars, substitute
from .compute_steps import insert_stage
from .state import ComputeLocation, ScheduleError, StageState
from .steps import Step, checked_iter, checked_stage, iter_repr, register_step, stage_repr

__all__ = ["RfactorStep"]


def _owners_and_pieces(op, nest, it, uses):
    """The reduction axes loop ``it`` comes from and every loop that feeds them: one axis and its
    split pieces, or several axes fused (a reduction to a scalar over (i, j)) and the pieces of
    the fused loop. Closed: a piece that feeds another axis brings that axis in too."""
    owners = [a for a in op.reduce_axes if uses(nest.root_values[a], it.var)]
    while True:
        pieces = [i for i in nest.iters if any(uses(nest.root_values[a], i.var) for a in owners)]
        more = [a for a in op.reduce_axes if not any(a is o for o in owners)
                and any(uses(nest.root_values[a], p.var) for p in pieces)]
        if not more:
            return owners, pieces
        owners += more


@register_step
@dataclass(frozen=True)
class RfactorStep(Step):
    """Reduction loop ``iter_id`` (a root reduction axis, a split piece of one, or a piece of
    several fused reduction axes) becomes a spatial axis, at position ``factor_iter_id`` among the
    spatial axes, of a new stage ``NAME.rf`` holding partial reductions; the stage then reduces
    over that axis of ``NAME.rf``. The stage's loops restart from its new natural order."""
    code: ClassVar[str] = "RF"
    stage_id: int
    iter_id: int
    factor_iter_id: int

    def apply(self, state):
        s = checked_stage(state, self.stage_id, "rfactor")
        it = checked_iter(s, self.iter_id, "rfactor")
        op = s.op
        if not isinstance(op.body, Reduce):
            raise ScheduleError(f"rfactor: '{s.name}' is not a reduction")
        if op.is_ragged and self.factor_iter_id != len(op.axes):
            # a ragged stage (SDDMM) keeps its output index; the factor axis becomes the partials'
            # last dimension: NAME.rf[out_index..., k.f]
            raise ScheduleError(f"rfactor: '{s.name}' has a data-dependent output domain; its "
                                f"factor axis must come last (position {len(op.axes)})")
        if it.kind is not IterKind.REDUCE or it.const_extent is None:
            raise ScheduleError(f"rfactor: loop '{it.name}' of '{s.name}' is not a reduction loop "
                                f"of constant extent")
        if s.location is not ComputeLocation.ROOT:
            raise ScheduleError(f"rfactor: '{s.name}' must be computed at root")
        if not 0 <= self.factor_iter_id <= len(op.axes):
            raise ScheduleError(f"rfactor: factor axis position {self.factor_iter_id} out of range")
        nest = s.nest()
        def uses(e, var):
            return any(v is var for v in free_vars(e))
        owners, pieces = _owners_and_pieces(op, nest, it, uses)
        if not owners:
            raise ScheduleError(f"rfactor: loop '{it.name}' does not come from a reduction axis")
        if any(p.const_extent is None for p in pieces):
            raise ScheduleError(f"rfactor: reduction axes {[a.name for a in owners]} have a "
                                f"data-dependent extent")
        # new iteration variables: the factor piece is spatial, the other pieces reduce
        kf = IterVar(f"{it.name}.f", Const(0, dt.INDEX), Const(it.const_extent, dt.INDEX),
                     IterKind.SPATIAL)
        rvars = {p.var: IterVar(p.name, Const(0, dt.INDEX), Const(p.const_extent, dt.INDEX),
                                IterKind.REDUCE) for p in pieces if p is not it}
        m = {it.var: kf, **rvars}
        red = op.body
        source = substitute(red.source, {a: substitute(nest.root_values[a], m) for a in owners})
        piece_ids = {id(p.var) for p in pieces}
        guards = [g for g in nest.guards if all(id(v) in piece_ids for v in free_vars(g))]
        for g in guards:
            source = select(substitute(g, m), source, red.identity)
        others = tuple(a for a in op.reduce_axes if not any(a is o for o in owners))
        spatial = list(op.axes)
        spatial.insert(self.factor_iter_id, kf)
        raxes = tuple(rvars.values()) + others
        # nothing left to reduce (the whole axis was factored out): the partials are the values
        rf_op = ComputeOp(f"{op.name}.rf", tuple(spatial),
                          Reduce(red.kind, source, raxes) if raxes else source, tag=op.tag)
        if op.is_ragged:
            rf_op = ComputeOp(rf_op.name, rf_op.axes, rf_op.body, out_index=op.out_index + (kf,),
                              tag=op.tag)
            shape = s.tensor.shape + (it.const_extent,)
        else:
            shape = tuple(a.const_extent for a in spatial)
        if any(x is None for x in shape):
            raise ScheduleError(f"rfactor: '{s.name}' has data-dependent spatial extents")
        rf = Tensor(rf_op, shape, s.tensor.dtype, rf_op.name)
        axes, fresh = [], {}
        for a in op.axes:  # ragged bounds refer to outer axes: rename them in order
            fresh[a] = IterVar(a.name, substitute(a.begin, fresh), substitute(a.end, fresh),
                               IterKind.SPATIAL)
            axes.append(fresh[a])
        axes = tuple(axes)
        r = IterVar(it.name, Const(0, dt.INDEX), Const(it.const_extent, dt.INDEX), IterKind.REDUCE)
        if op.is_ragged:
            out_index = tuple(substitute(e, fresh) for e in op.out_index)
            idx = list(out_index) + [r]
        else:
            out_index = None
            idx = list(axes)
            idx.insert(self.factor_iter_id, r)
        s.op = ComputeOp(op.name, axes, Reduce(red.kind, rf[tuple(idx)], (r,)), out_index=out_index,
                         checks=op.checks, tag=op.tag)
        s.relations = []
        s.invalidate()
        insert_stage(state, self.stage_id, StageState(rf, rf_op))

    def python(self, state):
        s, i = stage_repr(state, self.stage_id), iter_repr(state, self.stage_id, self.iter_id)
        return f"s.rfactor({s}, {i}, factor_axis={self.factor_iter_id})"


