"""Sketch generation: counts and structure for the standard workloads."""
import pytest

from tecomp.ir.loop import Scope
from tecomp.schedule import Schedule
from tecomp.schedule.state import ComputeLocation
from tecomp.search.sketch_rule import FollowHole, TileHole
from tecomp.search.target_search import generate_sketches
from tecomp.search.task import SearchTask
from tecomp.testing import workloads as W


def _sketches(wl):
    return generate_sketches(SearchTask(wl.dag))


def test_matmul_three_sketches_like_ansor():
    sks = _sketches(W.matmul(512, 512, 512))
    assert [s.name for s in sks] == ["tile", "cache+fuse1", "cache+fuse2"]
    plain = Schedule(W.matmul(512, 512, 512).dag, sks[0].steps)
    names = [it.name for it in plain.state.stages[-1].iters]
    # SSRSRS: i0 j0 | i1 j1 | k0 | i2 j2 | k1 | i3 j3
    assert names == ["i.0", "j.0", "i.1", "j.1", "k.0", "i.2", "j.2", "k.1", "i.3", "j.3"]
    holes = sks[0].holes
    assert sorted((h.extent, h.parts) for h in holes.values()) == [(512, 2), (512, 4), (512, 4)]


@pytest.mark.parametrize("level", [1, 2])
def test_fused_sketch_computes_the_local_tile_at_the_consumer(level):
    wl = W.matmul(64, 48, 32)
    sk = _sketches(wl)[level]
    s = Schedule(wl.dag, sk.steps)
    local = s.state.stages[2]
    assert local.name == "matmul.local" and local.scope is Scope.LOCAL
    assert local.location is ComputeLocation.AT
    out = s.state.stages[3]
    assert local.attach == (3, 2 * level - 1)  # the last loop of the followed level
    follow = [h for h in sk.holes.values() if isinstance(h, FollowHole)]
    assert len(follow) == 2 and all(isinstance(sk.holes[h.src], TileHole) for h in follow)
    assert len(out.iters) == 2 * (level + 1)


def test_conv_bias_relu_inlines_elementwise_and_tiles_the_conv():
    from tecomp import ir, ops
    data = ir.placeholder((1, 56, 56, 64), name="data")
    weight = ir.placeholder((3, 3, 64, 64), name="weight")
    bias = ir.placeholder((64,), name="bias")
    c = ops.conv2d(data, weight, padding=1, layout="NHWC")
    out = ops.relu(ops.bias_add(c, bias, axis=-1))
    task = SearchTask(ir.ComputeDAG([data, weight, bias, out]))
    sks = generate_sketches(task)
    # the relu reads the conv through the inlined bias: still an elementwise consumer, so the
    # conv is computed in the relu's tiles (no cache stage, no second pass over the output)
    assert [s.name for s in sks] == ["fuse1", "fuse2", "tile"]
    for level, sk in enumerate(sks[:2], 1):
        s = Schedule(task.dag, sk.steps)
        inlined = [st.name for st in s.state.stages if st.location is ComputeLocation.INLINE]
        assert inlined == ["bias_add"]  # relu is the output; pad (a branch) is left to annotation
        conv = s.state.stages[s.state.stage_index(c.name)]
        assert conv.location is ComputeLocation.AT and conv.scope is not Scope.LOCAL
        assert conv.attach == (s.state.stage_index(out.name), 4 * level - 1)


def test_a_residual_add_and_clip_through_inlined_stages_are_fused_into_the_conv_tiles():
    # the epilogue of a ResNet / MobileNet-V2 layer: conv, bias, residual add, relu or clip,
    # each its own stage; the tiled conv is computed in the output stage's tiles, and the
    # output (not split for vectors first) follows its tiling
    from tecomp import ir, ops
    data = ir.placeholder((1, 28, 28, 32), name="data")
    weight = ir.placeholder((1, 1, 32, 128), name="weight")
    bias = ir.placeholder((128,), name="bias")
    res = ir.placeholder((1, 28, 28, 128), name="res")
    c = ops.conv2d(data, weight, layout="NHWC")
    b = ops.bias_add(c, bias, axis=-1)
    added = ir.compute(b.shape, lambda n, y, x, o: b[n, y, x, o] + res[n, y, x, o], name="add")
    out = ir.compute(added.shape, lambda *i: ir.minimum(ir.maximum(added[i], 0.0), 6.0),
                     name="clip")
    task = SearchTask(ir.ComputeDAG([data, weight, bias, res, out]))
    names = [s.name for s in generate_sketches(task)]
    assert names == ["fuse1", "fuse2", "tile"]
    # a consumer that reads the conv shifted is not elementwise: the conv accumulates in a cache
    # stage of its own (fused into its copy), not in the consumer's tiles
    shifted = ir.compute(b.shape, lambda n, y, x, o: b[n, y, (x + 1) % 28, o], name="shift")
    task = SearchTask(ir.ComputeDAG([data, weight, bias, shifted]))
    names = [s.name for s in generate_sketches(task)]
    assert names == ["vsplit+tile", "vsplit+cache+fuse1", "vsplit+cache+fuse2"]


