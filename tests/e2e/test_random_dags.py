"""Property test: random DAGs give equal results through the interpreter, the LLVM kernel and a
direct numpy evaluation of the DAG."""
import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tecomp as tc
from tecomp.testing.dag_eval import evaluate_dag
from tecomp.testing.random_dags import random_dags


def _close(a, b, t):
    tol = 2e-4 if t == np.float32 else 1e-9
    np.testing.assert_allclose(a, b, rtol=tol, atol=tol, equal_nan=True)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=random_dags(), seed=st.integers(0, 2**31 - 1))
def test_random_dag_interpreter_llvm_numpy_agree(case, seed):
    dag, make_inputs = case
    inputs = make_inputs(np.random.default_rng(seed))
    kernel = tc.build(dag, target="llvm")
    got = kernel(*inputs)
    emu = kernel.emulate(*inputs)
    ref = evaluate_dag(dag, inputs)
    got = got if isinstance(got, tuple) else (got,)
    emu = emu if isinstance(emu, tuple) else (emu,)
    assert len(got) == len(ref) == len(dag.outputs)
    for g, e, r, t in zip(got, emu, ref, dag.outputs):
        assert g.shape == r.shape and g.dtype == t.dtype.np
        _close(g, r, t.dtype.np)
        _close(e, r, t.dtype.np)
