"""Every ONNX converter: op type -> ``convert(ctx, node, attrs)``."""
from __future__ import annotations

from .convert_conv_transpose import conv_transpose
from .convert_more import MORE_CONVERTERS
from .convert_nn import NN_CONVERTERS
from .convert_resize import RESIZE_CONVERTERS
from .convert_tensor import TENSOR_CONVERTERS
from .cumsum import cumsum
from .einsum import einsum

__all__ = ["CONVERTERS"]

CONVERTERS = {**NN_CONVERTERS, **TENSOR_CONVERTERS, **MORE_CONVERTERS, **RESIZE_CONVERTERS,
              "ConvTranspose": conv_transpose, "Einsum": einsum,
              "CumSum": cumsum}
