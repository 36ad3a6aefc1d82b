"""tecomp.schedule: schedules as replayable step lists, bound inference and tuning records.

Lowering to the loop IR is the next layer, :mod:`tecomp.lowering` (``tc.lower``); it imports this
one, never the other way round (``Schedule.lower`` imports it when called).
"""
from . import compute_steps as _compute_steps  # registers the compute-location and cache steps
from . import factor_out as _factor_out  # registers factor_out
from . import rfactor as _rfactor  # registers rfactor
from .cpu_default import default_cpu_schedule
from .cpu_reference import reference_cpu_schedule
from .records import ErrorKind, MeasureResult, Record, append_records, best_record, load_records
from .schedule import Schedule, replay_on
from .stage_handle import IterHandle, StageHandle
from .state import Annotation, ComputeLocation, ScheduleError, State
from .steps import STEP_KINDS, Step, step_from_record

del _compute_steps, _factor_out, _rfactor


__all__ = ["Schedule", "StageHandle", "IterHandle",
           "Annotation", "ComputeLocation", "ScheduleError", "State", "STEP_KINDS", "Step",
           "step_from_record", "Record", "MeasureResult", "ErrorKind", "load_records",
           "append_records", "best_record", "reference_cpu_schedule", "default_cpu_schedule",
           "replay_on"]
