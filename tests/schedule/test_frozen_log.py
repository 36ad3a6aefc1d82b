"""A log written by tecomp 0.1 (record format v1, checked in) keeps loading and building: the
record format is versioned and the workload key is structural, so upgrades must not orphan logs."""
import os

import numpy as np

import tecomp as tc
from tecomp.schedule.records import best_record, load_records
from tecomp.testing import workloads as W

LOG = os.path.join(os.path.dirname(__file__), "..", "data", "matmul1024_v1.jsonl")


def test_frozen_v1_log_loads_and_builds_the_same_workload_key():
    recs = load_records(LOG)
    assert len(recs) == 6 and all(r.version == 1 for r in recs)
    wl = W.matmul(1024, 1024, 1024)
    # the key is structural: if this changes, every shipped log is orphaned
    assert recs[0].workload_key == wl.dag.workload_key == "679be33c0b32" + recs[0].workload_key[12:]
    best = best_record(recs, wl.dag.workload_key, recs[0].target)
    assert best is not None and best.result.is_valid
    s = tc.Schedule.from_records(wl.dag, best.steps)
    assert len(s.steps) == len(best.steps)
    x = wl.make_inputs(np.random.default_rng(0))
    k = tc.build(wl.dag, log=LOG)
    ref = x[0][:64].astype(np.float64) @ x[1].astype(np.float64)
    np.testing.assert_allclose(k(*x)[:64], ref, rtol=1e-3, atol=1e-3)
