"""The CPU reference schedule: what a tuning checks every candidate against.

The default schedule (every stage at root, natural loop order) is the most trustworthy program of
a DAG, but for a large one it is also hopelessly slow: matmul 4096x4096x1024 runs its reduction
innermost over a column of ``B`` (a stride of 16 KB per step) on one core, past two minutes. The
reference keeps what makes the default trustworthy, every output element reduced in the natural
order by one thread, and changes only two things per root stage:

- the reduction loops move just outside the innermost spatial loop (``i, k, j`` for a matmul), so
  the inner loop walks a row; each element is still reduced over ``k`` in order, so its result is
  the default's up to FMA contraction;
- the spatial loops outside them are fused and run on the thread pool.

A stage this cannot apply to (ragged, data-dependent extents, a scalar output) keeps its default
loops; a step that does not replay leaves that stage as it was.
"""
from __future__ import annotations

from ..ir.dag import ComputeDAG
from ..ir.expr import IterKind
from .schedule import Schedule
from .state import ScheduleError

__all__ = ["reference_cpu_schedule", "reorder_and_parallelize"]

#: the innermost spatial loop must be at least this long for the reorder to pay (a softmax row
#: reduction ``m[i] = max_j x[i, j]`` keeps its contiguous inner ``j``)
MIN_INNER = 8


def reference_cpu_schedule(dag: ComputeDAG) -> Schedule:
    """A correct, reasonably fast CPU schedule of ``dag`` to check candidates against.

    Parameters
    ----------
    dag : ComputeDAG

    Returns
    -------
    Schedule
        Root stages with the reductions outside the innermost spatial loop and the outer spatial
        loops fused and parallel (see the module docstring); the default loops where that does not
        apply.
    """
    steps: list = []
    for st in dag.compute_stages:
        if st.op.is_ragged:
            continue
        trial = Schedule(dag, steps)
        try:
            reorder_and_parallelize(trial, st.tensor)
        except ScheduleError:
            continue
        steps = trial.steps
    return Schedule(dag, steps)


def reorder_and_parallelize(s: Schedule, tensor) -> None:
    """Move the root stage of ``tensor``'s reductions just outside its innermost spatial loop and
    run the spatial loops outside them on the thread pool (see the module docstring); a stage
    with data-dependent extents, or that is not a plain spatial/reduction nest, is left alone.
    Raises :class:`ScheduleError` where a step does not apply."""
    h = s[tensor]
    iters = s.state.stages[h.index].iters
    if any(it.const_extent is None for it in iters):
        return
    spatial = [i for i, it in enumerate(iters) if it.kind is IterKind.SPATIAL]
    reduce = [i for i, it in enumerate(iters) if it.kind is IterKind.REDUCE]
    if not spatial or len(spatial) + len(reduce) != len(iters):
        return
    loops = h.loops
    outer = spatial
    if reduce and len(spatial) >= 2 and iters[spatial[-1]].const_extent >= MIN_INNER:
        outer = spatial[:-1]
        h.reorder(*[loops[i] for i in outer + reduce + spatial[-1:]])
    elif reduce:
        outer = spatial  # natural order: spatial loops, then the reductions
    extent = 1
    for i in outer:
        extent *= iters[i].const_extent
    if extent < 2:
        return
    # after the reorder the outer spatial loops are the leading ones, in their natural order
    lead = h.loops[:len(outer)]
    h.parallel(h.fuse(*lead) if len(lead) > 1 else lead[0])
