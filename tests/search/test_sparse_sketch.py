"""Sparse sketch rules (tecomp.search.sparse_sketch): every sketch of CSR SpMM, BSR SpMM and SDDMM,
under random annotations, builds for "llvm" and matches scipy on the task's index data and on other
index data of the same shapes and nnz (empty rows, a dense row, random patterns); the balanced
parallel mode gives the static mode's results; a real tuning records the index data's hash."""
import numpy as np
import pytest

import tecomp as tc
from tecomp.codegen import parallel as P
from tecomp.schedule.records import load_records
from tecomp.search.cost_model import RandomModel
from tecomp.search.decisions import MutationKind
from tecomp.search.sketch import CPU_RULES
from tecomp.search.sparse_sketch import SparseRaggedRows, SparseRowTiling, row_block
from tecomp.search.target_search import generate_sketches, materialize
from tecomp.testing import workloads as W

SEEDS = range(4)

CASES = {
    "csr_random": lambda: W.csr_spmm(37, 29, 40, density=0.2, seed=1),
    "csr_empty_dense": lambda: W.csr_spmm(48, 33, 24, density=0.1, empty_rows=12, dense_row=True,
                                          seed=2),
    "bsr_1x1": lambda: W.bsr_spmm(12, 10, 20, 1, 1, density=0.3, empty_rows=2, seed=3),
    "bsr_2x3": lambda: W.bsr_spmm(9, 7, 19, 2, 3, density=0.3, dense_row=True, seed=4),
    "bsr_4x4": lambda: W.bsr_spmm(8, 6, 32, 4, 4, density=0.3, empty_rows=2, dense_row=True,
                                  seed=5),
    "bsr_16x16": lambda: W.bsr_spmm(3, 3, 16, 16, 16, density=0.5, dense_row=True, seed=6),
    "sddmm_random": lambda: W.sddmm(31, 27, 20, density=0.2, seed=7),
    "sddmm_empty_dense": lambda: W.sddmm(40, 22, 9, density=0.1, empty_rows=10, dense_row=True,
                                         seed=8),
}


def _task(wl):
    return tc.SearchTask(wl.dag, "llvm", inputs=wl.index_data)


def _other_inputs(wl, rng):
    """Fresh values on index data other than the task's: same shapes and nnz, a dense row."""
    ins = wl.make_inputs(rng)
    names = [t.name for t in wl.dag.inputs]
    indptr = ins[names.index("indptr")]
    if wl.name == "sddmm":
        ncols = wl.params["N"]
    elif wl.name == "bsr_spmm":
        ncols = wl.params["Kb"]
    else:
        ncols = wl.params["K"]
    old = (indptr, ins[names.index("indices")])
    for _ in range(20):  # small matrices can draw the same pattern again
        indices, new_ptr = W.random_pattern_like(rng, indptr, ncols, dense_row=True)
        if not (np.array_equal(new_ptr, old[0]) and np.array_equal(indices, old[1])):
            break
    else:
        raise AssertionError("no other index data drawn")
    assert len(indices) == len(old[1])
    ins[names.index("indices")], ins[names.index("indptr")] = indices, new_ptr
    return ins


def _check(kernel, wl, ins):
    got = kernel(*ins)
    np.testing.assert_allclose(got, wl.reference(ins)[0], rtol=1e-4, atol=1e-4)
    return got


def test_sparse_rules_are_registered_before_the_dense_rules():
    names = [r.name for r in CPU_RULES]
    assert names.index("sparse_rows") < names.index("tile") and "sparse_ragged" in names
    assert sum(isinstance(r, (SparseRowTiling, SparseRaggedRows)) for r in CPU_RULES) == 2


@pytest.mark.parametrize("case", CASES)
def test_every_sparse_sketch_matches_scipy_on_any_index_data(case):
    wl = CASES[case]()
    task = _task(wl)
    sketches = generate_sketches(task)
    expect = ("sparse_ragged",) if wl.name == "sddmm" else ("sparse_rows", "sparse_cols")
    assert sketches and all(sk.name.startswith(expect) for sk in sketches), \
        [sk.name for sk in sketches]
    rng = np.random.default_rng(0)
    built = 0
    for sid, sk in enumerate(sketches):
        for seed in SEEDS:
            cand = materialize(task, sid, sk, {}, np.random.default_rng(seed))
            assert cand is not None, f"{sk.name}: seed {seed} gave no legal schedule"
            k = tc.build(wl.dag, "llvm", schedule=cand.state, cache=False)
            _check(k, wl, wl.make_inputs(rng))       # the task's own index data
            _check(k, wl, _other_inputs(wl, rng))    # other data, same shapes and nnz
            built += 1
    assert built >= len(SEEDS)


