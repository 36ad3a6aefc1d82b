"""tecomp.frontend: whole models. ``tc.from_onnx`` parses an ONNX model into a :class:`Model` (a
graph of tecomp operators with static shapes and constant weights); ``tc.compile_model`` fuses it
into groups, builds one kernel per group (from a tuning log's best records where it has them) and
returns a :class:`CompiledModel`; ``model.tasks()`` and ``tc.tune_model`` tune the groups with the
task scheduler.

Modules: :mod:`.graph` (Model, Node, Op), :mod:`.onnx_import` with the converters
(:mod:`.convert_nn`, :mod:`.convert_tensor`), :mod:`.lowering` (node -> computes, constant
evaluation; :mod:`.lower_elemwise`, :mod:`.lower_shape`, :mod:`.lower_nn`), :mod:`.passes`
(identity removal, BatchNorm / scale folding, dead code), :mod:`.layout` (convolutions in
NHWC: :class:`Layout`), :mod:`.fusion` (groups -> ComputeDAGs),
:mod:`.schedules` (the untuned default), :mod:`.compiled` (CompiledModel), :mod:`.tasks`.
"""
from __future__ import annotations

from .compiled import CompiledModel, compile_model
from .graph import Layout, Model, ModelError, Node, Op, UnsupportedOperatorError
from .layout import convert_layout
from .onnx_import import from_onnx

__all__ = ["Model", "Layout", "convert_layout", "ModelError", "UnsupportedOperatorError", "Node",
           "Op", "from_onnx", "CompiledModel", "compile_model", "tune_model"]


def __getattr__(name):
    if name == "tune_model":  # imports the search
        from .tasks import tune_model
        return tune_model
    raise AttributeError(f"module 'tecomp.frontend' has no attribute {name!r}")
