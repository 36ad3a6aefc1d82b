"""The DSL operator suite (operators no ``tc.ops`` rule knows): every one builds with the default
schedule and agrees with its numpy reference natively and in the loop-IR interpreter; tuned for a
few trials (slow), its best program is correct too."""
import numpy as np
import pytest

import tecomp as tc
from tecomp.testing.operator_suite import OPERATORS, operator_case


def _close(out, ref, tol=1e-4):
    ref = np.asarray(ref)
    scale = max(float(np.max(np.abs(ref))), 1e-6)
    assert out.shape == ref.shape
    assert float(np.max(np.abs(out - ref))) <= tol * scale


@pytest.mark.parametrize("name", list(OPERATORS))
def test_default_schedule_matches_the_reference(name):
    c = operator_case(name, "small")
    x = c.make_inputs(np.random.default_rng(1))
    k = tc.build(c.dag)
    ref = c.reference(x)[0]
    _close(k(*x), ref)
    _close(k.emulate(*x), ref)


def test_unknown_operator_is_a_clear_error():
    with pytest.raises(ValueError, match="unknown operator 'nope'"):
        operator_case("nope")


@pytest.mark.slow
@pytest.mark.parametrize("name", list(OPERATORS))
def test_tuned_best_program_is_correct(name, tmp_path):
    c = operator_case(name, "small")
    log = str(tmp_path / "log.jsonl")
    res = tc.tune(tc.SearchTask(c.dag, "llvm"), trials=16, log=log,
                  options=tc.TuningOptions(verbose=False))
    assert res.trials >= 1 and res.best_steps is not None
    x = c.make_inputs(np.random.default_rng(2))
    _close(tc.build(c.dag, log=log)(*x), c.reference(x)[0])
