"""Every step kind: applies, round-trips record -> State -> identical loop IR, prints as Python that
rebuilds the same schedule, and computes the right answer; illegal steps raise clear errors."""
import json

import numpy as np
import pytest

import tecomp as tc
from tecomp.schedule import STEP_KINDS, Schedule, ScheduleError
from tecomp.testing import workloads as W
from tecomp.testing.step_schedules import conv_compute_locations, matmul_every_loop_step


def _check(s: Schedule, wl, emulate=True):
    dag = wl.dag
    ir_text = str(s.lower())
    # record -> State -> identical loop IR (through JSON, as a log would)
    recs = json.loads(json.dumps(s.records()))
    assert str(Schedule.from_records(dag, recs).lower()) == ir_text
    # printed Python rebuilds the same schedule
    ns = {"tc": tc, "dag": dag}
    exec(str(s), ns)
    assert str(ns["s"].lower()) == ir_text
    # and it computes the right answer
    inputs = wl.make_inputs(np.random.default_rng(0))
    ref = wl.reference(inputs)[0]
    k = tc.build(dag, schedule=s)
    tol = dict(rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(k(*inputs), ref, **tol)
    if emulate:
        np.testing.assert_allclose(k.emulate(*inputs), ref, **tol)
    return {type(st).__name__ for st in s.steps}


def test_matmul_every_loop_step():
    wl, s = matmul_every_loop_step()
    kinds = _check(s, wl)
    assert kinds == {"CacheWriteStep", "SplitStep", "ReorderStep", "FuseStep", "AnnotationStep",
                     "ComputeAtStep", "PragmaStep"}


def test_conv_inline_root_and_cache_read():
    wl, s = conv_compute_locations()
    kinds = _check(s, wl)
    assert {"ComputeInlineStep", "ComputeRootStep", "ComputeAtStep", "CacheReadStep"} <= kinds


def test_compute_at_chain_with_nondivisible_splits():
    wl = W.matmul_bias_relu(19, 23, 7)
    dag = wl.dag
    s = Schedule(dag)
    names = [st.name for st in s.state.stages]
    out = dag.outputs[0]
    mm = next(st.tensor for st in dag.stages if st.is_reduce)
    mid = [st.tensor for st in dag.compute_stages if st.tensor is not mm and st.tensor is not out]
    i, j = s[out].axes
    io, ii = s[out].split(i, factor=5)
    jo, ji = s[out].split(j, factor=6)
    s[out].reorder(io, jo, ii, ji)
    for t in mid:  # the bias stage(s): computed at the output's tile
        s[t].compute_at(s[out], jo)
    s[mm].compute_at(s[mid[-1]] if mid else s[out], (s[mid[-1]] if mid else s[out]).axes[0])
    assert len(names) == len(s.state.stages)
    _check(s, wl)


def test_sparse_schedule_with_data_dependent_loop():
    wl = W.csr_spmm(23, 17, 19, 0.2, empty_rows=True, dense_row=True)
    s = Schedule(wl.dag)
    out = wl.dag.outputs[0]
    i, j = s[out].axes
    (r,) = s[out].reduce_axes
    jo, ji = s[out].split(j, factor=8)
    s[out].reorder(i, jo, r, ji)
    s[out].vectorize(ji)
    s[out].parallel(i)
    _check(s, wl)


def test_a_copy_read_at_data_dependent_places_covers_its_whole_axis():
    """The dense operand of an SpMM packed one column panel at a time, computed at the panel loop
    outside the rows: its reads at ``indices[...]`` inside the register cache's nonzero loop bound
    the copy to the whole K axis, and the result is right on index data with empty rows and a
    full row. Without the cache, the panel loop would enclose the output's own nonzero loop:
    refused, as before."""
    wl = W.csr_spmm(23, 17, 20, 0.2, empty_rows=True, dense_row=True)
    s = Schedule(wl.dag)
    out, dense = wl.dag.outputs[0], wl.dag.inputs[3]
    panel = s.cache_read(dense, "global", [s[out]], pack=(1, 8))
    cache = s.cache_write(out, "local")
    i, j = s[out].axes
    jo, ji = s[out].split(j, factor=8)
    s[out].reorder(jo, i, ji)
    s[out].parallel(jo)
    s[cache].compute_at(s[out], i)
    s[panel].compute_at(s[out], jo)
    assert "dense.global[1][17][8]" in str(s.lower())
    _check(s, wl)
    s = Schedule(wl.dag)
    panel = s.cache_read(dense, "global", [s[out]], pack=(1, 8))
    jo, ji = s[out].split(s[out].axes[1], factor=8)
    s[out].reorder(jo, s[out].axes[0], s[out].reduce_axes[0], ji)
    with pytest.raises(ScheduleError, match="encloses the data-dependent loop"):
        s[panel].compute_at(s[out], jo)


def test_all_step_kinds_are_exercised_and_registered():
    assert {"SP", "FU", "RE", "AN", "PR", "CA", "CI", "CR", "CHR", "CHW", "RF", "SA"} <= set(STEP_KINDS)


# ----------------------------------------------------------------------------- illegal steps

@pytest.fixture
def mm():
    wl = W.matmul(16, 16, 16)
    return wl, Schedule(wl.dag), wl.dag.outputs[0]


def test_vectorizing_a_reduction_loop_is_an_error(mm):
    _, s, C = mm
    (k,) = s[C].reduce_axes
    with pytest.raises(ScheduleError, match="cannot vectorize reduction loop 'k'"):
        s[C].vectorize(k)
    with pytest.raises(ScheduleError, match="cannot parallel reduction loop 'k'"):
        s[C].parallel(k)


def test_fusing_non_adjacent_loops_is_an_error(mm):
    _, s, C = mm
    i, j = s[C].axes
    (k,) = s[C].reduce_axes
    with pytest.raises(ScheduleError, match="not adjacent"):
        s[C].fuse(i, k)
    with pytest.raises(ScheduleError, match="spatial and reduction"):
        s[C].fuse(j, k)


def test_inlining_a_reduction_is_an_error():
    wl = W.matmul_bias_relu(8, 8, 8)
    s = Schedule(wl.dag)
    mm = next(st.tensor for st in wl.dag.stages if st.is_reduce)
    with pytest.raises(ScheduleError, match="is a reduction"):
        s[mm].compute_inline()
    with pytest.raises(ScheduleError, match="output of the kernel"):
        s[wl.dag.outputs[0]].compute_inline()


def test_compute_at_a_stage_that_does_not_read_it_is_an_error():
    wl = W.softmax(8, 9)
    dag = wl.dag
    s = Schedule(dag)
    first, last = dag.compute_stages[0].tensor, dag.outputs[0]
    with pytest.raises(ScheduleError, match="is read by"):
        s[first].compute_at(s[last], s[last].axes[0])


def test_failed_step_leaves_schedule_unchanged(mm):
    _, s, C = mm
    before = str(s.lower())
    with pytest.raises(ScheduleError):
        s[C].split(s[C].axes[0], factor=0)
    assert str(s.lower()) == before and s.steps == []


def test_unknown_names_are_clear(mm):
    _, s, C = mm
    with pytest.raises(ScheduleError, match="no loop 'zz'.*loops: i, j, k"):
        s[C].split("zz", factor=2)
    with pytest.raises(ScheduleError, match="no stage 'nope'"):
        s["nope"]


def test_rfactor_of_a_split_reduction():
    wl = W.matmul(5, 7, 37)
    s = Schedule(wl.dag)
    C = wl.dag.outputs[0]
    (k,) = s[C].reduce_axes
    ko, ki = s[C].split(k, factor=8)
    rf = s.rfactor(C, ki)
    assert rf.name == "matmul.rf" and rf.shape == (5, 7, 8)
    i, j, kf = s[rf].axes
    s[rf].vectorize(kf)
    s[C].parallel(s[C].axes[0])
    assert "RfactorStep" in _check(s, wl)


def test_rfactor_factor_axis_position_and_whole_axis():
    wl = W.softmax(6, 29)
    dag = wl.dag
    s = Schedule(dag)
    red = [st.tensor for st in dag.compute_stages if st.is_reduce]
    for t in red:
        (r,) = s[t].reduce_axes
        s.rfactor(t, r, factor_axis=0)
    _check(s, wl)


def test_packed_cache_read():
    wl = W.matmul(5, 37, 9)
    s = Schedule(wl.dag)
    C = wl.dag.outputs[0]
    Bp = s.cache_read(wl.dag.inputs[1], "global", [s[C]], pack=(1, 16))
    assert Bp.shape == (3, 9, 16)
    i, j = s[C].axes
    jo, ji = s[C].split(j, factor=16)
    s[C].reorder(jo, i, s[C].reduce_axes[0], ji)
    s[C].vectorize(ji)
    _check(s, wl)
    # indices into the packed buffer simplify to the loop variables
    assert "B.global[j.0, k, j.1" in str(s.lower())


def test_storage_align_pads_the_buffer_stride():
    wl = W.matmul(9, 30, 5)
    s = Schedule(wl.dag)
    C = wl.dag.outputs[0]
    CC = s.cache_write(C, "global")
    s[CC].storage_align(0, 32, 1)
    bufs = {b.name: b for b in _allocated(s.lower())}
    assert bufs["matmul.global"].strides == (33, 1)
    assert "StorageAlignStep" in _check(s, wl)
    with pytest.raises(ScheduleError, match="kernel argument"):
        s[C].storage_align(0, 32, 1)


def _allocated(func):
    from tecomp.ir.loop import Allocate, stmts
    return [st.buffer for st in stmts(func.body) if isinstance(st, Allocate)]


def test_a_schedule_builds_an_equal_dag_built_again_and_refuses_another():
    """``tc.build(dag2, schedule=s)`` with ``s`` made for an equal DAG (the same workload key,
    built again) replays its steps on ``dag2``; a schedule of another workload is refused."""
    def dag_of(n):
        A = tc.placeholder((n, 24), name="A")
        B = tc.placeholder((24, 16), name="B")
        k = tc.reduce_axis(24, name="k")
        C = tc.compute((n, 16), lambda i, j: tc.sum(A[i, k] * B[k, j], axis=k), name="C")
        return tc.ComputeDAG([A, B, C])
    first, again, other = dag_of(32), dag_of(32), dag_of(40)
    assert first is not again and first.workload_key == again.workload_key
    s = Schedule(first)
    C = first.outputs[0]
    io, ii = s[C].split(s[C].axes[0], factor=8)
    s[C].parallel(io)
    s[C].vectorize(s[C].axes[-1])
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((32, 24), np.float32), rng.standard_normal((24, 16), np.float32)
    k = tc.build(again, schedule=s)
    np.testing.assert_allclose(k(a, b), a @ b, rtol=1e-4, atol=1e-4)
    assert str(k.func) == str(s.lower())
    with pytest.raises(ValueError, match="another workload"):
        tc.build(other, schedule=s)
    with pytest.raises(ValueError, match="another workload"):
        tc.build(other, schedule=s.state)
