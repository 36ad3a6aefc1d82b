"""conv2d(layout="NCHW", method="phased"): a strided NCHW convolution on its input split into
stride phases equals the reference on random data for every stride, padding, dilation and
grouping; the convolution reads its input at unit stride along the output columns; the search's
candidates are correct natively and emulated; a network's strided layers get the method."""
import numpy as np
import pytest

import tecomp as tc
from tecomp.ir.arith import to_linear
from tecomp.ir.expr import TensorRead
from tecomp.ir.traverse import walk
from tecomp.ops.phased import phase_extent, phase_planes
from tecomp.schedule.state import State
from tecomp.testing import workloads as W
from tecomp.testing.random_schedules import check_sampled_candidates
from tecomp.workloads.networks import layer_set, layer_specs, method_applies

LAYERS = [  # N, C, H, W, O, KH, KW, stride, padding, dilation, groups
    (1, 3, 15, 15, 16, 7, 7, 2, 3, 1, 1),          # a stem
    (2, 8, 9, 11, 8, 3, 3, 2, 1, 1, 1),            # odd sizes, batch 2
    (1, 16, 8, 8, 32, 1, 1, 2, 0, 1, 1),           # 1x1 stride 2: one plane, the input subsampled
    (1, 8, 9, 9, 8, 3, 3, 2, 1, 1, 8),             # depthwise
    (1, 6, 11, 10, 12, 3, 3, 3, (1, 0, 2, 1), 2, 3),  # stride 3, dilated, grouped, uneven pads
    (1, 4, 10, 9, 4, 3, 2, (2, 1), 1, 1, 1),       # strides differ per dimension
    (1, 4, 7, 7, 4, 3, 3, 1, 1, 1, 1),             # stride 1: the plain padding
    (1, 2, 8, 8, 3, 3, 3, 2, 1, 2, 1),             # dilation = stride: one plane, wrapping index
    (1, 2, 13, 13, 3, 3, 3, 4, 1, 6, 1),           # r * 6 % 4 reads planes 0, 2 of 4
    (1, 2, 13, 12, 3, 2, 3, (4, 3), 0, (5, 3), 1),  # one dimension wraps, the other one plane
]


@pytest.mark.parametrize("args", LAYERS)
def test_matches_the_reference(args):
    wl = W.conv2d(*args, "NCHW", "phased")
    x = wl.make_inputs(np.random.default_rng(0))
    np.testing.assert_allclose(tc.build(wl.dag)(*x), wl.reference(x)[0], rtol=1e-4, atol=1e-4)


def test_planes_and_extents():
    assert [phase_planes(k, s, d) for k, s, d in
            [(7, 2, 1), (1, 2, 1), (3, 2, 2), (3, 3, 2), (2, 4, 2), (3, 1, 1)]] == [2, 1, 1, 3, 3, 1]
    assert phase_extent(112, 7, 2, 1) == 115 and phase_extent(7, 1, 2, 1) == 7
    wl = W.conv2d(1, 3, 224, 224, 64, 7, 7, 2, 3, 1, 1, "NCHW", "phased")
    phase = next(s for s in State(wl.dag).stages if s.name == "conv2d_phase")
    # as many elements as the padded image: 3 x 230 x 230
    assert phase.tensor.shape == (1, 3, 2, 2, 115, 115)


def test_the_columns_are_read_at_unit_stride():
    """The convolution's read of the phase planes moves by one element per output column."""
    wl = W.conv2d(1, 8, 16, 16, 8, 3, 3, 2, 1, 1, 1, "NCHW", "phased")
    conv = wl.dag.outputs[0].op
    x = conv.axes[3]
    reads = [r for r in walk(conv.body) if isinstance(r, TensorRead)
             and r.tensor.name == "conv2d_phase"]
    assert len(reads) == 1
    lin = to_linear(reads[0].indices[-1])
    assert [c for atom, c in lin.terms.values() if atom is x] == [1]


# the third layer builds the largest candidates (24 s on a Zen 1): slow
@pytest.mark.parametrize("args", [LAYERS[0], LAYERS[3], pytest.param(LAYERS[4], marks=pytest.mark.slow)])
def test_sampled_candidates_natively_and_emulated(args):
    check_sampled_candidates(W.conv2d(*args, "NCHW", "phased"))


def test_network_layers_strided_only():
    specs = [sp for sp, _ in layer_specs("resnet50")]
    strided = [sp for sp in specs if sp[0] == "conv" and sp[5] > 1]
    assert [sp for sp in specs if method_applies(sp, "phased")] == strided
    wls = layer_set("resnet50", layout="NCHW", method="phased")
    assert len(wls) == len(strided) == 7
    assert any(s.name == "conv2d_phase" for s in State(wls[0][0].dag).stages)
