"""The stride-phase pass (tecomp.lowering.stride_phase): a reduction over a zero-inserting stage
(a transposed convolution) iterates only the taps that read real input, and the pass leaves alone
every loop where it cannot prove that the skipped iterations add zero."""
import re

import numpy as np
import pytest

import tecomp as tc
from tecomp.codegen import interp
from tecomp.ir import dtype as dt
from tecomp.ir.expr import Const, Load, Var, select
from tecomp.ir.loop import Buffer, For, ForKind, PrimFunc, Store, seq, verify
from tecomp.lowering.stride_phase import stride_phase, stride_phase_func
from tecomp.schedule.state import ComputeLocation
from tecomp.search.decisions import Decisions
from tecomp.search.target_search import generate_sketches, materialize
from tecomp.testing.operator_suite import conv2d_transpose


def _phase_loops(func) -> list:
    # each once: the versions of a guarded tile (lowering.guard_split) repeat its loop nest
    return list(dict.fromkeys(re.findall(r"for \((\S+)\.ph ", str(func))))


def _check(kernel, case, rng, rtol=1e-4):
    x = case.make_inputs(rng)
    ref = case.reference(x)[0]
    np.testing.assert_allclose(kernel(*x), ref, rtol=rtol, atol=1e-4)
    np.testing.assert_allclose(kernel.emulate(*x), ref, rtol=rtol, atol=1e-4)


def _inlined(case) -> tc.Schedule:
    s = tc.Schedule(case.dag)
    s[s.state.stages[2].tensor].compute_inline()  # dilate_pad: X, W, dilate_pad, conv_t
    return s


def _random_configs(n, seed):
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        stride, k = int(rng.integers(1, 4)), int(rng.integers(1, 6))
        pad = int(rng.integers(0, k))
        out.append((int(rng.integers(1, 3)), int(rng.integers(1, 4)), int(rng.integers(2, 6)),
                    int(rng.integers(1, 4)), k, stride, pad))
    return out


@pytest.mark.parametrize("cfg", _random_configs(8, 18) + [(1, 3, 4, 2, 4, 2, 1),
                                                          (1, 2, 3, 2, 3, 3, 1)])
def test_conv_transpose_inlined_matches_numpy(cfg):
    """Random strides (1..3), kernel sizes, pads and shapes: the phase loops replace the
    reduction loops over the dilated rows and columns, natively and in the interpreter."""
    n, c, h, o, k, stride, pad = cfg
    case = conv2d_transpose(n, c, h, o, k, stride, pad)
    s = _inlined(case)
    func = tc.lower(s)
    verify(func)
    assert sorted(_phase_loops(func)) == (["rx", "ry"] if stride > 1 else [])
    _check(tc.build(case.dag, schedule=s), case, np.random.default_rng(sum(cfg)))


@pytest.mark.parametrize("cfg", [(1, 3, 4, 2, 4, 2, 1), (1, 2, 3, 3, 5, 3, 2)])
def test_search_candidates_inline_the_zeros_and_skip_them(cfg):
    """Every CPU sketch inlines the dilated input; sampled candidates lower to phase loops and
    compute the reference."""
    case = conv2d_transpose(*cfg)
    task = tc.SearchTask(case.dag, target="llvm")
    sketches = generate_sketches(task)
    assert sketches and all("inline_zeros" in sk.name for sk in sketches)
    rng = np.random.default_rng(0)
    fired = 0
    for i in range(6):
        cand = materialize(task, i % len(sketches), sketches[i % len(sketches)], Decisions(), rng)
        assert cand is not None
        (dil,) = [st for st in cand.state.stages if st.name == "dilate_pad"]
        assert dil.location is ComputeLocation.INLINE
        func = tc.lower(cand.state)
        verify(func)
        fired += bool(_phase_loops(func))
        _check(tc.build(case.dag, schedule=cand.state), case, rng)
    assert fired >= 3


