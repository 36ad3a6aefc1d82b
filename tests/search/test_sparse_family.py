"""Sparse records that serve any nnz (tecomp.schedule.record_family): a CSR/BSR/SDDMM record tuned
for a few trials on one random matrix builds and runs correctly (against scipy, random nonzero
values) on matrices with other nnz, densities, empty rows and power-law row lengths; the exact
workload key still wins; a schedule that depends on nnz is refused; index validation still
rejects bad index data; logs without the family field still load."""
import json
import warnings

import numpy as np
import pytest

import tecomp as tc
from tecomp.schedule.log_schedule import select_from_log
from tecomp.schedule.record_family import family_key, nnz_dependence, nnz_dims
from tecomp.schedule.records import ErrorKind, MeasureResult, Record, append_records, load_records
from tecomp.testing import sparse_patterns as SP
from tecomp.testing import workloads as W

HOST = tc.Target.parse("llvm")
P = SP.RowLengths.POWER_LAW

#: (rows, cols of the pattern) and a builder of the workload over a pattern, per kind
KINDS = {
    "csr": ((64, 48), lambda i, p: SP.csr_spmm_on(i, p, 48, 40)),
    "bsr": ((16, 12), lambda i, p: SP.bsr_spmm_on(i, p, 12, 24, 4, 2)),
    "sddmm": ((48, 40), lambda i, p: SP.sddmm_on(i, p, 40, 24)),
}
TUNED_NNZ = {"csr": 300, "bsr": 40, "sddmm": 240}


