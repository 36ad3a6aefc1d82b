"""Parametrized elementwise activations (ONNX LeakyRelu, Elu, Selu, Celu, HardSigmoid, HardSwish,
Softplus, Softsign, ThresholdedRelu, Mish, Sign, Shrink): one :class:`Activation` kind and its
``alpha`` / ``beta`` per node (``Op.ACTIVATION``), lowered to one tecomp expression and, for
constant inputs, evaluated in numpy with the same formula."""
from __future__ import annotations

import enum

import numpy as np

from .. import ir

__all__ = ["Activation", "activation_expr", "activation_numpy", "DEFAULTS"]


class Activation(enum.Enum):
    """The kinds of ``Op.ACTIVATION`` (attributes ``alpha`` / ``beta`` as ONNX names them)."""
    LEAKY_RELU = "LeakyRelu"
    ELU = "Elu"
    SELU = "Selu"          # alpha, and gamma as beta
    CELU = "Celu"
    HARD_SIGMOID = "HardSigmoid"
    HARD_SWISH = "HardSwish"
    SOFTPLUS = "Softplus"
    SOFTSIGN = "Softsign"
    THRESHOLDED_RELU = "ThresholdedRelu"
    MISH = "Mish"
    SIGN = "Sign"
    SHRINK = "Shrink"      # lambd as alpha, bias as beta


#: ONNX's default (alpha, beta) of each kind; the ONNX attribute names that set them
DEFAULTS = {
    Activation.LEAKY_RELU: ((0.01, 0.0), ("alpha", None)),
    Activation.ELU: ((1.0, 0.0), ("alpha", None)),
    Activation.SELU: ((1.67326319217681884765625, 1.05070102214813232421875), ("alpha", "gamma")),
    Activation.CELU: ((1.0, 0.0), ("alpha", None)),
    Activation.HARD_SIGMOID: ((0.2, 0.5), ("alpha", "beta")),
    Activation.HARD_SWISH: ((1.0 / 6.0, 0.5), (None, None)),
    Activation.SOFTPLUS: ((0.0, 0.0), (None, None)),
    Activation.SOFTSIGN: ((0.0, 0.0), (None, None)),
    Activation.THRESHOLDED_RELU: ((1.0, 0.0), ("alpha", None)),
    Activation.MISH: ((0.0, 0.0), (None, None)),
    Activation.SIGN: ((0.0, 0.0), (None, None)),
    Activation.SHRINK: ((0.5, 0.0), ("lambd", "bias")),
}


def _softplus(x, f, zero, one):
    # max(x, 0) + log(1 + exp(-|x|)): no overflow for large |x|
    return f.maximum(x, zero) + f.log(one + f.exp(-f.abs(x)))


class _IR:
    """The few functions both formulas use, on tecomp expressions."""
    maximum, minimum, exp, log, abs, tanh = (ir.maximum, ir.minimum, ir.exp, ir.log, ir.abs,
                                              ir.tanh)

    @staticmethod
    def where(c, a, b):
        return ir.if_then_else(c, a, b)


class _NP:
    maximum, minimum, exp, log, abs, tanh, where = (np.maximum, np.minimum, np.exp, np.log,
                                                     np.abs, np.tanh, np.where)


def _formula(kind: Activation, x, a: float, b: float, f, zero, one):
    """``kind`` applied to ``x`` with the functions of ``f`` (tecomp or numpy); ``zero`` and
    ``one`` are constants of ``x``'s type."""
    if kind is Activation.LEAKY_RELU:
        return f.where(x < zero, x * a, x)
    if kind is Activation.ELU:
        return f.where(x < zero, (f.exp(x) - one) * a, x)
    if kind is Activation.SELU:
        return f.where(x <= zero, (f.exp(x) - one) * (a * b), x * b)
    if kind is Activation.CELU:
        return f.maximum(x, zero) + f.minimum(zero, (f.exp(x * (1.0 / a)) - one) * a)
    if kind is Activation.HARD_SIGMOID:
        return f.maximum(zero, f.minimum(one, x * a + b))
    if kind is Activation.HARD_SWISH:
        return x * f.maximum(zero, f.minimum(one, x * a + b))
    if kind is Activation.SOFTPLUS:
        return _softplus(x, f, zero, one)
    if kind is Activation.SOFTSIGN:
        return x / (one + f.abs(x))
    if kind is Activation.THRESHOLDED_RELU:
        return f.where(x > a, x, zero)
    if kind is Activation.MISH:
        return x * f.tanh(_softplus(x, f, zero, one))
    if kind is Activation.SIGN:
        return f.where(x > zero, one, f.where(x < zero, -one, zero))
    if kind is Activation.SHRINK:
        return f.where(x < -a, x + b, f.where(x > a, x - b, zero))
    raise AssertionError(kind)


def activation_expr(x, attrs: dict):
    """The tecomp expression of ``Op.ACTIVATION`` (``attrs``: ``kind``, ``alpha``, ``beta``) on
    the element ``x``."""
    zero, one = ir.const(0, x.dtype), ir.const(1, x.dtype)
    return _formula(attrs["kind"], x, attrs["alpha"], attrs["beta"], _IR, zero, one)


def activation_numpy(x: np.ndarray, attrs: dict) -> np.ndarray:
    """``Op.ACTIVATION`` on a constant array (the formula of :func:`activation_expr`)."""
    zero, one = x.dtype.type(0), x.dtype.type(1)
    with np.errstate(over="ignore", invalid="ignore"):
        y = _formula(attrs["kind"], x, attrs["alpha"], attrs["beta"], _NP, zero, one)
    return np.asarray(y).astype(x.dtype)
