"""tecomp.ir: the DSL (tensors, expressions), the ComputeDAG and the loop IR."""
from . import dtype
from .dag import ComputeDAG, Stage
from .dtype import DType
from .expr import Expr, IterVar, Var, const
from .intrinsics import (
    abs,
    cast,
    ceil,
    cos,
    exp,
    floor,
    if_then_else,
    log,
    max,
    maximum,
    min,
    minimum,
    round,
    sigmoid,
    sin,
    sqrt,
    sum,
    tanh,
)
from .tensor import Tensor, compute, compute_csr, placeholder, reduce_axis

__all__ = ["dtype", "ComputeDAG", "Stage", "DType", "Expr", "IterVar", "Var", "const", "Tensor",
           "abs", "cast", "ceil", "compute", "compute_csr", "cos", "exp", "floor", "if_then_else", "log",
           "max", "maximum", "min", "minimum", "placeholder", "reduce_axis", "round", "sigmoid", "sin",
           "sqrt", "sum", "tanh"]
