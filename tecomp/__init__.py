"""tecomp: a tensor compiler. README.md shows the public API; docs/ARCHITECTURE.md the layers."""
from . import ir, ops
from .build import Kernel, build
from .frontend.deploy_model import load  # a model export, else tecomp.deploy.load
from .ir import (
    ComputeDAG,
    Tensor,
    abs,
    cast,
    ceil,
    compute,
    compute_csr,
    cos,
    exp,
    floor,
    if_then_else,
    log,
    max,
    maximum,
    min,
    minimum,
    placeholder,
    reduce_axis,
    round,
    sigmoid,
    sin,
    sqrt,
    sum,
    tanh,
)
from .kernel_views import ReshapedKernel
from .lowering import lower
from .schedule import Schedule, ScheduleError, load_records
from .target import Target, TargetKind


def __getattr__(name):
    # the search is imported on first use: building from a log never needs it
    if name in ("SearchTask", "TuningOptions"):
        from .search import task
        return getattr(task, name)
    if name in ("tune", "TuneResult"):
        from .search import tune as _tune
        return getattr(_tune, name)
    if name in ("tune_tasks", "TuneTasksResult"):
        from .search import scheduler
        return getattr(scheduler, name)
    if name in ("rerank", "RerankResult"):
        from .search import rerank as _rerank
        return getattr(_rerank, name)
    if name in ("from_onnx", "Model", "CompiledModel", "compile_model", "tune_model", "Layout"):
        from . import frontend  # whole models; onnx itself only inside from_onnx
        return getattr(frontend, name)
    if name == "RayMeasurer":  # ray is optional (tecomp[ray]); only this name imports it
        from .search.ray_measure import RayMeasurer
        return RayMeasurer
    raise AttributeError(f"module 'tecomp' has no attribute {name!r}")

__version__ = "0.1.0"

__all__ = ["ir", "ops", "Kernel", "ReshapedKernel", "build", "ComputeDAG", "Tensor", "abs", "cast",
           "ceil", "compute", "compute_csr", "cos", "exp", "floor", "if_then_else", "log", "max",
           "maximum", "min", "minimum", "placeholder", "reduce_axis", "round", "sigmoid", "sin", "sqrt",
           "sum", "tanh", "lower", "Schedule", "ScheduleError", "Target", "load_records", "load",
           "TargetKind",
           # loaded on first use (``__getattr__``); RayMeasurer is left out of ``import *``,
           # which would need the optional ray
           "SearchTask", "TuningOptions", "tune", "TuneResult", "tune_tasks", "TuneTasksResult",
           "rerank", "RerankResult", "from_onnx", "Model", "CompiledModel", "compile_model",
           "tune_model", "Layout"]


def __dir__():
    return sorted(set(globals()) | set(__all__) | {"RayMeasurer"})