def test_gpu_candidates_match_in_the_emulator():
    """GPU sketches inline the dilated input too; the phase moves onto loops inside the
    thread-bound ones (each thread its own phase), checked through the lockstep interpreter."""
    case = conv2d_transpose(1, 2, 4, 2, 4, 2, 1)  # 2 input channels: unrolled, quicker to build
    task, sketches, rng, x, ref = case.search_setup(0, target="cuda")
    fired = 0
    for i in range(4):
        cand = materialize(task, i % len(sketches), sketches[i % len(sketches)], Decisions(), rng)
        assert cand is not None
        k = tc.build(case.dag, target="cuda", schedule=cand.state)
        fired += bool(_phase_loops(k.func))
        np.testing.assert_allclose(k.emulate(*x), ref, rtol=1e-4, atol=1e-4)
    assert fired >= 1


def test_output_channels_may_carry_the_vector():
    """Lanes along the output columns would need taps of both phases (the pass cannot split a
    vector loop): the sketches offer the output channels as the vector axis too."""
    case = conv2d_transpose(1, 32, 6, 32, 4, 2, 1)
    names = [sk.name for sk in generate_sketches(tc.SearchTask(case.dag, target="llvm"))]
    assert any("o-inner" in n for n in names), names


# ----------------------------------------------------------------------------- near misses

def _reduce_case(body_fn, m=6, k=5, n_a=12, reducer=tc.sum):
    A = tc.placeholder((n_a,), "float32", name="A")
    B = tc.placeholder((k,), "float32", name="B")
    r = tc.reduce_axis(k, name="r")
    C = tc.compute((m,), lambda y: reducer(body_fn(A, B, y, r), axis=r), name="C")
    return tc.ComputeDAG([A, B, C])