def test_softmax_sketches_with_rfactor():
    sks = _sketches(W.softmax(64, 1024))
    # {no rfactor, rowmax, rowsum, both} x {exp split for vectors, exp unsplit}; the output's
    # rows (1024 > 64 points) are always split for vectors
    assert len(sks) == 8
    assert sum("rfactor" in s.name for s in sks) == 6
    assert all(s.name.startswith("vsplit") for s in sks)


def test_small_spatial_large_reduction_adds_rfactor_sketches():
    from tecomp.search.task import HardwareParams
    sks = generate_sketches(SearchTask(W.matmul(4, 4, 4096).dag,
                                       hardware=HardwareParams(num_cores=2)))
    names = [s.name for s in sks]
    # rfactor (the partials tiled, or cached and fused) and rfactor+par (16 outputs: too few for
    # the cores, so the reduction's outer piece becomes a parallel axis too)
    assert len(sks) == 7 and sum(n.startswith("rfactor") for n in names) == 4
    assert "rfactor+par" in names


@pytest.mark.parametrize("stride,method", [(2, "direct"), (1, "implicit_gemm")])
def test_nchw_conv_may_carry_its_vector_along_the_output_channels(stride, method):
    # a strided (or narrow: 6 output columns) NCHW conv vectorizes badly along its last axis;
    # its local accumulator gets sketches with the output channels innermost (the vector), which
    # compute the same result
    import numpy as np

    import tecomp as tc
    from tecomp.search.target_search import materialize
    wl = W.conv2d(1, 8, 12 if stride == 2 else 6, 12 if stride == 2 else 6, 32, 3, 3, stride, 1,
                  1, 1, "NCHW", method)
    task = SearchTask(wl.dag)
    sks = generate_sketches(task)
    names = [s.name for s in sks]
    inner = [i for i, n in enumerate(names) if n.endswith("o-inner")]
    assert len(inner) == 2, names
    rng = np.random.default_rng(0)
    x = wl.make_inputs(rng)
    ref = wl.reference(x)[0]
    for i in inner:
        c = materialize(task, i, sks[i], {}, rng)
        assert c is not None
        local = next(s for s in c.state.stages if s.scope is Scope.LOCAL)
        spatial = [it.name for it in local.iters if it.kind.name == "SPATIAL"]
        assert spatial[-1] == "o.3", spatial  # the output channels carry the vector
        k = tc.build(wl.dag, schedule=tc.Schedule(wl.dag, c.steps))
        np.testing.assert_allclose(k(*x), ref, rtol=1e-3, atol=1e-3)
    # the private tile buffer is laid out in loop order: the channels contiguous when their tile
    # part is longer than one
    from tecomp.lowering.lower import loop_order_strides
    for _ in range(200):
        c = materialize(task, inner[0], sks[inner[0]], {}, rng)
        local = next(s for s in c.state.stages if s.scope is Scope.LOCAL)
        ext = {it.name: it.const_extent for it in local.iters}
        if ext["o.3"] > 1 and ext["x.3"] > 1:
            shape = tuple(r[1] for r in local.region)
            strides = loop_order_strides(local, shape)
            assert strides[1] == 1 and strides[3] == shape[1], (shape, strides)
            break
    else:
        raise AssertionError("no tile with several channels and columns in 200 samples")
    # a row that whole vectors do not cover (28 columns: 1.75 vectors) gets them too
    wl28 = W.conv2d(1, 8, 28, 28, 32, 1, 1, 1, 0, 1, 1, "NCHW", "direct")
    assert sum(s.name.endswith("o-inner") for s in generate_sketches(SearchTask(wl28.dag))) == 2
    # a conv whose last axis vectorizes well (stride 1, whole vectors) and NHWC get none
    for wl2 in (W.conv2d(1, 8, 32, 32, 32, 3, 3, 1, 1, 1, 1, "NCHW", "direct"),
                W.conv2d(1, 8, 12, 12, 32, 3, 3, 2, 1, 1, 1, "NHWC", "direct")):
        assert not any(s.name.endswith("-inner") for s in generate_sketches(SearchTask(wl2.dag)))

