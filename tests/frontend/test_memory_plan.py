"""The arena plan of a compiled model's intermediate values (tecomp.frontend.memory_plan)."""
import numpy as np
import pytest

from tecomp.frontend.compiled import Step
from tecomp.frontend.memory_plan import ALIGN, allocate, live_ranges, plan_offsets


@pytest.mark.parametrize("seed", range(20))
def test_values_live_together_never_share_bytes(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 40))
    sizes = [int(x) for x in rng.integers(0, 5000, n)]
    ranges = []
    for _ in range(n):
        if rng.random() < 0.1:
            ranges.append(None)
        else:
            a, b = sorted(int(x) for x in rng.integers(0, 30, 2))
            ranges.append((a, b))
    offsets, total = plan_offsets(sizes, ranges)
    for v, r in enumerate(ranges):
        if r is None:
            assert offsets[v] is None
            continue
        assert offsets[v] % ALIGN == 0 and offsets[v] + sizes[v] <= total
        for u in range(v):
            if ranges[u] is None or ranges[u][1] < r[0] or r[1] < ranges[u][0]:
                continue
            assert offsets[u] + max(sizes[u], 1) <= offsets[v] or \
                offsets[v] + max(sizes[v], 1) <= offsets[u], (u, v)
    # never more than one buffer per value, and values of disjoint ranges do share
    assert total <= sum(-(-max(s, 1) // ALIGN) * ALIGN for s, r in zip(sizes, ranges) if r)


def test_a_chain_needs_two_buffers_whatever_the_shapes():
    # x -> a -> b -> c -> d: each step reads one value and writes the next; the caller's input
    # and the per-call output stay out of the arena
    steps = [Step(None, [k], k + 1, f"s{k}", []) for k in range(4)]
    ranges = live_ranges(5, steps, pinned={0, 4})
    assert ranges == [None, (0, 1), (1, 2), (2, 3), None]
    specs = [((8,), np.float32), ((100,), np.float32), ((30, 2), np.float32),
             ((7,), np.int64), ((8,), np.float32)]
    bufs = allocate(specs, ranges)
    assert bufs[0] is None and bufs[4] is None
    assert [b.shape for b in bufs[1:4]] == [(100,), (30, 2), (7,)]
    assert bufs[3].dtype == np.int64
    assert all(b.ctypes.data % ALIGN == 0 for b in bufs[1:4])
    base = bufs[1].base
    assert bufs[2].base is base and bufs[3].base is base
    # a (400 B, 448 aligned) and b (240 B, 256 aligned) live together; c reuses a's bytes
    assert base.nbytes - ALIGN == 448 + 256
    assert bufs[3].ctypes.data == bufs[1].ctypes.data
