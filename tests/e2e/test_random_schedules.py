"""Property test: random legal step sequences on random DAGs (non-divisible splits, compute_at
chains, inlining, caching, annotations) give the interpreter's and the LLVM kernel's results equal
to a direct numpy evaluation of the DAG; every such schedule round-trips through its records."""
import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tecomp as tc
from tecomp.schedule import Schedule
from tecomp.testing.dag_eval import evaluate_dag
from tecomp.testing.random_dags import random_dags
from tecomp.testing.random_schedules import random_steps
from tecomp.testing.workloads import conv2d, matmul_bias_relu


def _close(a, b, t):
    tol = 2e-4 if t == np.float32 else 1e-9
    np.testing.assert_allclose(a, b, rtol=tol, atol=tol, equal_nan=True)


def _check(dag, inputs, s):
    ir_text = str(s.lower())
    assert str(Schedule.from_records(dag, s.records()).lower()) == ir_text
    kernel = tc.build(dag, schedule=s)
    got, emu = kernel(*inputs), kernel.emulate(*inputs)
    got = got if isinstance(got, tuple) else (got,)
    emu = emu if isinstance(emu, tuple) else (emu,)
    for g, e, r, t in zip(got, emu, evaluate_dag(dag, inputs), dag.outputs):
        _close(g, r, t.dtype.np)
        _close(e, r, t.dtype.np)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=random_dags(), data=st.data(), seed=st.integers(0, 2**31 - 1))
def test_random_schedule_on_random_dag(case, data, seed):
    dag, make_inputs = case
    s = random_steps(Schedule(dag), lambda n: data.draw(st.integers(0, n - 1)),
                     data.draw(st.integers(1, 10)))
    _check(dag, make_inputs(np.random.default_rng(seed)), s)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), which=st.sampled_from(["conv", "mm"]))
def test_random_schedule_on_standard_workloads(data, which):
    wl = (conv2d(1, 3, 7, 6, 4, 3, 3, 2, 1, 1, 1, "NHWC", "direct") if which == "conv"
          else matmul_bias_relu(9, 11, 5))
    s = random_steps(Schedule(wl.dag), lambda n: data.draw(st.integers(0, n - 1)),
                     data.draw(st.integers(1, 14)))
    inputs = wl.make_inputs(np.random.default_rng(0))
    _check(wl.dag, inputs, s)


def test_a_schedule_whose_optimized_module_does_not_verify_still_builds():
    """A random schedule (hypothesis seed 5) whose module LLVM's SLP vectorizer left with a
    shuffle that does not dominate its use: machine code generation aborted the process. The
    optimizer's output is verified and the module optimized again without SLP vectorization."""
    wl = matmul_bias_relu(9, 11, 5)
    s = Schedule.from_records(wl.dag, [["CHW", 4, "local"], ["CA", 5, 6, 0],
                                       ["SP", 5, 1, [1], False], ["SP", 5, 2, [2], False],
                                       ["FU", 6, [0, 1]], ["AN", 4, 0, 2]])
    _check(wl.dag, wl.make_inputs(np.random.default_rng(0)), s)
