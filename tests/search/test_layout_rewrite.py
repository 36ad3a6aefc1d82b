"""The ``pack`` decision's candidates (search.layout_rewrite): an input is packable along the one
dimension indexed by a spatial axis that no other operand reads, so a batched matmul over
permuted operands (Q.K^T per head: ``K[b, j, h, d]``) packs ``j`` and keeps its batch axes."""
import numpy as np

import tecomp as tc
from tecomp.schedule.compute_steps import CacheReadStep
from tecomp.schedule.state import Annotation, State
from tecomp.search.layout_rewrite import pack_candidates
from tecomp.search.target_search import generate_sketches, materialize
from tecomp.testing.operator_suite import (
    batch_matmul_qkt,
    capsule_conv,
    conv2d_transpose,
    matmul,
    pairwise_sqdist,
)

#: the per-panel tests draw for an AVX2 CPU whatever the host (the kernels build for the host): with
#: AVX-512's 16 lanes, a 128-wide j is mostly one register-tile panel, so 8 draws on an AVX-512
#: host gave one panel loop to pack in, where the tests count on two
AVX2 = "llvm -mcpu=znver3 -mattr=+avx,+avx2,+f16c,+fma"


def _candidates_of(case):
    """Pack candidates ``{input name: (dim, axis)}`` of the first tiled sketch's state."""
    task = tc.SearchTask(case.dag, target="llvm")
    sk = generate_sketches(task)[0]
    st = State.replay(case.dag, sk.steps)
    return {st.stages[sid].name: (dim, axis) for sid, _, dim, axis in pack_candidates(st)}


def test_a_batched_operand_packs_its_own_axis_only():
    assert _candidates_of(batch_matmul_qkt(1, 3, 8, 4)) == {"Q": (1, "i"), "K": (1, "j")}


def test_a_matmul_packs_both_operands_along_their_own_axis():
    assert _candidates_of(matmul(8, 16, 4)) == {"A": (0, "i"), "B": (1, "j")}


def _packed_candidates_match(case, seed, n, table=None, only=None) -> int:
    """Materialize ``n`` candidates (of the sketches whose name contains ``only``), check each
    against numpy, and return how many packed an input."""
    task, sks, rng, x, ref = case.search_setup(seed, target="llvm")
    ids = [k for k, sk in enumerate(sks) if only is None or only in sk.name]
    packed = 0
    for i in range(n):
        k_sk = ids[i % len(ids)]
        c = materialize(task, k_sk, sks[k_sk], dict(table or {}), rng)
        if c is None:
            continue
        packed += any(isinstance(s, CacheReadStep) and s.pack for s in c.steps)
        k = tc.build(case.dag, schedule=tc.Schedule(case.dag, c.steps))
        np.testing.assert_allclose(k(*x), ref, rtol=1e-4, atol=1e-4)
    return packed


def test_packed_qkt_candidates_match_numpy():
    assert _packed_candidates_match(batch_matmul_qkt(1, 2, 12, 8), 5, 12) >= 2


def test_a_weight_with_two_own_axes_packs_the_lane_axis():
    """A capsule weight ``W[ky, kx, c, o, k, j]`` has two axes of its own (o, j): it is packable
    along ``o`` in the sketch that puts ``o`` innermost (its lanes 16 floats apart otherwise:
    a gather per vector), and not at all where ``j`` (already contiguous) is innermost."""
    case = capsule_conv(1, 4, 2, 32, 3, 2, 1)
    task = tc.SearchTask(case.dag, target="llvm")
    found = {}
    for sk in generate_sketches(task):
        st = State.replay(case.dag, sk.steps)
        found[sk.name] = {st.stages[sid].name: (dim, axis)
                          for sid, _, dim, axis in pack_candidates(st)}
    o_inner = [v for name, v in found.items() if "o-inner" in name]
    assert o_inner and all(v.get("W") == (3, "o") for v in o_inner)
    assert any("W" not in v for name, v in found.items() if "inner" not in name)


def test_packed_capsule_candidates_match_numpy():
    case = capsule_conv(1, 4, 2, 32, 3, 2, 1)
    assert _packed_candidates_match(case, 3, 8, {"pack": {"W": 1}}, only="o-inner") >= 1


def test_a_pack_copy_reads_its_source_rows_whole():
    """The copy into ``K.global[j // f, b, h, d, j % f]`` runs its loop over ``d`` (the source's
    contiguous dimension) innermost, not the tile's lanes (one element per source row)."""
    case = batch_matmul_qkt(1, 2, 32, 16)
    task, sks, rng, _, _ = case.search_setup(1, target="llvm")
    seen = 0
    for i in range(16):
        c = materialize(task, i % len(sks), sks[i % len(sks)], {"pack": {"K": 1}}, rng)
        if c is None:
            continue
        st = State.replay(case.dag, c.steps)
        for s in st.stages:
            if s.name == "K.global":
                seen += 1
                assert s.iters[-1].name.split("@")[-1] == "ax3"  # (fused or not)
    assert seen >= 1


