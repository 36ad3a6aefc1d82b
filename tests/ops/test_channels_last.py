"""conv2d(layout="NCHW", method="channels_last"): an NCHW convolution computed channels-last between
two transposes equals the direct one on random data, for every stride, padding, dilation and
grouping; the search's candidates of it are correct, natively and emulated; the layout changes
stay passes of their own (never computed inside the convolution's tiles)."""
import numpy as np
import pytest

import tecomp as tc
from tecomp.schedule.state import State
from tecomp.search.analysis import transposing_stages
from tecomp.testing import workloads as W
from tecomp.testing.random_schedules import check_sampled_candidates

LAYERS = [  # N, C, H, W, O, KH, KW, stride, padding, dilation, groups
    (1, 8, 11, 13, 16, 3, 3, 1, 1, 1, 1), (2, 3, 9, 7, 5, 3, 3, 2, 0, 1, 1),
    (1, 4, 7, 7, 6, 1, 1, 1, 0, 1, 1), (1, 8, 8, 8, 8, 3, 3, 2, 1, 1, 8),
    (1, 6, 9, 9, 4, 3, 3, 1, 2, 2, 2), (1, 3, 15, 15, 8, 7, 7, 2, 3, 1, 1),
]


@pytest.mark.parametrize("args", LAYERS)
def test_matches_the_reference(args):
    wl = W.conv2d(*args, "NCHW", "channels_last")
    x = wl.make_inputs(np.random.default_rng(0))
    np.testing.assert_allclose(tc.build(wl.dag)(*x), wl.reference(x)[0], rtol=1e-4, atol=1e-4)
    st = State(wl.dag)
    names = {st.stages[i].name for i in transposing_stages(st)}
    assert names == {"conv2d_pad", "conv2d"}  # NCHW -> NHWC (padded) and back


@pytest.mark.parametrize("method", ["channels_last", "blocked"])
def test_nhwc_layout_variants_are_direct(method):
    """An NHWC convolution is channels-last already: both layout variants are the direct one."""
    a = W.conv2d(1, 4, 6, 6, 8, 3, 3, 1, 1, 1, 1, "NHWC", method).dag
    b = W.conv2d(1, 4, 6, 6, 8, 3, 3, 1, 1, 1, 1, "NHWC", "direct").dag
    assert a.workload_key == b.workload_key


# LAYERS[0] on a 7x9 image (its sketches; smaller candidates to build and interpret)
@pytest.mark.parametrize("args", [(1, 8, 7, 9, 16, 3, 3, 1, 1, 1, 1), LAYERS[2], LAYERS[3]])
def test_sampled_candidates_natively_and_emulated(args):
    """Random candidates of every sketch, natively and emulated; the input reorder at root or
    inlined, never computed inside the convolution's tiles."""
    check_sampled_candidates(W.conv2d(*args, "NCHW", "channels_last"), unfused=("conv2d_pad",))


def test_the_transposes_have_tiled_sketches():
    """Both layout changes may be tiled over the axis each writes contiguously and the one it
    reads contiguously (analysis.transpose_axes), the written one innermost."""
    from tecomp.search.analysis import transpose_axes
    from tecomp.search.target_search import generate_sketches
    wl = W.conv2d(1, 16, 10, 10, 32, 3, 3, 1, 1, 1, 1, "NCHW", "channels_last")
    st = State(wl.dag)
    axes = {st.stages[i].name: transpose_axes(st, i) for i in transposing_stages(st)}
    assert axes == {"conv2d_pad": ("c", "w"), "conv2d": ("w", "c")}
    names = [s.name for s in generate_sketches(tc.SearchTask(wl.dag, "llvm"))]
    assert any(n.startswith("ttile") and n.endswith("ttile") for n in names)
    assert any("ttile" not in n for n in names)
