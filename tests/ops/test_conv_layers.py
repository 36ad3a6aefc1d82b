"""Every distinct conv layer of ResNet-50 and MobileNet-V2, in both layouts and both methods: the
search has sketches for it, and a random sketch + annotation gives a correct kernel (against the
numpy reference, and torch where it imports).

The default run uses small inputs (kernel, stride, padding, groups and channels exact), every
layer in one layout and method and one layer of each kind in both layouts at batch 8; the ``slow``
variants run the rest, the true 224-pixel-network shapes and batch 8 for every layer.
"""
import zlib

import numpy as np
import pytest

import tecomp as tc
from tecomp.schedule import Schedule
from tecomp.search.decisions import MutationKind
from tecomp.search.sketch_rule import TileHole
from tecomp.search.target_search import generate_sketches, materialize
from tecomp.search.task import SearchTask
from tecomp.testing import networks as N

SPECS = N.conv_specs("resnet50", "mobilenet_v2")
LAYOUTS = ["NHWC", "NCHW"]
METHODS = ["direct", "implicit_gemm"]


def _id(spec) -> str:
    _, C, H, O, k, s, p, g = spec
    return f"{N.conv_kind(spec)}-C{C}-H{H}-O{O}"


def _torch_conv(x, w, spec, layout):
    """torch's conv2d of the same inputs, or None when torch does not import."""
    try:
        import torch
    except ImportError:
        return None
    _, _, _, _, _, s, p, g = spec
    tx, tw = torch.from_numpy(x), torch.from_numpy(w)
    if layout == "NHWC":
        tx, tw = tx.permute(0, 3, 1, 2), tw.permute(3, 2, 0, 1)
    out = torch.nn.functional.conv2d(tx, tw, stride=s, padding=p, groups=g)
    return (out.permute(0, 2, 3, 1) if layout == "NHWC" else out).contiguous().numpy()


