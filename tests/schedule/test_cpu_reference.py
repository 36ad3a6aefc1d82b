"""The CPU reference schedule (what tuning checks candidates against) computes every workload's
and suite operator's answer, with the reduction moved outside the inner row and the outer loops
parallel where that applies."""
import numpy as np
import pytest

import tecomp as tc
from tecomp.schedule.cpu_reference import reference_cpu_schedule
from tecomp.schedule.state import Annotation
from tecomp.testing import workloads as W
from tecomp.testing.operator_suite import OPERATORS, operator_case

WORKLOADS = [
    W.matmul(19, 37, 7), W.matmul(1, 97, 3), W.matmul(33, 1, 17),
    W.matmul(16, 24, 8, transpose_b=True),
    W.batch_matmul(2, 9, 17, 5),
    W.conv2d(1, 8, 11, 13, 16, 3, 3, 1, 1, 1, 1, "NCHW", "direct"),
    W.conv2d(2, 3, 9, 7, 5, 3, 3, 2, 0, 1, 1, "NHWC", "direct"),
    W.conv2d(1, 4, 7, 7, 6, 1, 1, 1, 0, 1, 1, "NHWC", "implicit_gemm"),
    W.conv2d(1, 8, 8, 8, 8, 3, 3, 1, 1, 1, 8, "NCHW", "direct"),
    W.conv2d(1, 4, 8, 8, 8, 3, 3, 1, 1, 1, 1, "NHWC", "winograd"),
    W.csr_spmm(33, 20, 17, density=0.2, empty_rows=3),
    W.bsr_spmm(5, 4, 9, 2, 3, density=0.3),
    W.sddmm(13, 11, 9, density=0.2),
    W.softmax(7, 33), W.matmul_bias_relu(9, 21, 13),
]


def _check(dag, x, expected):
    s = reference_cpu_schedule(dag)
    out = tc.build(dag, schedule=s)(*x)
    outs = out if isinstance(out, (list, tuple)) else [out]
    for o, e in zip(outs, expected):
        np.testing.assert_allclose(o, e, rtol=1e-4, atol=1e-4)
    return s


@pytest.mark.parametrize("wl", WORKLOADS, ids=repr)
def test_reference_schedule_workloads(wl):
    x = wl.make_inputs(np.random.default_rng(1))
    _check(wl.dag, x, wl.reference(x))


@pytest.mark.parametrize("name", sorted(OPERATORS))
def test_reference_schedule_suite(name):
    case = operator_case(name, "small")
    x = case.make_inputs(np.random.default_rng(2))
    _check(case.dag, x, case.reference(x))


def test_matmul_reference_loops():
    """i (parallel), k, j: the reduction outside the contiguous row, the rows on the pool."""
    wl = W.matmul(64, 48, 32)
    s = reference_cpu_schedule(wl.dag)
    out = s.state.stages[s[wl.dag.outputs[0]].index]
    kinds = [it.kind.value for it in out.iters]
    assert kinds == ["spatial", "reduce", "spatial"]
    assert out.iters[0].annotation is Annotation.PARALLEL
    assert [it.const_extent for it in out.iters] == [64, 32, 48]


def test_row_reduction_keeps_its_order():
    """A row reduction ``m[i] = max_j x[i, j]`` keeps ``j`` innermost (contiguous), only ``i``
    runs in parallel."""
    wl = W.softmax(16, 64)
    s = reference_cpu_schedule(wl.dag)
    rows = [st for st in s.state.stages
            if getattr(st.op, "reduce_axes", ()) and len(st.op.axes) == 1]
    assert rows
    for st in rows:
        assert [it.kind.value for it in st.iters] == ["spatial", "reduce"]
        assert st.iters[0].annotation is Annotation.PARALLEL
