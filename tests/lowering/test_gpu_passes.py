"""GPU passes: launches, nested thread bindings, shared-memory barriers, and the validity check."""
import numpy as np
import pytest

import tecomp as tc
from tecomp.codegen import interp
from tecomp.codegen.interp import InterpError
from tecomp.ir.loop import Barrier, For, Seq, ThreadAxis, stmts, verify
from tecomp.lowering.gpu_passes import GPUScheduleError, check_gpu_program, prepare_gpu_program
from tecomp.schedule.gpu_default import default_gpu_schedule
from tecomp.testing import hand_schedules as H
from tecomp.testing import workloads as W

pytestmark = pytest.mark.nodevice  # no compiled code: the fast tier


def _run(func, wl, seed=0):
    rng = np.random.default_rng(seed)
    ins = wl.make_inputs(rng)
    outs = [np.full(t.shape, np.nan, t.dtype.np) for t in wl.dag.outputs]
    interp.run(func, ins + outs)
    return outs, wl.reference(ins)


@pytest.mark.parametrize("shape", [(64, 64, 32), (40, 36, 20)])
def test_hand_gpu_matmul_barriers_and_emulation(shape):
    wl = W.matmul(*shape)
    func, info = prepare_gpu_program(tc.lower(H.gpu_matmul_schedule(wl.dag)))
    verify(func)
    assert sum(isinstance(s, Barrier) for s in stmts(func.body)) == 2
    (launch,) = info.launches
    assert launch.block == (64, 1, 1) and launch.shared_bytes > 0 and launch.local_words > 0
    # one threadIdx.x binding on every path: the cooperative fetch uses the outer thread index
    assert sum(isinstance(s, For) and s.thread is ThreadAxis.THREAD_X for s in stmts(func.body)) == 1
    (out,), (ref,) = _run(func, wl)
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)
    again, _ = prepare_gpu_program(func)  # idempotent: no second set of barriers
    assert sum(isinstance(s, Barrier) for s in stmts(again.body)) == 2


def _drop_barrier(s, which):
    """``s`` without its ``which``-th barrier (pre-order)."""
    count = [0]

    def go(x):
        if isinstance(x, Seq):
            kept = []
            for c in x.stmts:
                if isinstance(c, Barrier):
                    count[0] += 1
                    if count[0] - 1 == which:
                        continue
                kept.append(go(c))
            return Seq(kept)
        if isinstance(x, For):
            return For(x.var, x.begin, x.extent, x.kind, go(x.body), x.thread, x.pragmas)
        if hasattr(x, "body") and hasattr(x, "buffer"):
            return type(x)(x.buffer, go(x.body))
        if hasattr(x, "then"):
            return type(x)(x.cond, go(x.then), None if x.else_ is None else go(x.else_))
        return x
    return go(s)


@pytest.mark.parametrize("which,hazard", [(0, "writes an element"), (1, "reads an element")])
def test_race_checker_flags_a_removed_barrier(which, hazard):
    wl = W.matmul(32, 32, 24)
    func, _ = prepare_gpu_program(tc.lower(H.gpu_matmul_schedule(wl.dag, threads=(4, 4),
                                                                  vthreads=(1, 1))))
    broken = tc.ir.loop.PrimFunc(func.name, func.params, _drop_barrier(func.body, which),
                                 func.n_outputs)
    with pytest.raises(InterpError, match=f"shared memory race.*{hazard}"):
        _run(broken, wl)


def test_too_many_threads():
    wl = W.matmul(64, 64, 8)
    s = tc.Schedule(wl.dag)
    C = wl.dag.outputs[0]
    f = s[C].fuse(*s[C].axes)
    o, i = s[C].split(f, factor=2048)
    s[C].bind(o, "blockIdx.x")
    s[C].bind(i, "threadIdx.x")
    with pytest.raises(GPUScheduleError, match="2048 threads per block.*limit of 1024"):
        check_gpu_program(tc.lower(s))


def test_too_much_shared_memory():
    wl = W.matmul(256, 256, 128)
    s = H.gpu_matmul_schedule(wl.dag, tile=(16, 16), vthreads=(1, 1), k_tile=64)
    with pytest.raises(GPUScheduleError, match="bytes of shared memory per block exceed"):
        check_gpu_program(tc.lower(s))