def test_spmm_sketch_structure():
    """Rows outer, the output tile cached in registers at the column-tile loop, the dense dimension
    vectorized; BSR: block rows split off, block columns unrolled."""
    wl = W.bsr_spmm(8, 6, 64, 4, 2, density=0.3, seed=1)
    op = wl.dag.outputs[0].op
    assert row_block(op, op.axes[0]) == 4
    task = _task(wl)
    (sk,) = generate_sketches(task)
    cand = materialize(task, 0, sk, {"vec": {"bsr_spmm.local": 1}, "par": {"bsr_spmm": 1},
                                     "chunk": {"bsr_spmm": 4}, "tile": {"2": [2, 16]}},
                       np.random.default_rng(0))
    text = str(tc.lower(cand.state))
    assert "local float32 bsr_spmm.local[4][32]" in text
    assert "parallel for (i.0 = 0; i.0 < 8;" in text and "parallel_chunk=4" in text
    assert "unrolled for (c = 0; c < 2;" in text and "vectorized for" in text
    csr = W.csr_spmm(16, 16, 8, density=0.3)
    op = csr.dag.outputs[0].op
    assert row_block(op, op.axes[0]) == 1


def test_spmm_column_panels_sketch():
    """CSR SpMM's second sketch: column tiles outer and parallel, the dense operand copied one
    panel of the tile's columns at a time inside them (its panel, ``K x T``, contiguous), the
    output tile cached at the row loop; a BSR of blocks larger than 1 x 1 has no such sketch."""
    wl = W.csr_spmm(40, 50, 96, density=0.2, seed=3)
    task = _task(wl)
    names = [sk.name for sk in generate_sketches(task)]
    assert names == ["sparse_rows", "sparse_cols"]
    sk = generate_sketches(task)[1]
    cand = materialize(task, 1, sk, {"tile": {"2": [2, 8]}, "vec": {"csr_spmm.local": 1}},
                       np.random.default_rng(0))
    text = str(tc.lower(cand.state))
    assert text.index("parallel for (j.0 = 0; j.0 < 6;") < text.index(
        "global float32 dense.global[1][50][16]") < text.index("for (i = 0; i < 40;")
    assert "local float32 csr_spmm.local[1][16]" in text
    assert "dense.global[0, (int64)indices[" in text  # the panel read at the gathered row
    x = wl.make_inputs(np.random.default_rng(1))
    _check(tc.build(wl.dag, schedule=cand.state, cache=False), wl, x)
    bsr = W.bsr_spmm(8, 6, 64, 4, 2, density=0.3, seed=1)
    assert [sk.name for sk in generate_sketches(_task(bsr))] == ["sparse_rows_b4"]


@pytest.mark.parametrize("case", ["csr_empty_dense", "bsr_4x4", "sddmm_empty_dense"])
def test_balanced_mode_equals_static_mode(case):
    wl = CASES[case]()
    task = _task(wl)
    old = P.get_num_threads()
    try:
        P.set_num_threads(2)
        ins = _other_inputs(wl, np.random.default_rng(9))
        for sid, sk in enumerate(generate_sketches(task)):
            names = [st.name for st in materialize(task, sid, sk, {}, np.random.default_rng(0))
                     .state.stages if not st.is_placeholder]
            base = materialize(task, sid, sk, {"chunk": {n: 0 for n in names}},
                               np.random.default_rng(3))
            assert "parallel_schedule" not in str(tc.lower(base.state))
            ref = _check(tc.build(wl.dag, "llvm", schedule=base.state, cache=False), wl, ins)
            for chunk in (1, 4, 64):
                dec = base.decisions.with_table(MutationKind.CHUNK, {n: chunk for n in names})
                cand = materialize(task, sid, sk, dec, np.random.default_rng(3))
                assert f"parallel_chunk={chunk}" in str(tc.lower(cand.state))
                got = tc.build(wl.dag, "llvm", schedule=cand.state, cache=False)(*ins)
                np.testing.assert_array_equal(got, ref)
    finally:
        P.set_num_threads(old)


