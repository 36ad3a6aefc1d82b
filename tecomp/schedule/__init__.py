"""tecomp.schedule: schedules as replayable step lists, bound inference and lowering to loop IR."""
from ..ir.dag import ComputeDAG
from . import compute_steps as _compute_steps  # registers the compute-location and cache steps
from . import rfactor as _rfactor  # registers rfactor
from .lower import lower_default, lower_state
from .records import ErrorKind, MeasureResult, Record, append_records, best_record, load_records
from .schedule import Schedule
from .stage_handle import IterHandle, StageHandle
from .state import Annotation, ComputeLocation, ScheduleError, State
from .steps import STEP_KINDS, Step, step_from_record

del _compute_steps, _rfactor


def lower(sched):
    """The loop IR (a :class:`tecomp.ir.loop.PrimFunc`) of a Schedule, a State, or a ComputeDAG under
    the default schedule. ``print(tc.lower(s))`` shows it as C-like text."""
    if isinstance(sched, ComputeDAG):
        return lower_default(sched)
    if isinstance(sched, State):
        return lower_state(sched)
    if isinstance(sched, Schedule):
        return sched.lower()
    raise TypeError(f"tc.lower expects a Schedule or a ComputeDAG, got {type(sched).__name__}")


__all__ = ["lower", "lower_default", "lower_state", "Schedule", "StageHandle", "IterHandle",
           "Annotation", "ComputeLocation", "ScheduleError", "State", "STEP_KINDS", "Step",
           "step_from_record", "Record", "MeasureResult", "ErrorKind", "load_records",
           "append_records", "best_record"]
