"""tecomp.lowering: the passes on the loop IR, between the schedule and the emitters.

- :mod:`~tecomp.lowering.lower`: a schedule ``State`` (bound inference done by the schedule layer)
  becomes one loop-IR :class:`~tecomp.ir.loop.PrimFunc`;
- :mod:`~tecomp.lowering.stride_phase`: a reduction loop over a zero-inserting (dilated) input
  iterates only the stride phase that reads real data (transposed convolutions);
- :mod:`~tecomp.lowering.guard_split`: whole tiles of a non-divisible split run without its guards
  (the body of the tile loop versioned on "this tile is whole");
- :mod:`~tecomp.lowering.unroll_budget`: unrolled loops made serial again, outermost first, where
  the function would emit more code than a build should take;
- :mod:`~tecomp.lowering.gpu_passes`: launches, shared memory, barriers and the validity check of
  GPU programs;
- :mod:`~tecomp.lowering.constants`: stages that depend only on constant weights split off to run
  once at build time.

This layer imports ``ir`` and ``schedule``; never the search or the emitters.
"""
from ..ir.dag import ComputeDAG
from ..schedule.schedule import Schedule
from ..schedule.state import State
from .guard_split import version_guards
from .lower import lower_default, lower_state
from .unroll_budget import bound_unrolling


def lower(sched):
    """The loop IR of a schedule.

    Parameters
    ----------
    sched : Schedule, State or ComputeDAG
        A hand schedule, a search state, or a DAG (lowered under the default schedule).

    Returns
    -------
    tecomp.ir.loop.PrimFunc
        The lowered function; ``print(tc.lower(s))`` shows it as C-like text.

    Examples
    --------
    >>> import tecomp as tc
    >>> A = tc.placeholder((4,), name="A")
    >>> B = tc.compute((4,), lambda i: A[i] * 2.0, name="B")
    >>> print(tc.lower(tc.ComputeDAG([A, B])))  # doctest: +SKIP
    """
    if isinstance(sched, ComputeDAG):
        return bound_unrolling(version_guards(lower_default(sched)))
    if isinstance(sched, State):
        return bound_unrolling(version_guards(lower_state(sched)))
    if isinstance(sched, Schedule):
        return bound_unrolling(version_guards(lower_state(sched.state)))
    raise TypeError(f"tc.lower expects a Schedule or a ComputeDAG, got {type(sched).__name__}")


__all__ = ["lower", "lower_default", "lower_state", "version_guards", "bound_unrolling"]
