"""conv2d(method="winograd"): the F(m, 3) transforms, the convolution against numpy on random data
in both layouts (odd sizes, asymmetric padding, float64), sampled search candidates natively and
in the interpreter, and the arguments it refuses."""
import numpy as np
import pytest

import tecomp as tc
from tecomp.ops.winograd import WINOGRAD_TILES, winograd_matrices, winograd_tile
from tecomp.testing.random_schedules import sampled_candidates


def _ref(x, w, pads):
    """NCHW x, OIHW w, (top, left, bottom, right) padding, in float64."""
    pt, pl, pb, pr = pads
    xp = np.pad(x.astype(np.float64), [(0, 0), (0, 0), (pt, pb), (pl, pr)])
    win = np.lib.stride_tricks.sliding_window_view(xp, (3, 3), axis=(2, 3))
    return np.einsum("nchwij,ocij->nohw", win, w.astype(np.float64))


@pytest.mark.parametrize("m", [2, 4, 6])
def test_transforms_compute_the_correlation(m):
    A, B, G = winograd_matrices(m)
    rng = np.random.default_rng(m)
    d, g = rng.standard_normal(m + 2), rng.standard_normal(3)
    want = np.array([d[i:i + 3] @ g for i in range(m)])
    np.testing.assert_allclose(A.T @ ((G @ g) * (B.T @ d)), want, rtol=1e-12, atol=1e-12)


def test_tile_is_four_unless_the_output_is_small():
    assert winograd_tile(56, 56) == 4 and winograd_tile(8, 30) == 4
    assert winograd_tile(7, 7) == 2 and winograd_tile(14, 5) == 2
    assert set(WINOGRAD_TILES) == {2, 4}


def _case(layout, N, C, H, W, O, pad, dtype="float32", seed=0):
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1, 1, (N, C, H, W)).astype(dtype)
    w = rng.uniform(-1, 1, (O, C, 3, 3)).astype(dtype)
    pads = pad if isinstance(pad, tuple) else (pad,) * 4
    ref = _ref(x, w, pads)
    if layout == "NHWC":
        xi, wi, ref = x.transpose(0, 2, 3, 1).copy(), w.transpose(2, 3, 1, 0).copy(), \
            ref.transpose(0, 2, 3, 1)
    else:
        xi, wi = x, w
    X, Wt = tc.placeholder(xi.shape, dtype, name="X"), tc.placeholder(wi.shape, dtype, name="W")
    Y = tc.ops.conv2d(X, Wt, padding=pad, layout=layout, method="winograd")
    return tc.ComputeDAG([X, Wt, Y]), [xi, wi], ref


@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
@pytest.mark.parametrize("N, C, H, W, O, pad", [
    (1, 16, 9, 9, 8, 1),          # 9x9 output: F(4) with a partial last tile
    (2, 5, 7, 11, 3, 1),          # F(2), rectangular, batch 2
    (1, 4, 6, 6, 4, 0),           # no padding: a 4x4 output, one F(2) tile row short
    (1, 3, 5, 5, 2, (0, 1, 2, 0)),  # asymmetric padding
])
def test_matches_numpy(layout, N, C, H, W, O, pad):
    dag, x, ref = _case(layout, N, C, H, W, O, pad)
    got = tc.build(dag)(*x)
    assert got.shape == ref.shape
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4 * np.abs(ref).max())


def test_float64_is_exact_to_rounding():
    dag, x, ref = _case("NHWC", 1, 8, 10, 10, 8, 1, dtype="float64")
    got = tc.build(dag)(*x)
    assert got.dtype == np.float64
    np.testing.assert_allclose(got, ref, rtol=1e-10, atol=1e-10)


def test_the_weight_transform_runs_at_build_time_for_a_constant_weight():
    dag, (x, w), ref = _case("NHWC", 1, 16, 8, 8, 16, 1)
    k = tc.build(dag, constants={"W": w})
    np.testing.assert_allclose(k(x), ref, rtol=1e-4, atol=1e-4 * np.abs(ref).max())
    assert k.constant_names == ("W",)
    # what the kernel is passed is the transformed weight (6 x 6 x C x O for F(4)), not W
    assert [a.shape for a in k.bound_arrays] == [(6, 6, 16, 16)]


