"""Program features: fixed length, finite, sensitive to the schedule, aware of sparse row lengths."""

import numpy as np
import pytest

from tecomp.search import features as F
from tecomp.search.target_search import generate_sketches, materialize
from tecomp.search.task import SearchTask
from tecomp.testing import workloads as W

WORKLOADS = {
    "matmul": lambda: W.matmul(64, 48, 40),
    "conv_nchw": lambda: W.conv2d(1, 8, 10, 10, 8, 3, 3, 1, 1, layout="NCHW", method="direct"),
    "conv_nhwc": lambda: W.conv2d(1, 8, 10, 10, 8, 3, 3, 1, 1, layout="NHWC", method="direct"),
    "conv_nchw_gemm": lambda: W.conv2d(1, 8, 10, 10, 8, 3, 3, 1, 1, layout="NCHW",
                                       method="implicit_gemm"),
    "conv_nhwc_gemm": lambda: W.conv2d(1, 8, 10, 10, 8, 3, 3, 1, 1, layout="NHWC",
                                       method="implicit_gemm"),
    "softmax": lambda: W.softmax(16, 37),
    "csr_spmm": lambda: W.csr_spmm(32, 64, 16, density=0.1, empty_rows=3),
    "sddmm": lambda: W.sddmm(32, 24, 16, density=0.2),
}


def _task(wl):
    return SearchTask(wl.dag, inputs=wl.index_data or None)


def _candidates(task, per_sketch=3, seed=0):
    sks = generate_sketches(task)
    rng = np.random.default_rng(seed)
    out = []
    for i, sk in enumerate(sks):
        for _ in range(per_sketch):
            c = materialize(task, i, sk, {}, rng)
            if c is not None:
                out.append(c)
    return out


def test_layout_is_documented():
    assert F.FEATURE_LEN == len(F.FEATURE_NAMES) == 194
    assert len(set(F.FEATURE_NAMES)) == F.FEATURE_LEN


@pytest.mark.parametrize("name", sorted(WORKLOADS))
def test_every_sketch_gives_fixed_length_finite_features(name):
    wl = WORKLOADS[name]()
    task = _task(wl)
    cands = _candidates(task)
    assert cands
    sketches = {c.sketch for c in cands}
    assert sketches == set(range(len(generate_sketches(task))))
    feats = F.FeatureExtractor(task).extract(cands)
    assert len(feats) == len(cands)
    for f in feats:
        assert f.dtype == np.float32 and f.ndim == 2 and f.shape[1] == F.FEATURE_LEN
        assert f.shape[0] >= 1 and np.isfinite(f).all() and (f >= 0).all()
        assert f.any(), "a lowered program must have non-zero features"


def _with(cand, task, **changes):
    sk = generate_sketches(task)[cand.sketch]
    dec = cand.decisions.to_json()  # fresh tables to edit, as a record stores them
    for kind, table in changes.items():
        dec[kind].update(table)
    c = materialize(task, cand.sketch, sk, dec, np.random.default_rng(0))
    assert c is not None
    return c


def test_features_differ_between_tile_sizes_and_vectorization():
    wl = W.matmul(64, 64, 64)
    task = SearchTask(wl.dag)
    sk = generate_sketches(task)
    base = materialize(task, 0, sk[0], {"tile": {"0": [2, 4, 8], "1": [2, 4, 8], "2": [8]},
                                        "vec": {"matmul": 1}, "par": {"matmul": 1},
                                        "unroll": {"matmul": 0}, "pack": {"A": 0, "B": 0}},
                       np.random.default_rng(0))
    fx = F.FeatureExtractor(task)
    f0 = fx.extract_one(base)
    other_tile = _with(base, task, tile={"0": [4, 2, 8]})
    no_vec = _with(base, task, vec={"matmul": 0})
    assert other_tile.key != base.key and no_vec.key != base.key
    f1, f2 = fx.extract_one(other_tile), fx.extract_one(no_vec)
    assert f0.shape == f1.shape and not np.array_equal(f0, f1)
    assert not np.array_equal(f0, f2)
    vec_num = F.FEATURE_NAMES.index("vec_num")
    assert f0[:, vec_num].max() > 0 and f2[:, vec_num].max() == 0


def test_slp_width_sees_a_contiguous_straight_line_body():
    # no vectorize annotation: LLVM's SLP vectorizer packs the unrolled innermost j tile (C and B
    # contiguous along j), but not an unrolled i tile (C has stride N along i)
    task = SearchTask(W.matmul(64, 64, 64).dag)
    sk = generate_sketches(task)
    dec = {"tile": {"0": [2, 4, 2], "1": [2, 4, 8], "2": [8]}, "vec": {"matmul": 0},
           "par": {"matmul": 1}, "unroll": {"matmul": 0}, "pack": {"A": 0, "B": 0}}
    wide = materialize(task, 0, sk[0], dec, np.random.default_rng(0))
    narrow = _with(wide, task, tile={"1": [64, 1, 1]})  # no j inside the k loop
    fx = F.FeatureExtractor(task)
    slp = F.FEATURE_NAMES.index("eff_slp_width")
    assert fx.extract_one(wide)[:, slp].max() == pytest.approx(np.log2(1 + 8))
    assert fx.extract_one(narrow)[:, slp].max() == pytest.approx(1.0)  # log2(1 + 1)


def test_cache_returns_the_same_array_and_extract_matches():
    wl = WORKLOADS["matmul"]()
    task = _task(wl)
    cands = _candidates(task, per_sketch=2)
    a = F.extract(task, cands)
    b = F.extract(task, cands)
    assert all(x is y for x, y in zip(a, b))
    fresh = F.FeatureExtractor(task).extract(cands)
    assert all(np.array_equal(x, y) for x, y in zip(a, fresh))


def test_sparse_trip_counts_follow_the_real_index_data():
    """The same schedule on denser real rows gets a larger trip count (outer_prod) than the
    uniform assumption of a sparser pattern, and the real data is used when the task has it."""
    wl = W.csr_spmm(32, 64, 16, density=0.1)
    # the same nnz, all in the first rows: row lengths differ, the mean does not
    nnz = wl.dag.inputs[1].shape[0]
    skewed = np.zeros(33, dtype=np.int32)
    skewed[1:] = np.minimum(np.arange(1, 33) * 64, nnz)
    skew_idx = np.tile(np.arange(64, dtype=np.int32), nnz // 64 + 1)[:nnz]
    t_real = SearchTask(wl.dag, inputs=wl.index_data)
    t_skew = SearchTask(wl.dag, inputs={"indptr": skewed, "indices": skew_idx})
    t_none = SearchTask(wl.dag)
    cand = _candidates(t_real, per_sketch=1)[0]
    out = F.FEATURE_NAMES.index("outer_prod")
    dl = F.FEATURE_NAMES.index("num_data_loops")
    f_real = F.FeatureExtractor(t_real).extract_one(cand)
    f_none = F.FeatureExtractor(t_none).extract_one(cand)
    f_skew = F.FeatureExtractor(t_skew).extract_one(cand)
    assert f_real[:, dl].max() > 0
    # the reduction store runs about nnz * N times whatever the pattern
    expect = np.log2(1 + nnz * 16)
    for f in (f_real, f_none, f_skew):
        assert abs(f[:, out].max() - expect) < 0.6
    assert not np.array_equal(f_real, f_skew)


def test_unlowerable_candidate_gets_a_zero_row():
    class Bad:
        key = "bad"
        state = None
    f = F.FeatureExtractor(None).extract_one(Bad())
    assert f.shape == (1, F.FEATURE_LEN) and not f.any()
