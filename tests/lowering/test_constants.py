"""Layout rewrite of constant weights: ``tc.build(..., constants=...)`` runs the packing once."""
import numpy as np
import pytest

import tecomp as tc
from tecomp.ir.loop import For, Store, stmts
from tecomp.lowering.constants import split_constants
from tecomp.testing import hand_schedules as H
from tecomp.testing import workloads as W


def _stored(func) -> set:
    return {s.buffer.name for s in stmts(func.body) if isinstance(s, Store)}


def _params(kernel) -> list:
    return [b.name for b in kernel.func.params]


@pytest.fixture(scope="module")
def packed_matmul():
    wl = W.matmul(20, 40, 24)  # N not a multiple of the panel width: the pack pads with zeros
    s = H.matmul_schedule(wl.dag, tile_i=4, tile_j=16)
    rng = np.random.default_rng(0)
    return wl, s, wl.make_inputs(rng)


def test_matmul_packed_weight_is_folded_at_build_time(packed_matmul):
    wl, s, (a, b) = packed_matmul
    plain = tc.build(wl.dag, schedule=s)
    assert "B.global" in _stored(plain.func)  # without constants= the packing is timed
    k = tc.build(wl.dag, schedule=s, constants={"B": b})
    assert _params(k) == ["A", "B.global", "matmul"]  # B itself is no argument any more
    assert "B.global" not in _stored(k.func)  # no loop nest writes the packed weight
    ref = wl.reference([a, b])[0]
    np.testing.assert_allclose(k(a), ref, rtol=1e-4, atol=1e-4)
    np.testing.assert_array_equal(k(a), plain(a, b))
    a2 = np.random.default_rng(1).standard_normal(a.shape).astype(a.dtype)
    np.testing.assert_allclose(k(a2), wl.reference([a2, b])[0], rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(k.emulate(a2), wl.reference([a2, b])[0], rtol=1e-4, atol=1e-4)


def test_the_prologue_computes_only_the_packing(packed_matmul):
    wl, s, _ = packed_matmul
    func = tc.lower(s)
    split = split_constants(func, len(wl.dag.inputs), {"B"})
    assert [b.name for b in split.prologue.params] == ["B", "B.global"]
    assert _stored(split.prologue) == {"B.global"}
    assert [b.name for b in split.bound] == ["B.global"]
    loops = sum(isinstance(x, For) for x in stmts(func.body))
    # the pack's loops (3, its row loop split at the end of B's rows) move to the prologue
    packing = sum(isinstance(x, For) for x in stmts(split.prologue.body))
    assert packing >= 3
    assert sum(isinstance(x, For) for x in stmts(split.main.body)) == loops - packing


def test_the_kernel_keeps_its_own_copy_of_the_constants(packed_matmul):
    wl, s, (a, b) = packed_matmul
    b = b.copy()
    k = tc.build(wl.dag, schedule=s, constants={"B": b}, cache=False)
    expect = wl.reference([a, b])[0]
    b[:] = 0.0  # the caller's array changes after the build
    np.testing.assert_allclose(k(a), expect, rtol=1e-4, atol=1e-4)


def test_the_cache_tells_constants_apart(packed_matmul):
    wl, s, (a, b) = packed_matmul
    b2 = b * 2.0
    k1 = tc.build(wl.dag, schedule=s, constants={"B": b})
    k2 = tc.build(wl.dag, schedule=s, constants={"B": b2})
    np.testing.assert_allclose(k2(a), 2.0 * k1(a), rtol=1e-5, atol=1e-5)
    again = tc.build(wl.dag, schedule=s, constants={"B": b.copy()})
    assert again.compiled is k1.compiled  # equal values: one compiled kernel


def test_the_cache_keeps_packed_weights_only_while_a_kernel_uses_them(packed_matmul):
    import gc
    import weakref
    wl, s, (a, b) = packed_matmul
    b3 = b * 3.0
    k = tc.build(wl.dag, schedule=s, constants={"B": b3})
    packed = weakref.ref(k.bound_arrays[0])
    assert tc.build(wl.dag, schedule=s, constants={"B": b3}).bound_arrays[0] is packed()
    del k
    gc.collect()
    assert packed() is None  # freed with its last kernel: the cache does not hold it
    k = tc.build(wl.dag, schedule=s, constants={"B": b3})  # packed again, the code reused
    np.testing.assert_allclose(k(a), wl.reference([a, b3])[0], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("layout", ["NHWC", "NCHW"])
@pytest.mark.parametrize("method", ["direct", "implicit_gemm"])
def test_conv_packed_weight_matches_the_unpacked_kernel(layout, method):
    wl = W.conv2d(2, 8, 9, 9, 20, 3, 3, 2, 1, 1, 1, layout, method)
    s = H.conv2d_schedule(wl.dag, layout, method, tile_x=4, tile_o=8, pack=True)
    x, w = wl.make_inputs(np.random.default_rng(2))
    k = tc.build(wl.dag, schedule=s, constants={"weight": w})
    assert _params(k) == ["data", "weight.global", "conv2d"]
    assert "weight.global" not in _stored(k.func)
    assert "pad" in _stored(k.func)  # the padding reads the data: it stays in the kernel
    out = k(x)
    np.testing.assert_allclose(out, wl.reference([x, w])[0], rtol=1e-4, atol=1e-4)
    np.testing.assert_array_equal(out, tc.build(wl.dag, schedule=s)(x, w))


def test_a_constant_read_directly_is_bound_without_a_prologue():
    wl = W.matmul(8, 12, 16)
    a, b = wl.make_inputs(np.random.default_rng(3))
    k = tc.build(wl.dag, constants={"A": a})
    assert _params(k) == ["B", "A", "matmul"]  # free inputs first, then bound ones
    np.testing.assert_allclose(k(b), wl.reference([a, b])[0], rtol=1e-4, atol=1e-4)


def test_packing_of_a_non_constant_input_stays_in_the_kernel(packed_matmul):
    wl, s, (a, b) = packed_matmul
    k = tc.build(wl.dag, schedule=s, constants={"A": a})
    assert "B.global" in _stored(k.func)
    np.testing.assert_allclose(k(b), wl.reference([a, b])[0], rtol=1e-4, atol=1e-4)


def test_wrong_argument_count_names_the_bound_constant(packed_matmul):
    wl, s, (a, b) = packed_matmul
    k = tc.build(wl.dag, schedule=s, constants={"B": b})
    with pytest.raises(TypeError, match="B: bound by constants="):
        k(a, b)


def test_constant_errors_name_the_problem(packed_matmul):
    wl, s, (a, b) = packed_matmul
    with pytest.raises(KeyError, match="'W'.*not an input.*A, B"):
        tc.build(wl.dag, schedule=s, constants={"W": b})
    with pytest.raises(KeyError, match="output"):
        tc.build(wl.dag, schedule=s, constants={"matmul": b})
    with pytest.raises(ValueError, match="shape"):
        tc.build(wl.dag, schedule=s, constants={"B": b[:, :8]})
    with pytest.raises(TypeError, match="dtype float64"):
        tc.build(wl.dag, schedule=s, constants={"B": b.astype(np.float64)})
    with pytest.raises(TypeError, match="numpy array"):
        tc.build(wl.dag, schedule=s, constants={"B": b.tolist()})
    with pytest.raises(NotImplementedError, match="llvm target only"):
        tc.build(wl.dag, "cuda", constants={"B": b})


@pytest.mark.parametrize("layout", ["NHWC", "NCHW"])
def test_the_search_pack_decision_is_folded_by_constants(layout):
    """A random candidate told to pack the weight (decision ``pack``) builds with constants=: the
    packed weight is an argument and no loop nest of the kernel writes it."""
    from tecomp.search.target_search import generate_sketches, materialize
    from tecomp.search.task import SearchTask
    wl = W.conv2d(1, 8, 9, 9, 24, 3, 3, 2, 1, 1, 1, layout, "direct")
    task = SearchTask(wl.dag)
    sketches = generate_sketches(task)
    rng = np.random.default_rng(7)
    x, w = wl.make_inputs(rng)
    folded, done = 0, set()  # one folded candidate per sketch: builds are this test's cost
    for i in range(12):
        sk = sketches[i % len(sketches)]
        if sk.name in done:
            continue
        cand = materialize(task, i % len(sketches), sk, {"pack": {"weight": 3}}, rng)
        if cand is None or not any(st.name == "weight.global" for st in cand.state.stages):
            continue  # inner tiles of length 1: nothing to pack
        k = tc.build(wl.dag, schedule=tc.Schedule(wl.dag, cand.steps), constants={"weight": w},
                     cache=False)
        assert "weight" not in _params(k) and "weight.global" in _params(k)
        assert "weight.global" not in _stored(k.func)
        np.testing.assert_allclose(k(x), wl.reference([x, w])[0], rtol=1e-4, atol=1e-4)
        folded += 1
        done.add(sk.name)
    assert folded >= 3


def test_packed_weights_and_outputs_start_on_a_cache_line(packed_matmul):
    # numpy only promises 16 bytes; a packed panel at 16 mod 64 splits every other vector load
    from tecomp.codegen.memory import ALIGN, aligned_copy, aligned_empty
    wl, s, (a, b) = packed_matmul
    k = tc.build(wl.dag, schedule=s, constants={"B": b})
    assert all(x.ctypes.data % ALIGN == 0 for x in k.bound_arrays)
    assert k(a).ctypes.data % ALIGN == 0
    for shape in [(1,), (3, 5), (1000, 1000)]:
        e = aligned_empty(shape, np.float32)
        assert e.shape == shape and e.flags.c_contiguous and e.ctypes.data % ALIGN == 0
    odd = np.zeros(33, np.float32)[1:].reshape(4, 8)  # 4 bytes past an allocation's start
    c = aligned_copy(odd)
    assert c.ctypes.data % ALIGN == 0 and np.array_equal(c, odd)
