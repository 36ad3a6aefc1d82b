"""The hand schedules of tecomp.testing (what the benchmarks time) compute the right answer on
odd shapes, through the LLVM kernel and the interpreter."""
import numpy as np
import pytest

import tecomp as tc
from tecomp.testing import workloads as W
from tecomp.testing.hand_schedules import conv2d_schedule, matmul_schedule


def _check(wl, s, emulate=True):
    x = wl.make_inputs(np.random.default_rng(0))
    k = tc.build(wl.dag, schedule=s)
    ref = wl.reference(x)[0]
    np.testing.assert_allclose(k(*x), ref, rtol=1e-4, atol=1e-4)
    if emulate:
        np.testing.assert_allclose(k.emulate(*x), ref, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("shape", [(19, 37, 7), (64, 64, 64), (1, 97, 3), (33, 1, 17)])
@pytest.mark.parametrize("pack", [True, False])
def test_matmul_hand_schedule(shape, pack):
    wl = W.matmul(*shape)
    _check(wl, matmul_schedule(wl.dag, pack=pack), emulate=shape[0] * shape[1] * shape[2] < 50000)


@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
@pytest.mark.parametrize("method", ["direct", "implicit_gemm"])
@pytest.mark.parametrize("args", [(1, 8, 11, 13, 16, 3, 3, 1, 1), (2, 3, 9, 7, 5, 3, 3, 2, 0),
                                  (1, 4, 7, 7, 6, 1, 1, 1, 0)])
def test_conv2d_hand_schedule(layout, method, args):
    wl = W.conv2d(*args, 1, 1, layout, method)
    _check(wl, conv2d_schedule(wl.dag, layout, method))