def test_data_hash_is_stable_and_names_the_index_data():
    wl = CASES["csr_empty_dense"]()
    h = _task(wl).data_hash
    assert len(h) == 16 and h == _task(CASES["csr_empty_dense"]()).data_hash
    swapped = {"indices": wl.index_data["indices"], "indptr": wl.index_data["indptr"]}
    assert tc.SearchTask(wl.dag, "llvm", inputs=swapped).data_hash == h  # order-independent
    indices, indptr = W.random_pattern_like(np.random.default_rng(0), wl.index_data["indptr"], 33)
    other = tc.SearchTask(wl.dag, "llvm", inputs={"indices": indices, "indptr": indptr})
    assert other.data_hash not in ("", h)
    assert tc.SearchTask(wl.dag, "llvm").data_hash == ""


def test_tuning_csr_spmm_records_the_data_hash(tmp_path, capsys):
    wl = W.csr_spmm(64, 48, 32, density=0.1, empty_rows=8, dense_row=True, seed=11)
    task = _task(wl)
    log = str(tmp_path / "csr.jsonl")
    opt = tc.TuningOptions(population=24, generations=1, measures_per_round=8, repeat=2,
                           min_repeat_ms=2, verbose=False)
    res = tc.tune(task, trials=16, log=log, options=opt, cost_model=RandomModel(0))
    assert res.trials == 16 and res.best_schedule is not None
    recs = load_records(log)
    assert len(recs) == 16 and {r.data_hash for r in recs} == {task.data_hash}
    assert sum(r.result.is_valid for r in recs) >= 8
    assert all(r.decisions.get("sketch") for r in recs)
    k = tc.build(wl.dag, "llvm", log=log)
    rng = np.random.default_rng(1)
    _check(k, wl, wl.make_inputs(rng))
    _check(k, wl, _other_inputs(wl, rng))  # the tuned kernel on data it was not tuned on
    from tecomp.cli import main
    assert main(["best", log]) == 0
    head, row = capsys.readouterr().out.splitlines()[:2]
    assert head.split()[-1] == "data" and row.split()[-1] == task.data_hash


def test_sddmm_dot_product_vectorized_through_ragged_rfactor():
    """The rfactor sketch of SDDMM: partials NAME.rf[nnz, V] with V vectorized lanes, then the sum
    of each nonzero's lanes; LLVM and the loop-IR interpreter agree with numpy."""
    wl = CASES["sddmm_empty_dense"]()
    task = _task(wl)
    sketches = generate_sketches(task)
    (sid,) = [n for n, sk in enumerate(sketches) if sk.name == "sparse_ragged_rf"]
    cand = materialize(task, sid, sketches[sid], {"tile": {"0": [3]}}, np.random.default_rng(0))
    text = str(tc.lower(cand.state))
    assert "global float32 sddmm.rf[79][3]" in text and "vectorized for (k.1.f" in text
    k = tc.build(wl.dag, "llvm", schedule=cand.state, cache=False)
    ins = _other_inputs(wl, np.random.default_rng(4))
    got = _check(k, wl, ins)
    np.testing.assert_allclose(k.emulate(*ins), got, rtol=1e-5, atol=1e-5)
    s = tc.Schedule(wl.dag)  # the factor axis of a ragged stage must come last
    out = wl.dag.outputs[0]
    ko, ki = s[out].split(s[out].reduce_axes[0], factor=3)
    with pytest.raises(tc.ScheduleError, match="must come last"):
        s.rfactor(out, ki, factor_axis=0)


def test_tuning_a_sparse_task_needs_valid_index_data(tmp_path):
    wl = W.csr_spmm(16, 12, 8, density=0.3, seed=3)
    no_data = tc.SearchTask(wl.dag, "llvm")  # sketches and features alone need none
    assert no_data.missing_index_data == ("indices", "indptr")
    with pytest.raises(ValueError, match="reads sparse index data from 'indices', 'indptr'"):
        tc.tune(no_data, trials=2, log=str(tmp_path / "x.jsonl"))
    assert not (tmp_path / "x.jsonl").exists() or not open(tmp_path / "x.jsonl").read()
    bad = dict(wl.index_data, indices=np.full_like(wl.index_data["indices"], 12))
    with pytest.raises(ValueError, match="index data in inputs= is invalid.*out of range"):
        tc.SearchTask(wl.dag, "llvm", inputs=bad)
    ptr = wl.index_data["indptr"].copy()
    ptr[0] = 1
    with pytest.raises(ValueError, match="index data in inputs= is invalid"):
        tc.SearchTask(wl.dag, "llvm", inputs=dict(wl.index_data, indptr=ptr))
