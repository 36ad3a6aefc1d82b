"""The operator vocabulary of expressions: binary, unary and reduction kinds, and iterator kinds.

Separate from the nodes (:mod:`tecomp.ir.expr`) because emitters, features and records name
operators without building trees.
"""
from __future__ import annotations

import enum
import math

import numpy as np

from .dtype import DType

__all__ = ["BinOpKind", "UnOpKind", "ReduceKind", "IterKind"]


class BinOpKind(enum.Enum):
    ADD = "+"
    SUB = "-"
    MUL = "*"
    DIV = "/"
    FLOORDIV = "//"
    MOD = "%"
    MIN = "min"
    MAX = "max"
    LT = "<"
    LE = "<="
    GT = ">"
    GE = ">="
    EQ = "=="
    NE = "!="
    AND = "&&"
    OR = "||"

    @property
    def is_compare(self) -> bool:
        return self in _COMPARE

    @property
    def is_logical(self) -> bool:
        return self in (BinOpKind.AND, BinOpKind.OR)


_COMPARE = {BinOpKind.LT, BinOpKind.LE, BinOpKind.GT, BinOpKind.GE, BinOpKind.EQ, BinOpKind.NE}


class UnOpKind(enum.Enum):
    NEG = "-"
    NOT = "!"
    EXP = "exp"
    LOG = "log"
    SQRT = "sqrt"
    TANH = "tanh"
    SIGMOID = "sigmoid"
    ABS = "abs"
    FLOOR = "floor"
    CEIL = "ceil"
    ROUND = "round"  # to the nearest integer, halves to even (numpy's and ONNX's rounding)
    SIN = "sin"
    COS = "cos"

    @property
    def is_math(self) -> bool:
        return self in (UnOpKind.EXP, UnOpKind.LOG, UnOpKind.SQRT, UnOpKind.TANH, UnOpKind.SIGMOID,
                        UnOpKind.SIN, UnOpKind.COS)

    @property
    def is_rounding(self) -> bool:
        """floor, ceil, round: the identity on integers, one instruction on floats."""
        return self in (UnOpKind.FLOOR, UnOpKind.CEIL, UnOpKind.ROUND)


class ReduceKind(enum.Enum):
    SUM = "sum"
    MAX = "max"
    MIN = "min"

    def identity(self, t: DType):
        if self is ReduceKind.SUM:
            return False if t.is_bool else (0.0 if t.is_float else 0)
        if t.is_float:
            return -math.inf if self is ReduceKind.MAX else math.inf
        if t.is_bool:
            return self is ReduceKind.MIN
        info = np.iinfo(t.np)
        return int(info.min) if self is ReduceKind.MAX else int(info.max)

    @property
    def combiner(self) -> BinOpKind:
        return {ReduceKind.SUM: BinOpKind.ADD, ReduceKind.MAX: BinOpKind.MAX,
                ReduceKind.MIN: BinOpKind.MIN}[self]


class IterKind(enum.Enum):
    SPATIAL = "spatial"
    REDUCE = "reduce"
