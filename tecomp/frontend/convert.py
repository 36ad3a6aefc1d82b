"""The table of ONNX operator converters (``op_type`` -> ``conv(ctx, node, attrs)``)."""
from __future__ import annotations

from .convert_nn import NN_CONVERTERS
from .convert_tensor import TENSOR_CONVERTERS

__all__ = ["CONVERTERS"]

CONVERTERS = {**NN_CONVERTERS, **TENSOR_CONVERTERS}
