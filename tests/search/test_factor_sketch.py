"""The factor-out sketch rule: sums over several axes with factors that read only some of them
(bilinear forms, matrix chains written as one sum) are tiled as two sums when that does less
work; every candidate is checked against numpy on random data."""
import numpy as np
import pytest

import tecomp as tc
from tecomp.schedule import Schedule
from tecomp.search.factor_sketch import factoring_work
from tecomp.search.target_search import generate_sketches, materialize
from tecomp.search.task import HardwareParams, SearchTask
from tecomp.testing.operator_suite import bilinear_form, matrix_chain, operator_case
from tecomp.testing.random_dags import random_contraction

HW = HardwareParams(num_cores=2)


def _close(out, ref):
    ref = np.asarray(ref)
    np.testing.assert_allclose(out, ref, rtol=3e-5, atol=3e-5 * max(1.0, float(np.abs(ref).max())))


def _every_candidate_correct(dag, expect, x, per_sketch=4):
    task = SearchTask(dag, hardware=HW)
    sks = generate_sketches(task)
    rng = np.random.default_rng(1)
    built = 0
    for n, sk in enumerate(sks):
        for _ in range(per_sketch):
            c = materialize(task, n, sk, {}, rng)
            if c is not None:
                _close(tc.build(dag, schedule=Schedule(dag, c.steps))(*x), expect)
                built += 1
    assert built >= per_sketch * len(sks) // 2
    return sks


def test_the_bilinear_form_is_only_sketched_factored_along_either_axis():
    case = bilinear_form(6, 12, 12)   # square: both orders cost the same
    x = case.make_inputs(np.random.default_rng(0))
    sks = _every_candidate_correct(case.dag, case.reference(x)[0], x)
    assert sks and all(sk.name.startswith("factor") for sk in sks)
    firsts = {tuple(sk.steps[0].record()) for sk in sks}
    assert firsts == {("FO", 3, 1, 1), ("FO", 3, 2, 1)}   # either reduction axis kept, last
    # the partial sums (a matmul) are tiled, not left as written
    assert any(st.record()[0] == "SP" and st.record()[1] == 3 for st in sks[0].steps)


def test_the_cheaper_end_of_a_matrix_chain_is_multiplied_first():
    # (A @ B) @ C costs 40*30*2 + 40*2*50 (k kept after l), A @ (B @ C) 30*50*2 + 40*30*2
    wl = matrix_chain(40, 30, 50, 2)
    op = wl.dag.outputs[0].op
    written, work = factoring_work(op)
    assert written == 40 * 2 * 30 * 50 * 3
    by_name = {a.name: w for a, w in work}
    assert by_name == {"k": 2 * 30 * 50 * 2 + 40 * 2 * 30 * 2, "l": 40 * 50 * 30 * 2 + 40 * 2 * 50 * 2}
    sks = generate_sketches(SearchTask(wl.dag, hardware=HW))
    # keep k, B @ C first, as P[k, j] (j, read contiguously, innermost): two plain matmuls
    assert {tuple(sk.steps[0].record()) for sk in sks} == {("FO", 3, 2, 0)}
    # every candidate is right, built for a smaller chain (quicker to compile) with these sketches
    small = matrix_chain(16, 24, 10, 2)
    assert [sk.name for sk in generate_sketches(SearchTask(small.dag, hardware=HW))] == \
        [sk.name for sk in sks]
    x = small.make_inputs(np.random.default_rng(2))
    small_sks = _every_candidate_correct(small.dag, small.reference(x)[0], x, per_sketch=1)
    assert {tuple(sk.steps[0].record()) for sk in small_sks} == {("FO", 3, 2, 0)}


@pytest.mark.parametrize("name", ["matmul", "conv1d", "conv3d", "grouped", "capsule", "sqdist",
                                  "frobenius", "layer_norm"])
def test_operators_without_a_factor_to_hoist_keep_their_sketches(name):
    sks = generate_sketches(SearchTask(operator_case(name, "small").dag, hardware=HW))
    assert sks and not any("factor" in sk.name.split("+") for sk in sks)


def test_random_contractions_every_factored_candidate_matches_einsum():
    rng = np.random.default_rng(7)
    factored = 0
    for _ in range(14):
        dag, spec = random_contraction(rng, n_red=(2, 3), n_in=(2, 4), extents=(2, 3, 5, 6))
        x = [rng.standard_normal(t.shape).astype("float32") for t in dag.inputs]
        sks = generate_sketches(SearchTask(dag, hardware=HW))
        if not any(sk.name.startswith("factor") for sk in sks):
            continue
        factored += 1
        expect = np.einsum(spec, *[a.astype(np.float64) for a in x])
        _every_candidate_correct(dag, expect, x, per_sketch=1)
    assert factored >= 4, factored


def test_gpu_sketches_factor_the_bilinear_form_and_emulate_correctly():
    case = bilinear_form(6, 20, 20)
    task = SearchTask(case.dag, target="cuda")
    sks = generate_sketches(task)
    assert sks and all(sk.name.startswith("factor") for sk in sks)
    x = case.make_inputs(np.random.default_rng(3))
    rng = np.random.default_rng(4)
    built = 0
    for n, sk in enumerate(sks):
        c = next((c for c in (materialize(task, n, sk, {}, rng) for _ in range(20)) if c), None)
        if c is None:
            continue
        k = tc.build(case.dag, target="cuda", schedule=Schedule(case.dag, c.steps), cache=False)
        _close(k.emulate(*x), case.reference(x)[0])
        built += 1
    assert built >= 1