@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
def test_sampled_candidates_match_numpy_natively_and_emulated(layout):
    """The search's sketches of the Winograd DAG: random candidates of each, built natively and run
    by the loop-IR interpreter, equal the reference."""
    # 16 output channels give every sketch (the rows ones too); a 4x4 image and 4 input
    # channels keep the candidates' unrolled transforms quick to compile
    dag, x, ref = _case(layout, 1, 4, 4, 4, 16, 1, seed=3)
    task = tc.SearchTask(dag, "llvm")
    tol = dict(rtol=1e-4, atol=1e-4 * np.abs(ref).max())
    built = 0
    for _, cand in sampled_candidates(task, 6, np.random.default_rng(5)):
        kern = tc.build(dag, schedule=cand.state)
        np.testing.assert_allclose(kern(*x), ref, **tol)
        np.testing.assert_allclose(kern.emulate(*x), ref, **tol)
        built += 1
    assert built >= 3


@pytest.mark.parametrize("kw, err", [
    (dict(stride=2), "stride 1"), (dict(dilation=2), "dilation 1"), (dict(groups=2), "groups=1"),
])
def test_refuses_what_it_does_not_compute(kw, err):
    X, W = tc.placeholder((1, 4, 8, 8), name="X"), tc.placeholder((4, 4 // kw.get("groups", 1),
                                                                     3, 3), name="W")
    with pytest.raises(ValueError, match=err):
        tc.ops.conv2d(X, W, padding=1, method="winograd", **kw)
    X5 = tc.placeholder((1, 4, 8, 8), name="X")
    with pytest.raises(ValueError, match="3x3 kernel"):
        tc.ops.conv2d(X5, tc.placeholder((4, 4, 5, 5), name="W"), method="winograd")
    Xi = tc.placeholder((1, 4, 8, 8), "int32", name="X")
    with pytest.raises(TypeError, match="floating-point"):
        tc.ops.conv2d(Xi, tc.placeholder((4, 4, 3, 3), "int32", name="W"), method="winograd")


def test_the_weight_transform_of_a_constant_weight_stays_at_root_in_every_candidate():
    """Computed inside the matrix products it would run on every call, as often as their loops;
    at root it runs once, at build time (tecomp.search.analysis.constant_stages)."""
    from tecomp.schedule.state import ComputeLocation, State
    from tecomp.search.analysis import constant_stages
    dag, x, ref = _case("NHWC", 1, 16, 8, 8, 16, 1, seed=4)
    st = State(dag)
    assert [st.stages[i].name for i in constant_stages(st, ["W"])] == ["conv2d_wtrans"]
    names = lambda ids: sorted(st.stages[i].name for i in ids)  # noqa: E731
    assert names(constant_stages(st, ["X"])) == ["conv2d_itrans", "conv2d_itrans0", "conv2d_pad"]
    assert constant_stages(st, []) == set()
    task = tc.SearchTask(dag, "llvm", constants=["W"])
    seen = 0
    for _, cand in sampled_candidates(task, 24, np.random.default_rng(9)):
        wt = next(s for s in cand.state.stages if s.name == "conv2d_wtrans")
        assert wt.location is ComputeLocation.ROOT
        seen += 1
    assert seen >= 12
    k = tc.build(dag, schedule=cand.state, constants={"W": x[1]})
    np.testing.assert_allclose(k(x[0]), ref, rtol=1e-4, atol=1e-4 * np.abs(ref).max())


def test_nchw_runs_the_transforms_channels_last_between_two_transposes():
    """NCHW reads each tile from a channels-last padded copy and writes NCHW in a last pass, so the
    vectorized transforms run along the contiguous channels in both layouts."""
    dag, x, ref = _case("NCHW", 1, 16, 9, 10, 8, (1, 0, 2, 1))
    from tecomp.schedule.state import State
    shapes = {s.name: tuple(s.tensor.shape) for s in State(dag).stages}
    # a 10 x 9 output in 3 x 3 F(4) tiles: 14 x 14 padded pixels, channels last
    assert shapes["conv2d_pad"] == (1, 14, 14, 16)
    assert shapes["conv2d_nhwc"] == (1, 10, 9, 8) and shapes["conv2d"] == (1, 8, 10, 9)
    np.testing.assert_allclose(tc.build(dag)(*x), ref, rtol=1e-4, atol=1e-4 * np.abs(ref).max())
