"""conv2d(layout="NCHW", method="blocked"): an NCHW convolution in a blocked channel layout
(NCHW[x]c) equals the direct one on random data for every stride, padding, dilation and grouping;
the weight packing runs at build time where the weight is a constant; the search's candidates are
correct natively and emulated; the activation reorders stay passes of their own."""
import numpy as np
import pytest

import tecomp as tc
from tecomp.ir import compute, placeholder
from tecomp.ops.blocked import channel_block
from tecomp.schedule.state import State
from tecomp.search.analysis import transpose_axes, transposing_stages
from tecomp.testing import workloads as W
from tecomp.testing.random_schedules import check_sampled_candidates

LAYERS = [  # N, C, H, W, O, KH, KW, stride, padding, dilation, groups
    (1, 16, 9, 11, 32, 3, 3, 1, 1, 1, 1),    # blocks of 16 in and out
    (2, 3, 9, 7, 8, 3, 3, 2, 0, 1, 1),       # 3-channel image: one block of 3; blocks of 8 out
    (1, 24, 7, 7, 40, 1, 1, 1, 0, 1, 1),     # 8-blocks (24 and 40 are no multiples of 16)
    (1, 32, 8, 8, 32, 3, 3, 2, 1, 1, 32),    # depthwise, stride 2
    (1, 16, 9, 9, 32, 3, 3, 1, 2, 2, 2),     # grouped (8 in, 16 out per group), dilated
    (1, 3, 15, 15, 16, 7, 7, 2, 3, 1, 1),    # a stem
    (1, 8, 6, 6, 24, 3, 3, 1, 1, 1, 8),      # channel multiplier 3 (groups == C != O)
    (1, 12, 5, 7, 6, 3, 1, 1, (1, 0), 1, 3),  # blocks of 4 in and 2 out: whole groups
]


def test_channel_block():
    assert [channel_block(c) for c in (64, 24, 3, 12, 16, 40, 1)] == [16, 8, 3, 12, 16, 8, 1]


@pytest.mark.parametrize("args", LAYERS)
def test_matches_the_reference(args):
    wl = W.conv2d(*args, "NCHW", "blocked")
    x = wl.make_inputs(np.random.default_rng(0))
    np.testing.assert_allclose(tc.build(wl.dag)(*x), wl.reference(x)[0], rtol=1e-4, atol=1e-4)
    st = State(wl.dag)
    names = {st.stages[i].name for i in transposing_stages(st)}
    blocks_in = next(s.tensor.shape[-1] for s in st.stages if s.name == "conv2d_pad")
    # NCHW -> blocked (padded) and back; blocks of one channel (a channel multiplier's groups
    # of one) are the plain layout
    assert names >= ({"conv2d_pad", "conv2d"} if blocks_in > 1 else {"conv2d"})


def test_the_weight_is_packed_at_build_time():
    """With the weight a constant, the kernel takes the data only and gives the same result."""
    wl = W.conv2d(1, 16, 8, 8, 32, 3, 3, 1, 1, 1, 1, "NCHW", "blocked")
    x, w = wl.make_inputs(np.random.default_rng(2))
    k = tc.build(wl.dag, constants={"weight": w})
    np.testing.assert_allclose(k(x), wl.reference([x, w])[0], rtol=1e-4, atol=1e-4)
    with pytest.raises((TypeError, ValueError)):
        k(x, w)


# the grouped, dilated layer builds the largest candidates (24 s on a Zen 1): slow. Blocks of 16
# in and out on a 6x6 image: LAYERS[0]'s 9x11 drew a candidate that compiles for 14 s
@pytest.mark.parametrize("args", [(1, 16, 6, 6, 32, 3, 3, 1, 1, 1, 1), LAYERS[3],
                                  pytest.param(LAYERS[4], marks=pytest.mark.slow)])
def test_sampled_candidates_natively_and_emulated(args):
    """Random candidates of every sketch, natively and emulated; the input reorder at root or
    inlined, never computed inside the convolution's tiles."""
    check_sampled_candidates(W.conv2d(*args, "NCHW", "blocked"), unfused=("conv2d_pad",))


def test_the_reorders_are_layout_changes_tiled_over_both_layouts():
    """The input reorder writes blocks of channels and reads image rows; the output stage writes
    rows and reads blocks: each is tiled over both (analysis.transpose_axes)."""
    wl = W.conv2d(1, 16, 10, 10, 32, 3, 3, 1, 1, 1, 1, "NCHW", "blocked")
    st = State(wl.dag)
    axes = {st.stages[i].name: transpose_axes(st, i) for i in transposing_stages(st)}
    assert axes["conv2d_pad"] == ("c1", "w")
    assert axes["conv2d"] == ("x", "o")


def test_in_order_blocked_reads_are_no_layout_change():
    """A read whose axes stay in order (a reshape ``(N, 4C) <- (N, C, 4)``, a blocked tensor read
    with its own blocks) is no layout change; splitting a dimension into blocks moved inward is."""
    a = placeholder((2, 8, 4), "float32", name="a")
    flat = compute((2, 32), lambda n, k: a[n, k // 4, k % 4], name="flat")
    b = placeholder((2, 32, 5), "float32", name="b")
    blk = compute((2, 4, 5, 8), lambda n, c0, h, c1: b[n, c0 * 8 + c1, h], name="blk")
    back = compute((2, 32, 5), lambda n, c, h: blk[n, c // 8, h, c % 8], name="back")
    st = State(tc.ComputeDAG([a, b, flat, back]))
    names = {st.stages[i].name for i in transposing_stages(st)}
    assert names == {"blk", "back"}
    assert transpose_axes(st, [s.name for s in st.stages].index("blk")) == ("c1", "h")
    assert transpose_axes(st, [s.name for s in st.stages].index("back")) == ("h", "c")
