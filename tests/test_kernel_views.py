"""``tecomp.ReshapedKernel`` and the FLAT layer sets: a 1x1 stride-1 convolution built for its
image viewed as one row of pixels, called on the layer's own arrays (views, no copies)."""
import numpy as np
import pytest

import tecomp as tc
from tecomp.workloads import builders as W
from tecomp.workloads.networks import FLAT, layer_set, layer_specs, layer_weights, method_applies
from tecomp.workloads.reference import ref_conv2d


def _flat_kernel(layout, C=6, H=5, Wd=7, O=10, constants=False, seed=0):
    wl = W.conv2d(1, C, 1, H * Wd, O, 1, 1, 1, 0, 1, 1, layout, "direct")
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((1, C, H, Wd) if layout == "NCHW" else (1, H, Wd, C), np.float32)
    w = rng.standard_normal((O, C, 1, 1) if layout == "NCHW" else (1, 1, C, O), np.float32)
    ref = ref_conv2d(x, w, layout=layout)
    consts = {wl.dag.inputs[1].name: w} if constants else None
    k = tc.build(wl.dag, constants=consts)
    return tc.ReshapedKernel(k, [ref.shape]), x, w, ref


@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
def test_a_flat_1x1_kernel_runs_on_the_layers_own_arrays(layout):
    rk, x, w, ref = _flat_kernel(layout)
    got = rk(x, w)  # new output, in the layer's shape
    assert got.shape == ref.shape
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)
    out = np.full(ref.shape, np.nan, np.float32)
    assert rk(x, w, out=out) is out  # written through the view
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)


def test_prepared_call_and_constants_through_views():
    rk, x, w, ref = _flat_kernel("NCHW", constants=True, seed=3)
    assert rk.call_inputs([x, w]) == [x]
    out = np.zeros(ref.shape, np.float32)
    run = rk.prepared_call([x], out)
    run()
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)
    x[...] = np.random.default_rng(4).standard_normal(x.shape, np.float32)  # same buffer
    run()
    np.testing.assert_allclose(out, ref_conv2d(x, w), rtol=1e-4, atol=1e-4)
    assert "define" in rk.source()  # the kernel's own attributes come through


def test_a_repeated_call_through_fresh_views_skips_the_checks(monkeypatch):
    """Each call makes new views of the same arrays; the kernel's call memo matches them by their
    memory, so only the first call pays the argument checks, and new arrays are checked again."""
    import sys
    B = sys.modules["tecomp.build"]  # the module (tecomp.build is also the function)
    rk, x, w, ref = _flat_kernel("NCHW", seed=5)
    checked = []
    real = B._check_array
    monkeypatch.setattr(B, "_check_array", lambda a, *r: checked.append(1) or real(a, *r))
    out = np.full(ref.shape, np.nan, np.float32)
    for _ in range(3):
        rk(x, w, out=out)
    assert len(checked) == 3  # two inputs and the output, once
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)
    x2 = x * 2  # other memory: checked and computed anew
    rk(x2, w, out=out)
    assert len(checked) == 6
    np.testing.assert_allclose(out, 2 * ref, rtol=1e-4, atol=1e-4)
    out.flags.writeable = False  # the same memory, now read-only: refused, not run
    with pytest.raises(ValueError, match="read-only"):
        rk(x2, w, out=out)


def test_the_call_memo_holds_none_of_the_callers_arrays():
    """The reshaped kernel remembers its last call's arrays weakly: once the caller drops them
    they are freed, and new arrays (a list output too) are checked and computed anew."""
    import gc
    import weakref
    rk, x, w, ref = _flat_kernel("NCHW", seed=7)
    out = np.full(ref.shape, np.nan, np.float32)
    rk(x, w, out=out)
    rk(x, w, out=out)  # from the memo
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)
    gone = [weakref.ref(a) for a in (x, out)]
    x2 = x.copy()
    del x, out
    gc.collect()
    assert all(r() is None for r in gone)
    out2 = np.full(ref.shape, np.nan, np.float32)
    assert rk(x2, w, out=[out2]) == [out2]
    np.testing.assert_allclose(out2, ref, rtol=1e-4, atol=1e-4)
    out2.flags.writeable = False  # the memo's own arrays, now read-only: refused, not run
    with pytest.raises(ValueError, match="read-only"):
        rk(x2, w, out=[out2])


def test_arguments_that_are_not_views_are_refused():
    rk, x, w, ref = _flat_kernel("NCHW")
    with pytest.raises(ValueError, match="cannot be viewed"):
        rk(np.zeros((1, 6, 4, 7), np.float32), w)
    with pytest.raises(ValueError, match="C-contiguous"):
        rk(np.asfortranarray(x), w)
    with pytest.raises(ValueError, match="C-contiguous"):  # a copy would never be filled
        rk(x, w, out=np.zeros(ref.shape[::-1], np.float32).T)
    with pytest.raises(TypeError, match="takes 2 inputs"):
        rk(x)
    with pytest.raises(ValueError, match="cannot view"):
        tc.ReshapedKernel(rk.kernel, [(1, 2, 3)])


@pytest.mark.parametrize("net", ["resnet50", "mobilenet_v2"])
def test_the_flat_layer_set_is_the_1x1_unpadded_layers_flattened(net):
    specs = [sp for sp, _ in layer_specs(net) if method_applies(sp, FLAT)]
    flat = layer_set(net, layout="NCHW", method=FLAT)
    assert len(flat) == len(specs) > 5
    for (wl, _), (_, C, H, O, k, s, p, g) in zip(flat, specs):
        assert (k, p) == (1, 0)
        # stride 1: the image viewed flat; strided: the plain image (its pixels copied inside)
        assert wl.dag.inputs[0].shape == ((1, C, 1, H * H) if s == 1 else (1, C, H, H))
        OH = (H - 1) // s + 1
        assert wl.dag.outputs[0].shape == (1, O, 1, OH * OH)
        assert layer_weights(wl) == ("weight",)
    assert not any(method_applies(sp, FLAT) for sp, _ in layer_specs(net)
                   if sp[0] == "dense" or sp[4] != 1 or sp[6] != 0)
