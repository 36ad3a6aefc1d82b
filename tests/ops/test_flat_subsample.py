"""The FLAT form of a strided 1x1 convolution (tecomp.ops.flat_subsample and
tecomp.workloads.builders.conv2d_flat): the pixels the stride reads copied into one row, then
the 1x1 stride-1 convolution of that row, equal to the plain convolution on random data in both
layouts; the search's candidates are correct natively and emulated; a network's strided 1x1
layers get the FLAT method."""
import numpy as np
import pytest

import tecomp as tc
from tecomp import ir, ops
from tecomp.testing import workloads as W
from tecomp.testing.random_schedules import check_sampled_candidates
from tecomp.workloads.networks import FLAT, layer_set, layer_specs, method_applies

LAYERS = [  # N, C, H, W, O, stride, groups
    (1, 16, 8, 8, 24, 2, 1),
    (2, 6, 7, 9, 4, (2, 3), 1),   # batch 2, odd sizes, strides differ per dimension
    (1, 8, 9, 9, 12, 3, 4),       # stride 3, grouped
    (1, 5, 6, 5, 7, 1, 1),        # stride 1: the flattened view, no copy
]


@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
@pytest.mark.parametrize("args", LAYERS)
def test_matches_the_plain_convolution(args, layout):
    wl = W.conv2d_flat(*args, layout=layout)
    x = wl.make_inputs(np.random.default_rng(0))
    N, C, H, Wd, O, s, g = args
    sh, sw = (s, s) if isinstance(s, int) else s
    P = ((H - 1) // sh + 1) * ((Wd - 1) // sw + 1)
    assert tuple(wl.dag.outputs[0].shape) == ((N, O, 1, P) if layout == "NCHW" else (N, 1, P, O))
    # the reference is the plain convolution's output, reshaped
    plain = W.conv2d(N, C, H, Wd, O, 1, 1, s, 0, 1, g, layout)
    want = plain.reference(x if (sh, sw) != (1, 1) else
                           [x[0].reshape(plain.dag.inputs[0].shape), x[1]])[0]
    got = tc.build(wl.dag)(*x)
    np.testing.assert_allclose(got.reshape(want.shape), want, rtol=1e-4, atol=1e-4)


def test_the_copy_reads_the_strided_pixels_in_row_order():
    data = ir.placeholder((1, 2, 5, 7), "float32", name="data")
    row = ops.flat_subsample(data, (2, 3), "NCHW")
    assert tuple(row.shape) == (1, 2, 1, 9)
    x = np.arange(70, dtype=np.float32).reshape(1, 2, 5, 7)
    got = tc.build(tc.ComputeDAG([data, row]))(x)
    np.testing.assert_array_equal(got, x[:, :, ::2, ::3].reshape(1, 2, 1, 9))


def test_bad_arguments_are_clear_errors():
    data = ir.placeholder((1, 2, 5, 7), "float32", name="data")
    with pytest.raises(ValueError, match="layout"):
        ops.flat_subsample(data, 2, "NCWH")
    for bad in ((0, 1), (2, 2, 2)):
        with pytest.raises(ValueError, match="stride"):
            ops.flat_subsample(data, bad)
    for bad in (1.5, (2, True)):
        with pytest.raises(TypeError, match="stride"):
            ops.flat_subsample(data, bad)
    with pytest.raises(ValueError, match="rank 4"):
        ops.flat_subsample(ir.placeholder((2, 5, 7), "float32", name="d3"), 2)


@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
def test_sampled_candidates_natively_and_emulated(layout):
    check_sampled_candidates(W.conv2d_flat(1, 16, 9, 9, 24, 2, layout=layout))


def test_a_networks_strided_1x1_layers_are_flat():
    specs = [sp for sp, _ in layer_specs("resnet50") if method_applies(sp, FLAT)]
    strided = [sp for sp in specs if sp[5] > 1]
    assert len(strided) == 3  # the three downsampling 1x1 convolutions
    for (wl, _), sp in zip(layer_set("resnet50", layout="NCHW", method=FLAT), specs):
        _, C, H, O, _, s, _, _ = sp
        data = wl.dag.inputs[0]
        # stride 1: the flattened view; strided: the plain image, copied into a row inside
        assert tuple(data.shape) == ((1, C, 1, H * H) if s == 1 else (1, C, H, H))
        OH = (H - 1) // s + 1
        assert tuple(wl.dag.outputs[0].shape) == (1, O, 1, OH * OH)
