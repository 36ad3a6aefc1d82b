"""The untuned CPU schedule that ``tc.build(dag)`` uses: inlining that never recomputes math or
grows an expression past the limit, tiles for ``tc.ops`` products, the reference loop order for
reductions written in the DSL, and results equal to numpy."""
import numpy as np

import tecomp as tc
from tecomp.schedule import Schedule, default_cpu_schedule


def _dsl_matmul(n, m, k):
    A = tc.placeholder((n, k), "float32", "A")
    B = tc.placeholder((k, m), "float32", "B")
    r = tc.reduce_axis(k, "r")
    C = tc.compute((n, m), lambda i, j: tc.sum(A[i, r] * B[r, j], axis=r), name="C")
    return tc.ComputeDAG([A, B, C])


def _softmax(n, m):
    X = tc.placeholder((n, m), "float32", "X")
    j = tc.reduce_axis(m, "j")
    M = tc.compute((n,), lambda i: tc.max(X[i, j], axis=j), name="M")
    E = tc.compute((n, m), lambda i, c: tc.exp(X[i, c] - M[i]), name="E")
    j2 = tc.reduce_axis(m, "j2")
    S = tc.compute((n,), lambda i: tc.sum(E[i, j2], axis=j2), name="S")
    Y = tc.compute((n, m), lambda i, c: E[i, c] / S[i], name="Y")
    return tc.ComputeDAG([X, Y]), (E, M)


def _kinds(s):
    return [r[0] for r in s.records()]


def test_a_dsl_matmul_walks_rows_in_parallel_and_matches_numpy():
    dag = _dsl_matmul(37, 48, 29)
    s = default_cpu_schedule(dag)
    assert _kinds(s) == ["RE", "AN"]  # the reduction outside the row loop, the rows parallel
    text = str(tc.lower(s))
    assert "parallel for" in text
    rng = np.random.default_rng(3)
    a, b = rng.uniform(-1, 1, (37, 29)).astype(np.float32), rng.uniform(-1, 1, (29, 48)).astype(
        np.float32)
    k = tc.build(dag)
    assert str(k.func) == text
    np.testing.assert_allclose(k(a, b), a @ b, rtol=1e-5, atol=1e-5)


def test_a_tc_ops_matmul_is_register_tiled():
    A = tc.placeholder((64, 96), "float32", "A")
    B = tc.placeholder((96, 80), "float32", "B")
    dag = tc.ComputeDAG([A, B, tc.ops.matmul(A, B)])
    assert _kinds(default_cpu_schedule(dag))[0] == "CHW"  # a register tile of the output
    rng = np.random.default_rng(4)
    a, b = rng.uniform(-1, 1, (64, 96)).astype(np.float32), rng.uniform(-1, 1, (96, 80)).astype(
        np.float32)
    np.testing.assert_allclose(tc.build(dag)(a, b), a @ b, rtol=1e-5, atol=1e-5)


def test_math_read_twice_stays_a_stage_and_cheap_chains_are_inlined():
    dag, (E, M) = _softmax(24, 40)
    s = default_cpu_schedule(dag)
    assert "CI" not in _kinds(s)  # exp is read by the sum and the division: computed once
    x = np.random.default_rng(5).uniform(-4, 4, (24, 40)).astype(np.float32)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    np.testing.assert_allclose(tc.build(dag)(x), e / e.sum(axis=1, keepdims=True), rtol=1e-5)
    # a subtraction read twice (a layer norm's centring) and a one-reader chain are inlined
    X = tc.placeholder((8, 16), "float32", "X")
    D = tc.compute((8, 16), lambda i, j: X[i, j] - 1.0, name="D")
    A = tc.compute((8, 16), lambda i, j: D[i, j] * D[i, j], name="A")
    Y = tc.compute((8, 16), lambda i, j: tc.maximum(A[i, j] + D[i, j], 0.0), name="Y")
    s = default_cpu_schedule(tc.ComputeDAG([X, Y]))
    assert _kinds(s).count("CI") == 2
    x = np.random.default_rng(6).uniform(-2, 2, (8, 16)).astype(np.float32)
    d = x - 1
    np.testing.assert_allclose(tc.build(tc.ComputeDAG([X, Y]))(x), np.maximum(d * d + d, 0),
                               rtol=1e-5, atol=1e-6)


def test_inlining_stops_before_an_expression_grows_past_the_limit():
    X = tc.placeholder((16,), "float32", "X")
    chain = X
    for n in range(4):  # four stages of 100 additions: inlining all would be 400 deep
        prev = chain
        chain = tc.compute((16,), lambda i, p=prev: _adds(p[i], 100), name=f"S{n}")
    dag = tc.ComputeDAG([X, chain])
    s = default_cpu_schedule(dag)
    assert 0 < _kinds(s).count("CI") < 3
    np.testing.assert_allclose(tc.build(dag)(np.zeros(16, np.float32)), 400.0)
    # the plain nest, for comparison, computes the same
    np.testing.assert_allclose(tc.build(dag, schedule=Schedule(dag))(np.zeros(16, np.float32)),
                               400.0)


def _adds(e, n):
    for _ in range(n):
        e = e + 1.0
    return e


def test_a_product_reads_a_computed_operand_from_memory_and_an_index_map_in_place():
    A = tc.placeholder((20, 12), "float32", "A")
    B = tc.placeholder((12, 16), "float32", "B")
    S = tc.compute((20, 12), lambda i, k: A[i, k] * 2.0, name="S")  # read 16 times a point
    T = tc.compute((16, 12), lambda j, k: B[k, j], name="T")  # a transposed view
    r = tc.reduce_axis(12, "r")
    C = tc.compute((20, 16), lambda i, j: tc.sum(S[i, r] * T[j, r], axis=r), name="C")
    dag = tc.ComputeDAG([A, B, C])
    recs = default_cpu_schedule(dag).records()
    inlined = {r[1] for r in recs if r[0] == "CI"}
    stage = {st.op.name: n for n, st in enumerate(dag.stages)}
    assert inlined == {stage["T"]}
    rng = np.random.default_rng(7)
    a, b = rng.uniform(-1, 1, (20, 12)).astype(np.float32), rng.uniform(-1, 1, (12, 16)).astype(
        np.float32)
    np.testing.assert_allclose(tc.build(dag)(a, b), 2 * a @ b, rtol=1e-5, atol=1e-5)
