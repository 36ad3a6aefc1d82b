"""Zero-region trimming: reduction loops of masked sums (triangular matmuls, cumulative sums)
stop where only zeros would be added; every program checked against numpy on random data,
natively and on the loop-IR interpreter, under hand, sampled and random schedules."""
import re

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tecomp as tc
from tecomp.schedule import Schedule
from tecomp.testing.random_schedules import check_sampled_candidates, random_steps
from tecomp.workloads.workload import Workload


def _masked_matmul(M, N, K, upper=False, offset=0, strict=False):
    """``C = tril(A, offset) @ B`` (``k <= i + offset``), or with ``upper`` ``triu(A, offset) @ B``
    (``k >= i + offset``); ``strict`` writes the same bound with ``<`` / ``>``."""
    A = tc.placeholder((M, K), "float32", name="A")
    B = tc.placeholder((K, N), "float32", name="B")
    k = tc.reduce_axis(K, name="k")

    def keep(i):
        if upper:
            return k > i + offset - 1 if strict else k >= i + offset
        return k < i + offset + 1 if strict else k <= i + offset
    C = tc.compute((M, N), lambda i, j: tc.sum(tc.if_then_else(keep(i), A[i, k], 0.0) * B[k, j],
                                               axis=k), name="C")
    dag = tc.ComputeDAG([A, B, C])
    mask = np.triu if upper else np.tril
    return Workload(dag, lambda rng: [rng.standard_normal((M, K)).astype("float32"),
                                      rng.standard_normal((K, N)).astype("float32")],
                    lambda a: [mask(a[0].astype(np.float64), offset) @ a[1]], name="masked_mm")


def _check(wl, s):
    x = wl.make_inputs(np.random.default_rng(0))
    ref = wl.reference(x)[0]
    k = tc.build(wl.dag, schedule=s)
    np.testing.assert_allclose(k(*x), ref, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(k.emulate(*x), ref, rtol=1e-4, atol=1e-4)


def _loop_heads(s) -> dict:
    """Loop variable -> its header line in the printed loop IR."""
    return {m.group(1): m.group(0) for m in re.finditer(r"for \((\S+) = [^\n]*", str(s.lower()))}


def test_a_tiled_triangular_matmul_stops_its_reduction_at_the_diagonal():
    wl = _masked_matmul(37, 37, 37)
    s = Schedule(wl.dag)
    C = wl.dag.outputs[0]
    i, _ = s[C].axes
    (k,) = s[C].reduce_axes
    io, ii = s[C].split(i, factor=8)
    ko, ki = s[C].split(k, factor=4)
    s[C].reorder(io, ko, ii, ki)
    heads = _loop_heads(s)
    # k.0 stops after the i tile's last row; the loops inside keep their constant ranges
    assert "min(10, max(0, ((((i.0 * 8) + 7) // 4) + 1)))" in heads["k.0"]
    # and runs in two parts: the k tiles wholly below the diagonal add without the select
    text = str(s.lower())
    adds = text.count("= (C[")
    assert "for (k.0 = 0;" in text and text.count("? A[") == adds // 2
    assert heads["k.1"].startswith("for (k.1 = 0; k.1 < 4;")
    assert heads["i.1_1"].startswith("for (i.1_1 = 0; i.1_1 < 8;")
    _check(wl, s)


def test_an_untiled_upper_bound_and_strict_comparisons_trim_too():
    for upper, offset, strict in [(True, 0, False), (True, 3, True), (False, -2, True),
                                  (False, 3, False)]:
        wl = _masked_matmul(9, 5, 13, upper=upper, offset=offset, strict=strict)
        s = Schedule(wl.dag)
        assert "max(" in _loop_heads(s)["k"] or "min(" in _loop_heads(s)["k"]
        _check(wl, s)


def test_sampled_candidates_of_masked_matmuls_and_a_cumulative_sum_are_right():
    # small shapes (still several tiles of each loop): a candidate's unrolled body compiles quickly
    check_sampled_candidates(_masked_matmul(24, 8, 24), n=8, seed=3)
    check_sampled_candidates(_masked_matmul(13, 8, 18, upper=True, offset=4), n=8, seed=4)
    x = tc.placeholder((50,), "float32", name="x")
    k = tc.reduce_axis(50, name="k")
    y = tc.compute((50,), lambda i: tc.sum(tc.if_then_else(k <= i, x[k], 0.0), axis=k), name="cs")
    dag = tc.ComputeDAG([x, y])
    wl = Workload(dag, lambda rng: [rng.standard_normal(50).astype("float32")],
                  lambda a: [np.cumsum(a[0].astype(np.float64))], name="cumsum")
    s = Schedule(dag)
    assert "min(50" in _loop_heads(s)["k"]
    _check(wl, s)
    check_sampled_candidates(wl, n=6, seed=5)


def test_no_trim_where_little_is_skipped():
    # k <= i + 5 over 9 rows and 13 columns skips 28 of 117 points (24%): below MIN_SKIPPED
    wl = _masked_matmul(9, 5, 13, offset=5)
    s = Schedule(wl.dag)
    assert _loop_heads(s)["k"].startswith("for (k = 0; k < 13;")
    _check(wl, s)


def test_no_trim_where_the_masked_term_is_not_the_whole_addend_or_the_bound_is_loaded():
    # (select + 1) * B adds B outside the mask: nothing to cut
    A = tc.placeholder((6, 7), "float32", name="A")
    B = tc.placeholder((7, 5), "float32", name="B")
    k = tc.reduce_axis(7, name="k")
    C = tc.compute((6, 5), lambda i, j: tc.sum((tc.if_then_else(k <= i, A[i, k], 0.0) + 1.0)
                                               * B[k, j], axis=k), name="C")
    dag = tc.ComputeDAG([A, B, C])
    wl = Workload(dag, lambda rng: [rng.standard_normal((6, 7)).astype("float32"),
                                    rng.standard_normal((7, 5)).astype("float32")],
                  lambda a: [(np.tril(a[0].astype(np.float64)) + 1) @ a[1]])
    s = Schedule(dag)
    assert _loop_heads(s)["k"].startswith("for (k = 0; k < 7;")
    _check(wl, s)
    # a bound read from memory (per-row lengths) is left to the select
    L = tc.placeholder((6,), "int64", name="L")
    C2 = tc.compute((6, 5), lambda i, j: tc.sum(tc.if_then_else(k < L[i], A[i, k], 0.0)
                                                * B[k, j], axis=k), name="C2")
    dag2 = tc.ComputeDAG([A, B, L, C2])
    s2 = Schedule(dag2)
    assert _loop_heads(s2)["k"].startswith("for (k = 0; k < 7;")
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((6, 7)).astype("float32"), rng.standard_normal((7, 5)).astype("float32")
    lens = rng.integers(0, 8, 6).astype("int64")
    ref = np.where(np.arange(7)[None, :] < lens[:, None], a, 0) @ b
    np.testing.assert_allclose(tc.build(dag2, schedule=s2)(a, b, lens), ref, rtol=1e-5, atol=1e-5)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), upper=st.booleans(), offset=st.integers(-4, 4))
