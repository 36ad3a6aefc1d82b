"""tecomp.schedule: schedules as data and their lowering to loop IR."""
from ..ir.dag import ComputeDAG
from .lower import lower_default


def lower(sched):
    """The loop IR (a :class:`tecomp.ir.loop.PrimFunc`) of a schedule, or of a ComputeDAG under the
    default schedule. ``print(tc.lower(s))`` shows it as C-like text."""
    if isinstance(sched, ComputeDAG):
        return lower_default(sched)
    if hasattr(sched, "lower"):
        return sched.lower()
    raise TypeError(f"tc.lower expects a Schedule or a ComputeDAG, got {type(sched).__name__}")


__all__ = ["lower", "lower_default"]
