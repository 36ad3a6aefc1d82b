"""Stride-phase tiling of transposed convolutions (analysis.phase_axes, tiling.phase_split): the
local accumulator's output rows and columns are split by the stride with the phase outermost, so
every reduction tap that reads an inserted zero is cut, at any tiling, and the consumer's tiles
span every phase (FollowHole.scale)."""
import re

import numpy as np
import pytest

import tecomp as tc
from tecomp.ir.loop import verify
from tecomp.schedule.state import State
from tecomp.search import analysis as an
from tecomp.search.decisions import Decisions
from tecomp.search.sketch_rule import FollowHole, Sketch
from tecomp.search.target_search import materialize
from tecomp.testing.operator_suite import conv2d_transpose, conv_nd


def _conv_stage(case):
    st = State(case.dag)
    return st, len(st.stages) - 1


@pytest.mark.parametrize("cfg, expect", [
    ((1, 3, 4, 2, 4, 2, 1), [("y", 2), ("x", 2)]),   # 8x8 output: both phases split
    ((1, 2, 3, 2, 3, 3, 0), [("y", 3), ("x", 3)]),   # stride 3, 9x9 output
    ((1, 2, 5, 2, 3, 2, 1), []),                     # 9x9 output: 2 does not divide it
    ((1, 2, 5, 2, 3, 1, 1), []),                     # stride 1 inserts no zeros
])
def test_phase_axes(cfg, expect):
    st, sid = _conv_stage(conv2d_transpose(*cfg))
    assert an.phase_axes(st, sid) == expect


def test_a_plain_convolution_has_no_phase():
    st, sid = _conv_stage(conv_nd(1, 4, (8, 8), 4, (3, 3), stride=2, pad=1))
    assert an.phase_axes(st, sid) == []


def test_follow_hole_scale_widens_the_innermost_length():
    from tecomp.schedule.steps import SplitStep
    sk = Sketch("s", [SplitStep(0, 0, (1, 1, 1), True), SplitStep(1, 0, (1, 1), True)],
                {1: FollowHole(1, 0, ((0, 1), (1, 3)), 2)})
    steps = sk.with_lengths({0: (2, 3, 4)})
    assert steps[1].lengths == (2, 24)


def _phase_loops(func) -> set:
    return set(re.findall(r"for \((\S+)\.ph ", str(func)))


@pytest.mark.parametrize("cfg", [(1, 3, 4, 2, 4, 2, 1), (1, 2, 3, 3, 3, 3, 0),
                                 (1, 2, 6, 8, 4, 2, 1), (2, 3, 5, 4, 4, 2, 1)])
def test_phase_candidates_cut_every_zero_tap_and_match_numpy(cfg):
    """Every fused sketch splits the phases; each sampled candidate rewrites the reduction loops
    (never a spatial loop: the register tile holds one phase), and computes the reference
    natively and in the interpreter."""
    case = conv2d_transpose(*cfg)
    task, sketches, rng, x, ref = case.search_setup(sum(cfg), target="llvm")
    phased = [k for k, sk in enumerate(sketches) if "phase" in sk.name]
    assert phased and all("fuse" in sketches[k].name for k in phased)
    for i in range(4):
        k = phased[i % len(phased)]
        cand = materialize(task, k, sketches[k], Decisions(), rng)
        assert cand is not None
        func = tc.lower(cand.state)
        verify(func)
        loops = _phase_loops(func)
        assert loops and all(nm.startswith(("ry", "rx")) for nm in loops), loops
        kern = tc.build(case.dag, schedule=cand.state)
        np.testing.assert_allclose(kern(*x), ref, rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(kern.emulate(*x), ref, rtol=1e-4, atol=1e-4)
