"""tecomp.ops: the standard operators, defined once, with the DSL only.

Each function takes :class:`~tecomp.ir.Tensor` arguments and returns the output tensor; dtypes
follow the inputs. Build a kernel from one with ``tc.ComputeDAG([...inputs..., out])``.
"""
from .conv2d import conv2d, conv2d_output_shape, pad2d
from .matmul import batch_matmul, matmul
from .nn import bias_add, relu, softmax
from .phased import flat_subsample
from .sparse import bsr_spmm, csr_spmm, sddmm

__all__ = ["matmul", "batch_matmul", "conv2d", "conv2d_output_shape", "pad2d", "csr_spmm",
           "bsr_spmm", "sddmm", "bias_add", "relu", "softmax", "flat_subsample"]