def _check_random_candidate(spec, batch, layout, method, size):
    wl = N.conv_layer(spec, batch, layout, method, size)
    task = SearchTask(wl.dag)
    sketches = generate_sketches(task)
    assert sketches, f"no sketch for {spec} {layout} {method}"
    key = f"{spec}{batch}{layout}{method}{size}"
    rng = np.random.default_rng(zlib.crc32(key.encode()))
    for _ in range(8):  # a candidate is dropped when its decisions give an illegal schedule
        i = int(rng.integers(len(sketches)))
        cand = materialize(task, i, sketches[i], {}, rng)
        if cand is not None:
            break
    assert cand is not None, f"no legal random candidate for {spec} {layout} {method}"
    kernel = tc.build(wl.dag, schedule=Schedule(wl.dag, cand.steps), cache=False)
    x = wl.make_inputs(rng)
    out = kernel(*x)
    tol = dict(rtol=2e-4, atol=2e-4 * np.sqrt(spec[1] // spec[7] * spec[4] ** 2))
    np.testing.assert_allclose(out, wl.reference(x)[0], **tol,
                               err_msg=f"{sketches[i].name} {cand.decisions}")
    theirs = _torch_conv(*x, spec, layout)
    if theirs is not None:
        np.testing.assert_allclose(out, theirs, **tol)


# every layer in the default run, each in one (layout, method) pair, the pairs taken in turn
# (every pair also meets several kinds of layer at batch 8, below); the other pairs are slow
_PAIRS = [(layout, method) for layout in LAYOUTS for method in METHODS]
BATCH1 = [pytest.param(sp, layout, method, id=f"{_id(sp)}-{layout}-{method}",
                       marks=() if (layout, method) == _PAIRS[i % len(_PAIRS)] else pytest.mark.slow)
          for i, sp in enumerate(SPECS) for layout, method in _PAIRS]


@pytest.mark.parametrize("spec,layout,method", BATCH1)
def test_layer_batch1_small(spec, layout, method):
    _check_random_candidate(spec, 1, layout, method, N.small_size(spec))


# one layer of each kind at batch 8 in the default run, in both layouts, the methods taken in
# turn (every pair meets several kinds); the rest are slow
_KINDS = {}
for _spec in SPECS:
    _KINDS.setdefault(N.conv_kind(_spec), _spec)
_FIRST = {sp: j for j, sp in enumerate(_KINDS.values())}
BATCH8 = [pytest.param(sp, layout, method, id=f"{_id(sp)}-{layout}-{method}",
                       marks=() if sp in _FIRST and (layout, method) in
                       (_PAIRS[_FIRST[sp] % len(_PAIRS)],
                        _PAIRS[(_FIRST[sp] + len(_PAIRS) // 2) % len(_PAIRS)])
                       else pytest.mark.slow)
          for sp in SPECS for layout, method in _PAIRS]


@pytest.mark.parametrize("spec,layout,method", BATCH8)
def test_layer_batch8_small(spec, layout, method):
    _check_random_candidate(spec, 8, layout, method, N.small_size(spec))


@pytest.mark.slow
@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("spec", SPECS, ids=_id)
def test_layer_true_shape(spec, layout, method):
    _check_random_candidate(spec, 1, layout, method, None)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("method", METHODS)
def test_depthwise_sketches_keep_the_window_whole_inside_the_vector_tile(layout, method):
    spec = next(sp for sp in SPECS if N.conv_kind(sp) == "dw3x3s2")
    wl = N.conv_layer(spec, 1, layout, method, 12)
    sketches = generate_sketches(SearchTask(wl.dag))
    # NHWC: a 6x6 output, whose short rows also run fused (analysis.row_fusion)
    rows = ["cache+fuse1+rows"] if layout == "NHWC" else []
    assert [sk.name for sk in sketches] == ["tile", "cache+fuse1", "cache+fuse2", *rows]
    vec_axis = "o" if layout == "NHWC" else "x"  # channels in NHWC, width in NCHW
    for sk in sketches:
        # no tile decision for the 3x3 window: only the spatial axes are split (four, or three
        # with the rows fused)
        n_sp = 3 if sk.name.endswith("+rows") else 4
        assert len([h for h in sk.holes.values() if isinstance(h, TileHole)]) == n_sp
        stage = next(st for st in Schedule(wl.dag, sk.steps).state.stages
                     if not st.is_placeholder and st.op.reduce_axes)
        names = [it.name for it in stage.iters]
        red = [n for n, it in enumerate(stage.iters) if it.kind.name == "REDUCE"]
        assert names[-1] == f"{vec_axis}.3"
        assert red == list(range(red[0], len(names) - n_sp))  # the window, the register tile


def test_pad_location_is_a_decision_with_inline_and_compute_at():
    """Every compute location the search offers the padding stage gives a correct kernel."""
    spec = next(sp for sp in SPECS if N.conv_kind(sp) == "7x7s2")
    wl = N.conv_layer(spec, 1, "NHWC", "direct", N.small_size(spec))  # a 6x6 image, 3x3 out
    task = SearchTask(wl.dag)
    sketches = generate_sketches(task)
    rng = np.random.default_rng(5)
    x = wl.make_inputs(rng)
    ref = wl.reference(x)[0]
    seen = set()
    for i, sk in enumerate(sketches):
        base = materialize(task, i, sk, {}, rng)
        for loc in range(8):
            d = base.decisions.with_table(MutationKind.LOC, {"pad": loc})
            cand = materialize(task, i, sk, d, rng)
            if cand is None or cand.decisions.loc["pad"] != loc:
                break  # past the last candidate location
            pad = next(st for st in cand.state.stages if st.name == "pad")
            seen.add(pad.location.name)
            k = tc.build(wl.dag, schedule=Schedule(wl.dag, cand.steps), cache=False)
            np.testing.assert_allclose(k(*x), ref, rtol=2e-4, atol=2e-3)
    assert seen == {"ROOT", "INLINE", "AT"}