def test_unbound_root_stage_is_named():
    wl = W.softmax(4, 8)
    s = default_gpu_schedule(wl.dag)
    s2 = tc.Schedule(wl.dag, s.steps[:-3])  # the last stage left unbound
    with pytest.raises(GPUScheduleError, match="stage 'softmax'.*bind its outer loops"):
        check_gpu_program(tc.lower(s2))


def test_inner_binding_larger_than_outer_is_an_error():
    """A cooperative fetch bound to 8 threads inside a 4-thread loop cannot share its threads."""
    wl = W.matmul(16, 16, 16)
    s = tc.Schedule(wl.dag)
    C = wl.dag.outputs[0]
    AA = s.cache_read(wl.dag.inputs[0], "shared", [s[C]])
    o, t = s[C].split(s[C].fuse(*s[C].axes), factor=4)
    s[C].bind(o, "blockIdx.x")
    s[C].bind(t, "threadIdx.x")
    s[AA].compute_at(s[C], t)  # the block's row of A: 16 elements
    _, ft = s[AA].split(s[AA].fuse(*s[AA].axes), factor=8)
    s[AA].bind(ft, "threadIdx.x")
    with pytest.raises(GPUScheduleError, match="extent 8 inside a loop binding it with extent 4"):
        check_gpu_program(tc.lower(s))


def test_program_info_of_default_schedule():
    wl = W.softmax(5, 300)
    info = check_gpu_program(tc.lower(default_gpu_schedule(wl.dag)))
    assert [x.grid for x in info.launches] == [(1, 1, 1), (6, 1, 1), (1, 1, 1), (6, 1, 1)]
    assert info.max_threads == 256 and info.max_shared_bytes == 0
    assert [b.name for b in info.launches[0].params] == ["x", "softmax_max"]


def test_scalar_stage_runs_as_one_thread():
    x = tc.placeholder((37,), "float32", name="x")
    k = tc.reduce_axis(37, name="k")
    total = tc.compute((1,), lambda i: tc.sum(x[k] * x[k], axis=k), name="total")
    dag = tc.ComputeDAG([x, total])
    s = tc.Schedule(dag)
    func, info = prepare_gpu_program(tc.lower(s))
    assert info.launches[0].grid == (1, 1, 1) and info.launches[0].block == (1, 1, 1)
    a = np.random.default_rng(1).standard_normal(37).astype(np.float32)
    out = np.zeros(1, np.float32)
    interp.run(func, [a, out])
    np.testing.assert_allclose(out[0], np.sum(a * a), rtol=1e-5)


def test_block_level_store_runs_on_thread_zero():
    """A shared stage computed at the block loop beside a thread-bound stage: written by thread 0
    only, with a barrier before its readers, so that the race checker and the result agree."""
    x = tc.placeholder((8, 32), "float32", name="x")
    k = tc.reduce_axis(32, name="k")
    rs = tc.compute((8,), lambda i: tc.sum(x[i, k], axis=k), name="rs")
    y = tc.compute((8, 32), lambda i, j: x[i, j] - rs[i], name="y")
    dag = tc.ComputeDAG([x, y])
    s = tc.Schedule(dag)
    RS = s.cache_read(rs, "shared", [s[y]])
    i, j = s[y].axes
    s[y].bind(i, "blockIdx.x")
    s[y].bind(j, "threadIdx.x")
    s[RS].compute_at(s[y], i)  # at block level, beside the threadIdx loop that reads it
    s[rs].bind(s[rs].axes[0], "blockIdx.x")  # a kernel of one thread per block
    func, info = prepare_gpu_program(tc.lower(s))
    assert [x.block for x in info.launches] == [(1, 1, 1), (32, 1, 1)]
    assert any(isinstance(st, Barrier) for st in stmts(func.body))
    guard = [st for st in stmts(func.body) if isinstance(st, For) and st.thread is ThreadAxis.THREAD_X
             and st.extent.value == 1]
    assert len(guard) == 1
    a = np.random.default_rng(2).standard_normal((8, 32)).astype(np.float32)
    out = np.zeros((8, 32), np.float32)
    interp.run(func, [a, out])
    np.testing.assert_allclose(out, a - a.sum(1, keepdims=True), rtol=1e-5, atol=1e-5)