def _run_both(dag, ref_fn, sched=None):
    rng = np.random.default_rng(7)
    a = rng.uniform(-1, 1, dag.inputs[0].shape).astype("float32")
    b = rng.uniform(-1, 1, dag.inputs[1].shape).astype("float32")
    k = tc.build(dag, schedule=sched)
    ref = ref_fn(a.astype(np.float64), b.astype(np.float64))
    np.testing.assert_allclose(k(a, b), ref, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(k.emulate(a, b), ref, rtol=1e-5, atol=1e-5)


def test_affine_phase_fires():
    dag = _reduce_case(lambda A, B, y, r: tc.if_then_else(
        (y + r + 1) % 2 == 0, A[(y + r + 1) // 2], 0.0) * B[r])
    assert _phase_loops(tc.lower(dag)) == ["r"]
    _run_both(dag, lambda a, b: np.array([sum(a[(y + r + 1) // 2] * b[r] for r in range(5)
                                              if (y + r + 1) % 2 == 0) for y in range(6)]))


def test_non_affine_modulus_does_not_fire():
    dag = _reduce_case(lambda A, B, y, r: tc.if_then_else(
        (r * r + y) % 2 == 0, A[y + r], 0.0) * B[r])
    assert _phase_loops(tc.lower(dag)) == []
    _run_both(dag, lambda a, b: np.array([sum(a[y + r] * b[r] for r in range(5)
                                              if (r * r + y) % 2 == 0) for y in range(6)]))


def test_coefficient_sharing_a_factor_with_the_modulus_does_not_fire():
    dag = _reduce_case(lambda A, B, y, r: tc.if_then_else(
        (2 * r + y) % 4 == 0, A[y + r], 0.0) * B[r])
    assert _phase_loops(tc.lower(dag)) == []
    _run_both(dag, lambda a, b: np.array([sum(a[y + r] * b[r] for r in range(5)
                                              if (2 * r + y) % 4 == 0) for y in range(6)]))


def test_max_reduction_does_not_fire():
    """Skipping ``max(acc, 0)`` would change the result: only additive accumulations qualify."""
    dag = _reduce_case(lambda A, B, y, r: tc.if_then_else(
        (y + r) % 2 == 0, A[y + r], 0.0) * B[r], reducer=tc.max)
    assert _phase_loops(tc.lower(dag)) == []
    _run_both(dag, lambda a, b: np.array([max(a[y + r] * b[r] if (y + r) % 2 == 0 else 0.0
                                              for r in range(5)) for y in range(6)]))


def test_phase_of_a_vectorized_inner_loop_does_not_fire():
    """Reduction outside, the output axis inside and vectorized: the phase depends on a loop
    inside the reduction loop (it cannot be rewritten) and on a vector loop (left alone)."""
    dag = _reduce_case(lambda A, B, y, r: tc.if_then_else(
        (y + r) % 2 == 0, A[y + r], 0.0) * B[r], m=8)
    s = tc.Schedule(dag)
    C = dag.outputs[0]
    (y,), (r,) = s[C].axes, s[C].reduce_axes
    s[C].reorder(r, y)
    s[C].vectorize(y)
    func = tc.lower(s)
    assert _phase_loops(func) == []
    _run_both(dag, lambda a, b: np.array([sum(a[y + r] * b[r] for r in range(5)
                                              if (y + r) % 2 == 0) for y in range(8)]), s)


def test_serial_inner_spatial_loop_is_rewritten_instead():
    """Reduction outside, the output axis inside (serial): skipping an output row's iteration
    is skipping a zero addition too, so the inner loop takes the phase."""
    dag = _reduce_case(lambda A, B, y, r: tc.if_then_else(
        (y + r) % 2 == 0, A[y + r], 0.0) * B[r], m=7)
    s = tc.Schedule(dag)
    C = dag.outputs[0]
    (y,), (r,) = s[C].axes, s[C].reduce_axes
    s[C].reorder(r, y)
    assert _phase_loops(tc.lower(s)) == ["y"]
    _run_both(dag, lambda a, b: np.array([sum(a[y + r] * b[r] for r in range(5)
                                              if (y + r) % 2 == 0) for y in range(7)]), s)


def _two_store_func(shift: int):
    """``for v in 0..6: acc[0] += (v%2==0 ? A[v] : 0); acc[1] += ((v+shift)%2==0 ? A[v] : 0)``"""
    A = Buffer("A", (6,), dt.float32)
    acc = Buffer("acc", (2,), dt.float32)
    v = Var("v")
    zero, one = Const(0, dt.INDEX), Const(1, dt.INDEX)

    def add(i, phase):
        return Store(acc, (i,), Load(acc, (i,)) + select(phase % 2 == 0, Load(A, (v,)),
                                                         Const(0.0, dt.float32)))
    body = seq(add(zero, v), add(one, v + shift))
    return PrimFunc("two", [A, acc], For(v, zero, Const(6, dt.INDEX), ForKind.SERIAL, body))


@pytest.mark.parametrize("shift,fires", [(0, True), (2, True), (1, False)])
def test_stores_of_different_phases_block_the_rewrite(shift, fires):
    func = _two_store_func(shift)
    new = stride_phase_func(func)
    assert (new is not func) == fires
    verify(new)
    a = np.random.default_rng(3).uniform(-1, 1, 6).astype("float32")
    outs = []
    for f in (func, new):
        acc = np.array([0.5, -0.25], "float32")
        interp.run(f, [a, acc])
        outs.append(acc)
    np.testing.assert_allclose(outs[1], outs[0], rtol=1e-6)
    expect = [0.5 + a[0::2].sum(), -0.25 + a[(shift % 2)::2].sum()]
    np.testing.assert_allclose(outs[0], expect, rtol=1e-5)


def test_a_body_without_a_phase_is_returned_unchanged():
    func = _two_store_func(0)
    plain = PrimFunc("p", func.params, For(Var("w"), Const(0, dt.INDEX), Const(2, dt.INDEX),
                                           ForKind.SERIAL, Store(func.params[1], (Const(0, dt.INDEX),),
                                                                 Const(1.0, dt.float32))))
    assert stride_phase(plain.body) is plain.body
