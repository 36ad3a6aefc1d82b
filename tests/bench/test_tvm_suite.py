"""The TVM peer of the operator suite (benchmarks/tvm_suite.py): every operator's DAG translated to
TVM TE computes what the numpy reference does. Runs where TVM is installed (the benchmark venv:
benchmarks/run.sh -m pytest tests/bench); skipped elsewhere (TVM is never tecomp's dependency)."""
import os
import sys

import numpy as np
import pytest

from tecomp.testing.operator_suite import OPERATORS, operator_case

tvm = pytest.importorskip("tvm")
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks"))
from tvm_suite import dag_to_te  # noqa: E402


@pytest.mark.parametrize("name", list(OPERATORS))
def test_te_translation_matches_the_reference(name):
    from tvm import te
    c = operator_case(name, "small")
    x = c.make_inputs(np.random.default_rng(5))
    ref = c.reference(x)[0]
    f = te.create_prim_func(dag_to_te(c.dag))
    fn = tvm.compile(tvm.IRModule({"main": f}), target="llvm")["main"]
    out = tvm.runtime.tensor(np.empty(ref.shape, "float32"))
    fn(*[tvm.runtime.tensor(a) for a in x], out)
    np.testing.assert_allclose(out.numpy(), ref, rtol=1e-4, atol=1e-4 * float(np.abs(ref).max()))