def test_random_schedules_of_a_masked_matmul_match_numpy(data, upper, offset):
    wl = _masked_matmul(11, 6, 13, upper=upper, offset=offset)
    s = random_steps(Schedule(wl.dag), lambda n: data.draw(st.integers(0, n - 1)),
                     data.draw(st.integers(1, 10)))
    _check(wl, s)


def test_gpu_candidates_of_a_triangular_matmul_trim_and_emulate_correctly():
    from tecomp.search.target_search import generate_sketches, materialize
    from tecomp.search.task import SearchTask
    wl = _masked_matmul(16, 8, 16)  # small: the candidates' unrolled thread loops build quickly
    task = SearchTask(wl.dag, target="cuda")
    x = wl.make_inputs(np.random.default_rng(2))
    ref = wl.reference(x)[0]
    rng = np.random.default_rng(6)
    trimmed = 0
    for n, sk in enumerate(generate_sketches(task)):
        c = next((c for c in (materialize(task, n, sk, {}, rng) for _ in range(20)) if c), None)
        if c is None:
            continue
        k = tc.build(wl.dag, target="cuda", schedule=Schedule(wl.dag, c.steps), cache=False)
        np.testing.assert_allclose(k.emulate(*x), ref, rtol=1e-4, atol=1e-4)
        trimmed += "max(0, " in str(Schedule(wl.dag, c.steps).lower())
    assert trimmed >= 1


def test_a_padded_convolution_keeps_its_tap_loops_whole():
    # the inlined padding is a select on (y + ry - 1 >= 0) & ...: a bound, but the taps past
    # the border are a few percent of the reduction, not worth a variable tap loop
    from tecomp.testing.workloads import conv2d
    for hw in (56, 7):
        wl = conv2d(1, 4, hw, hw, 4, 3, 3, 1, 1, 1, 1, "NCHW", "direct")
        s = Schedule(wl.dag)
        s[wl.dag.stage("pad").tensor].compute_inline()
        text = str(s.lower())
        assert "? " in text and "max(0, " not in text and "min(3" not in text
        _check(wl, s)


def test_a_band_is_cut_from_both_sides():
    # k in [i - 3, i + 2]: three parts of the k loop, the middle one without the select (a band
    # of 6 in 24 columns; a narrow N keeps the candidates' unrolled bodies quick to compile)
    M, N, K = 24, 8, 24
    A = tc.placeholder((M, K), "float32", name="A")
    B = tc.placeholder((K, N), "float32", name="B")
    k = tc.reduce_axis(K, name="k")
    C = tc.compute((M, N), lambda i, j: tc.sum(
        tc.if_then_else((k >= i - 3) & (k <= i + 2), A[i, k], 0.0) * B[k, j], axis=k), name="C")
    dag = tc.ComputeDAG([A, B, C])
    wl = Workload(dag, lambda rng: [rng.standard_normal((M, K)).astype("float32"),
                                    rng.standard_normal((K, N)).astype("float32")],
                  lambda a: [np.triu(np.tril(a[0].astype(np.float64), 2), -3) @ a[1]])
    s = Schedule(dag)
    text = str(s.lower())
    assert text.count("for (k = ") == 3 and text.count("? A[") == 2
    assert "(i - 3)" in text and "((i + 2) + 1)" in text
    _check(wl, s)
    check_sampled_candidates(wl, n=8, seed=2)