def _other_matrices(kind, rng):
    """Patterns other than the tuned one: 0.5x and 2x nnz, another density with empty rows,
    power-law rows (skewed, a few rows full), and no nonzero at all."""
    (rows, cols), n = KINDS[kind][0], TUNED_NNZ[kind]
    return {
        "half_nnz": SP.pattern(rng, rows, cols, n // 2),
        "double_nnz": SP.pattern(rng, rows, cols, 2 * n),
        "dense_empty_rows": SP.pattern(rng, rows, cols, rows * cols // 3, empty_rows=rows // 4),
        "power_law": SP.pattern(rng, rows, cols, n + 7, P, alpha=1.5),
        "power_law_empty_rows": SP.pattern(rng, rows, cols, n // 3, P, alpha=2.0,
                                           empty_rows=rows // 3),
        "empty": SP.pattern(rng, rows, cols, 0),
    }


def _check(kernel, wl, ins):
    got = kernel(*ins)
    np.testing.assert_allclose(got, wl.reference(ins)[0], rtol=1e-4, atol=1e-4)


@pytest.fixture(scope="module", params=list(KINDS))
def tuned(request, tmp_path_factory):
    """``(kind, workload, log)``: a few trials of the default tuner on one random matrix."""
    kind = request.param
    (rows, cols), build = KINDS[kind]
    wl = build(*SP.pattern(np.random.default_rng(1), rows, cols, TUNED_NNZ[kind]))
    log = str(tmp_path_factory.mktemp(kind) / "log.jsonl")
    opt = tc.TuningOptions(population=16, generations=1, measures_per_round=4, repeat=1,
                           min_repeat_ms=1, verbose=False)
    res = tc.tune(tc.SearchTask(wl.dag, "llvm", inputs=wl.index_data), trials=4, log=log,
                  options=opt)
    assert res.best_schedule is not None
    return kind, wl, log


def test_patterns_have_the_asked_nnz_and_row_lengths():
    rng = np.random.default_rng(0)
    idx, ptr = SP.pattern(rng, 200, 50, 1500, P, alpha=1.5, empty_rows=20)
    lengths = np.diff(ptr)
    assert len(idx) == ptr[-1] == 1500 and (lengths == 0).sum() >= 20
    assert lengths.max() == 50 and np.median(lengths) < 5  # skewed: full rows, a long tail
    for r in range(200):
        row = idx[ptr[r]:ptr[r + 1]]
        assert np.all(np.diff(row) > 0) and (row.size == 0 or 0 <= row.min() <= row.max() < 50)
    idx, ptr = SP.pattern(rng, 30, 10, 300)  # full matrix
    assert np.array_equal(np.diff(ptr), np.full(30, 10))
    with pytest.raises(ValueError, match="does not fit"):
        SP.pattern(rng, 30, 10, 301)


def test_family_key_abstracts_nnz_only():
    a = W.csr_spmm(64, 48, 32, density=0.1, seed=1)
    b = W.csr_spmm(64, 48, 32, density=0.3, seed=2)
    assert a.dag.workload_key != b.dag.workload_key
    assert family_key(a.dag) == family_key(b.dag) != ""
    assert family_key(a.dag) not in (a.dag.workload_key, b.dag.workload_key)
    for other in (W.csr_spmm(64, 48, 16, density=0.1, seed=1),   # N
                  W.csr_spmm(65, 48, 32, density=0.1, seed=1),   # rows
                  W.csr_spmm(64, 47, 32, density=0.1, seed=1),   # cols
                  W.csr_spmm(64, 48, 32, density=0.1, seed=1, dtype="float64")):
        assert family_key(other.dag) != family_key(a.dag)
    b44 = W.bsr_spmm(8, 6, 32, 4, 4, density=0.3, seed=5)
    assert family_key(b44.dag) == family_key(W.bsr_spmm(8, 6, 32, 4, 4, density=0.7).dag)
    assert family_key(b44.dag) != family_key(W.bsr_spmm(16, 6, 32, 2, 4, density=0.3).dag)
    assert {t.name: d for t, d in nnz_dims(b44.dag).items()} == {"data": [0], "indices": [0]}
    sd = W.sddmm(31, 27, 20, density=0.2, seed=7)
    assert {t.name: d for t, d in nnz_dims(sd.dag).items()} == {"indices": [0], "sddmm": [0]}
    assert family_key(sd.dag) == family_key(W.sddmm(31, 27, 20, density=0.5, seed=1).dag)
    assert family_key(W.matmul(16, 16, 16).dag) == "" and not nnz_dims(W.matmul(8, 8, 8).dag)


def test_tuned_records_carry_the_family_and_serve_other_matrices(tuned):
    kind, wl, log = tuned
    recs = load_records(log)
    assert recs and {r.family for r in recs} == {family_key(wl.dag)}
    rng = np.random.default_rng(7)
    others = _other_matrices(kind, rng)
    for name, (idx, ptr) in others.items():
        w2 = KINDS[kind][1](idx, ptr)
        assert w2.dag.workload_key != wl.dag.workload_key or name == "power_law", name
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # a family match is silent
            sched, rec = select_from_log(w2.dag, log, HOST)
            kernel = tc.build(w2.dag, "llvm", log=log)
        assert rec.family == family_key(w2.dag) and sched.key == rec.key, name
        for seed in range(2):
            _check(kernel, w2, w2.make_inputs(np.random.default_rng(seed)))
        if len(idx):  # index validation still guards the new matrix
            ins = w2.make_inputs(rng)
            names = [t.name for t in w2.dag.inputs]
            bad = [x.copy() for x in ins]
            bad[names.index("indices")][-1] = 10_000
            with pytest.raises(ValueError, match="indices"):
                kernel(*bad)
            bad = [x.copy() for x in ins]
            bad[names.index("indptr")][-1] -= 1
            with pytest.raises(ValueError, match="indptr"):
                kernel(*bad)


def test_exact_key_wins_over_a_faster_family_record(tuned):
    kind, wl, log = tuned
    (rows, cols), build = KINDS[kind]
    w2 = build(*SP.pattern(np.random.default_rng(3), rows, cols, TUNED_NNZ[kind] + 5))
    best_family = select_from_log(w2.dag, log, HOST)[1]
    default = tc.Schedule(w2.dag).records()
    mine = Record(w2.dag.workload_key, str(HOST), default, {},
                  MeasureResult((best_family.cost * 100,)), family=family_key(w2.dag))
    local = log + f".{kind}.exact.jsonl"
    with open(log) as f, open(local, "w") as g:
        g.write(f.read())
    append_records(local, [mine])
    sched, rec = select_from_log(w2.dag, local, HOST)
    assert rec.workload_key == w2.dag.workload_key and sched.key == mine.key


def _sddmm_scaled(nnz_seed, nnz):
    """SDDMM followed by an elementwise stage over its nonzeros: a loop of constant extent nnz."""
    idx, ptr = SP.pattern(np.random.default_rng(nnz_seed), 12, 10, nnz)
    a, b = tc.placeholder((12, 8), name="a"), tc.placeholder((10, 8), name="b")
    i, p = tc.placeholder((nnz,), "int32", name="indices"), tc.placeholder((13,), "int32",
                                                                           name="indptr")
    s = tc.ops.sddmm(a, b, i, p)
    out = tc.compute((nnz,), lambda q: s[q] * 2.0, name="scaled")
    return tc.ComputeDAG([a, b, i, p, out]), idx, ptr


def test_a_schedule_that_splits_an_nnz_loop_is_refused(tmp_path):
    dag, _, _ = _sddmm_scaled(0, 50)
    assert {t.name: d for t, d in nnz_dims(dag).items()} == \
        {"indices": [0], "sddmm": [0], "scaled": [0]}
    split = tc.Schedule(dag)
    out = dag.outputs[0]
    split[out].split(split[out].axes[0], factor=8)
    plain = tc.Schedule(dag)
    plain[out].parallel(plain[out].axes[0])
    assert "a number of nonzeros" in nnz_dependence(dag, split.records())
    assert nnz_dependence(dag, plain.records()) is None
    log = str(tmp_path / "scaled.jsonl")
    fam = family_key(dag)
    append_records(log, [Record(dag.workload_key, str(HOST), split.records(), {},
                                MeasureResult((1e-6,)), family=fam)])
    other, idx, ptr = _sddmm_scaled(1, 61)
    assert family_key(other) == fam
    with pytest.raises(LookupError, match="family .* none usable here .* splits loop"):
        tc.build(other, "llvm", log=log)
    with pytest.warns(UserWarning, match="default schedule"):
        k = tc.build(other, "llvm", log=log, on_missing="default")
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((12, 8), np.float32), rng.standard_normal((10, 8), np.float32)
    rows = np.repeat(np.arange(12), np.diff(ptr))
    expect = 2 * np.einsum("ij,ij->i", a[rows], b[idx])
    np.testing.assert_allclose(k(a, b, idx, ptr), expect, rtol=1e-5, atol=1e-5)
    # a slower family record that does not split the nnz loop is taken instead, with a warning
    append_records(log, [Record(dag.workload_key, str(HOST), plain.records(), {},
                                MeasureResult((1e-3,)), family=fam)])
    with pytest.warns(UserWarning, match="cannot serve it"):
        sched, rec = select_from_log(other, log, HOST)
    assert sched.key == plain.key
    with pytest.warns(UserWarning, match="cannot serve it"):
        k = tc.build(other, "llvm", log=log)
    np.testing.assert_allclose(k(a, b, idx, ptr), expect, rtol=1e-5, atol=1e-5)


def test_family_field_round_trip_and_old_lines(tmp_path):
    r = Record("k" * 32, "llvm", [["AN", 2, 0, 3]], {}, MeasureResult((1e-3,)), family="f" * 32)
    line = r.to_json()
    assert line.endswith(f',"family":"{"f" * 32}"}}') and Record.from_json(line).family == "f" * 32
    old = json.loads(line)
    del old["family"]
    assert Record.from_json(json.dumps(old)).family == ""  # a v1 line without it still loads
    assert "family" not in Record("k", "llvm", [], {}, MeasureResult((1.0,))).to_json()
    bad = dict(old, family=3)
    with pytest.raises(ValueError, match="family"):
        Record.from_json(json.dumps(bad))
    assert Record.from_json(line).to_json() == line
    assert MeasureResult((1.0,)).error is ErrorKind.NONE


def test_export_uses_the_family_record(tuned, tmp_path):
    kind, wl, log = tuned
    if kind != "csr":
        pytest.skip("one kind is enough for the exporter")
    from tecomp.deploy import export
    (rows, cols), build = KINDS[kind]
    w2 = build(*SP.pattern(np.random.default_rng(5), rows, cols, 123, P))
    manifest = export(log, tmp_path / "out", [("csr", w2.dag)], assembly=False)
    (k,) = manifest["kernels"]
    best = select_from_log(w2.dag, log, HOST)[1]
    assert k["workload_key"] == w2.dag.workload_key and k["record"]["steps"] == best.steps
    assert k["record"]["cost"] == best.cost


def test_a_log_from_before_family_keys_serves_other_nnz_through_with_family(tuned, tmp_path):
    from tecomp.schedule.record_family import with_family
    kind, wl, log = tuned
    recs = load_records(log)
    for r in recs:
        r.family = ""
    old = str(tmp_path / f"{kind}_old.jsonl")
    append_records(old, recs)
    (rows, cols), build = KINDS[kind]
    w2 = build(*SP.pattern(np.random.default_rng(11), rows, cols, TUNED_NNZ[kind] * 2, P))
    with pytest.raises(LookupError, match="no usable record"):
        tc.build(w2.dag, "llvm", log=old)
    tagged = with_family(load_records(old), wl.dag)
    assert {r.family for r in tagged} == {family_key(wl.dag)}
    assert all(r.family == "" for r in load_records(old))  # copies: the records are unchanged
    new = str(tmp_path / f"{kind}_tagged.jsonl")
    append_records(new, tagged)
    _check(tc.build(w2.dag, "llvm", log=new), w2, w2.make_inputs(np.random.default_rng(0)))
    assert with_family(recs, W.matmul(4, 4, 4).dag) == recs  # another workload: unchanged


def test_the_family_member_nearest_in_size_serves_first(tmp_path):
    """Costs of matrices with other nnz do not compare: the record of the member whose FLOPs are
    nearest comes first, even when a member of much smaller nnz has a lower cost."""
    build = KINDS["csr"][1]
    small, near, new = (build(*SP.pattern(np.random.default_rng(s), 64, 48, n))
                        for s, n in ((0, 20), (1, 900), (2, 1000)))
    fam = family_key(new.dag)
    assert family_key(small.dag) == family_key(near.dag) == fam
    s_small, s_near = tc.Schedule(small.dag), tc.Schedule(near.dag)
    s_small[small.dag.outputs[0]].parallel(small.dag.outputs[0].op.axes[0])
    log = str(tmp_path / "members.jsonl")
    append_records(log, [
        Record(small.dag.workload_key, str(HOST), s_small.records(), {}, MeasureResult((1e-6,)),
               flop_count=small.dag.flop_count(), family=fam),
        Record(near.dag.workload_key, str(HOST), s_near.records(), {}, MeasureResult((1e-3,)),
               flop_count=near.dag.flop_count(), family=fam)])
    sched, rec = select_from_log(new.dag, log, HOST)
    assert rec.workload_key == near.dag.workload_key and sched.key == s_near.key
    _check(tc.build(new.dag, "llvm", log=log), new, new.make_inputs(np.random.default_rng(3)))


@pytest.mark.parametrize("kind", list(KINDS))
def test_every_sparse_sketch_serves_other_nnz(kind, tmp_path):
    """Every sketch of the sparse rules (SDDMM's rfactor one too), under random annotations, is a
    schedule that does not depend on nnz and runs right on matrices of other nnz."""
    from tecomp.search.target_search import generate_sketches, materialize
    (rows, cols), build = KINDS[kind]
    wl = build(*SP.pattern(np.random.default_rng(0), rows, cols, TUNED_NNZ[kind]))
    task = tc.SearchTask(wl.dag, "llvm", inputs=wl.index_data)
    others = [build(*SP.pattern(np.random.default_rng(1), rows, cols, TUNED_NNZ[kind] // 2 + 1)),
              build(*SP.pattern(np.random.default_rng(2), rows, cols, 2 * TUNED_NNZ[kind], P))]
    sketches = generate_sketches(task)
    assert sketches
    for sid, sk in enumerate(sketches):
        for seed in range(2):
            cand = materialize(task, sid, sk, {}, np.random.default_rng(seed))
            steps = cand.state.steps_records()
            log = str(tmp_path / f"{sk.name}_{seed}.jsonl")
            append_records(log, [Record(wl.dag.workload_key, str(HOST), steps, {},
                                        MeasureResult((1e-3,)), family=family_key(wl.dag))])
            for w2 in others:
                assert nnz_dependence(w2.dag, steps) is None, sk.name
                k = tc.build(w2.dag, "llvm", log=log, cache=False)
                _check(k, w2, w2.make_inputs(np.random.default_rng(seed)))