def _panel_packs(case, seed, n, table, constants=(), build_all=True):
    """Materialize ``n`` candidates of the tile sketches under ``table``, check each (with
    ``build_all=False``, each that computes B's copy per panel) against numpy, and return
    ``(candidates, how many computed B's copy per panel)``."""
    task, sks, rng, x, ref = case.search_setup(seed, target=AVX2, constants=constants)
    ids = [k for k, sk in enumerate(sks) if sk.name == "tile"]
    made = panel = 0
    for i in range(n):
        c = materialize(task, ids[0], sks[ids[0]], {k: dict(v) for k, v in table.items()}, rng)
        if c is None:
            continue
        made += 1
        st = c.state
        packs = [k for k, s in enumerate(st.stages) if s.name == "B.global"]
        per_panel = bool(packs) and st.stages[packs[0]].attach is not None
        if per_panel:
            panel += 1
            rid, loop = st.stages[packs[0]].attach
            reader = st.stages[rid]
            assert loop == 0 and reader.iters[0].name.startswith("j.0")
            assert reader.iters[0].annotation in (Annotation.PARALLEL, Annotation.NONE)
            # the panel loop alone is parallel: fused with i.0 it would pack once per (j, i)
            assert "@" not in reader.iters[0].name
        if constants or not (build_all or per_panel):
            continue
        k = tc.build(case.dag, schedule=tc.Schedule(case.dag, c.steps))
        np.testing.assert_allclose(k(*x), ref, rtol=1e-4, atol=1e-4)
    return made, panel


def test_a_matmul_packs_b_per_panel_inside_its_parallel_loop():
    """``B@panel`` 1: B's copy is computed at the reader's loop over j.0, moved first and made
    the one parallel loop; correct on divisible and on non-divisible shapes."""
    for case, seed in ((matmul(64, 128, 32), 1), (matmul(37, 150, 29), 2)):
        # (not where the drawn tiling leaves j.0 one iteration: no panel loop to pack in; those
        # pack B at root like the B@panel 0 draws below, which build: only the panel ones build)
        made, panel = _panel_packs(case, seed, 8, {"pack": {"B": 1, "B@panel": 1}},
                                   build_all=False)
        assert made >= 4 and panel >= 2
        made, panel = _panel_packs(case, seed, 4, {"pack": {"B": 1, "B@panel": 0}})
        assert made >= 2 and panel == 0


def test_a_constant_weight_is_never_packed_per_panel():
    """A build-time constant is packed once at root: per panel, it would be packed every call."""
    made, panel = _panel_packs(matmul(64, 128, 32), 1, 8, {"pack": {"B": 1, "B@panel": 1}},
                               constants=("B",))
    assert made >= 4 and panel == 0


def test_a_batched_operand_is_packed_per_panel_of_its_own_batch_and_head():
    """Q.K^T per head: K's copy is computed at its panel loop j.0 placed after the loops over
    K's batch and head (b.0, h.0), which the parallel loop may fuse (the copy depends on them);
    every candidate matches numpy."""
    case = batch_matmul_qkt(2, 3, 40, 16)
    task, sks, rng, x, ref = case.search_setup(4, target=AVX2)
    tile = [k for k, sk in enumerate(sks) if sk.name == "tile"][0]
    seen = 0
    for _ in range(10):
        c = materialize(task, tile, sks[tile], {"pack": {"K": 1, "K@panel": 1, "Q": 0}}, rng)
        if c is None:
            continue
        st = c.state
        copy = next((s for s in st.stages if s.name == "K.global"), None)
        if copy is not None and copy.attach is not None:
            seen += 1
            reader = st.stages[copy.attach[0]]
            names = [n for it in reader.iters[:copy.attach[1] + 1] for n in it.name.split("@")]
            assert names == ["b.0", "h.0", "j.0"]
        k = tc.build(case.dag, schedule=tc.Schedule(case.dag, c.steps))
        np.testing.assert_allclose(k(*x), ref, rtol=1e-4, atol=1e-4)
    assert seen >= 2


def test_lanes_that_would_gather_pack_the_weight_nine_draws_in_ten():
    """A transposed conv's weight ``W[c, o, ky, kx]`` read by lanes over ``o`` (the o-inner
    sketches, the innermost tile of ``o`` longer than 1): unpacked, each vector load is a
    gather, so the drawn pack keeps the layout in one draw in ten; other draws pack in half.
    Every candidate matches numpy."""
    case = conv2d_transpose(1, 8, 4, 32, 4, 2, 1)
    task, sks, rng, x, ref = case.search_setup(0, target="llvm")
    counts = {True: [0, 0], False: [0, 0]}  # lanes along o: [candidates, packed]
    for k, sk in enumerate(sks):
        for i in range(48 if "o-inner" in sk.name else 12):
            c = materialize(task, k, sk, {}, rng)
            if c is None:
                continue
            reader = next(s for s in c.state.stages if not s.is_placeholder and s.op.reduce_axes)
            inner = reader.iters[-1]
            lanes = inner.name.split(".")[0] == "o" and (inner.const_extent or 1) > 1
            counts[lanes][0] += 1
            counts[lanes][1] += any(isinstance(s, CacheReadStep) and s.pack for s in c.steps)
            if i % 24 == 0:  # a few builds: unrolled guarded taps compile in seconds each
                kern = tc.build(case.dag, schedule=tc.Schedule(case.dag, c.steps))
                np.testing.assert_allclose(kern(*x), ref, rtol=1e-4, atol=1e-4)
    (n_lanes, p_lanes), (n_other, p_other) = counts[True], counts[False]
    assert n_lanes >= 15 and n_other >= 40
    assert p_lanes >= 0.8 * n_lanes and p_other <= 0.75 * n_other


def test_an_operand_read_twice_at_one_place_is_packable():
    """``(X[i, k] - Y[j, k]) * (X[i, k] - Y[j, k])`` reads each operand twice at the same place:
    one copy serves both reads, so both are pack candidates (Y's lanes gathered unpacked: the
    squared distances ran 0.76x torch, 1.41x with Y packed, 64 trials each)."""
    assert _candidates_of(pairwise_sqdist(8, 32, 4)) == {"X": (0, "i"), "Y": (0, "j")}
    assert _packed_candidates_match(pairwise_sqdist(6, 40, 5), 2, 10, {"pack": {"Y": 1}}) >= 1
