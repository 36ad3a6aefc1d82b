"""tecomp: a tensor compiler. See README.md and the public API in DESIGN.md."""
from . import ir, ops
from .build import Kernel, build
from .ir import (ComputeDAG, Tensor, abs, cast, compute, compute_csr, exp, if_then_else, log, max,
                 maximum, min, minimum, placeholder, reduce_axis, sigmoid, sqrt, sum, tanh)
from .schedule import Schedule, ScheduleError, load_records, lower
from .target import Target, TargetKind

__version__ = "0.1.0"

__all__ = ["ir", "ops", "Kernel", "build", "ComputeDAG", "Tensor", "abs", "cast", "compute",
           "compute_csr", "exp", "if_then_else", "log", "max", "maximum", "min", "minimum",
           "placeholder", "reduce_axis", "sigmoid", "sqrt", "sum", "tanh", "lower", "Schedule",
           "ScheduleError", "Target", "load_records",
           "TargetKind"]
