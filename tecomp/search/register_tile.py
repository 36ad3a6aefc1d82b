"""Register-tile sampling: the innermost tile of a multi-level-tiled stage drawn as a micro-kernel
that fills the vector register file, instead of from the divisors of each extent.

A CPU tile's innermost level is a block of ``rows`` x ``nvec`` vectors of accumulators: every
reduction step loads ``nvec`` vectors of one operand, broadcasts ``rows`` scalars of the other and
issues ``rows * nvec`` FMAs. It runs near the FMA peak only when the accumulators hide the FMA
latency (at least half the register file) and fit in the registers with the operand vectors
and the broadcast. Such shapes (6x16 or 4x24 floats on AVX2, 14x32 or 6x64 on AVX-512) are rarely
divisors of the extents (1024 = 2^10 has no factor 6), so divisor sampling almost never draws
them: on a Zen 3 the best matmul of a 256-trial search was a 4x16 tile, while a hand 6x16 tile
ran about 15% faster. Non-divisible tiles cost little since whole tiles run without guards
(:mod:`tecomp.lowering.guard_split`).
"""
from __future__ import annotations

import math

import numpy as np

from .sketch_rule import Sketch, TileHole
from .tiling import TILING_CPU

__all__ = ["REGISTER_TILE_PROB", "SPATIAL_PARTS", "register_shapes", "shape_weights",
           "sample_register_tiles", "row_candidates", "keep_inner", "cover"]

#: share of fresh samples whose tiled stages get a register-filling innermost tile
REGISTER_TILE_PROB = 0.4
#: the parts a CPU tile splits a spatial loop into
SPATIAL_PARTS = TILING_CPU.count("S")


def register_shapes(lanes: int, registers: int, rows_extent: int, vec_extent: int) -> list:
    """The ``(rows, nvec)`` micro-tiles that fit: ``rows * nvec`` accumulators, the ``nvec``
    operand vectors and a broadcast within ``registers`` (LLVM loads each operand vector once a
    step and keeps it for every row; it does not fold them into the FMAs as memory operands: a
    7x16 tile on AVX2, 14 + 2 + 1 = 17 registers, spilled an accumulator and shuffled the rest
    through register moves every step: a 512^3 matmul ran at 34 GFLOP/s, 6x16 at 112 with the
    same non-divisible outer tiles), and at least half of the registers accumulators (fewer do
    not hide the FMA latency) unless the rows are the whole rows extent (a 7x7 layer's 7
    columns: no tail); ``nvec * lanes`` not past the vector extent rounded up to a vector,
    ``rows`` not past the rows extent."""
    out = []
    max_nvec = max(1, -(-vec_extent // lanes))
    for nvec in range(1, min(4, max_nvec) + 1):
        for rows in range(1, min(rows_extent, 16) + 1):
            acc = rows * nvec
            if acc + nvec + 1 <= registers and (2 * acc >= registers
                                         or rows == rows_extent and 2 * acc >= registers // 2):
                out.append((rows, nvec))
    return out


def shape_weights(shapes: list) -> np.ndarray:
    """Draw probabilities of the ``(rows, nvec)`` micro-tiles ``shapes``, proportional to the
    square of their FMAs per operand load, ``rows * nvec / (rows + nvec)``. A step loads ``nvec``
    vectors and broadcasts ``rows`` scalars for ``rows * nvec`` FMAs; a one-vector tile issues a
    broadcast per FMA. Where a 256-bit FMA and a broadcast each take two 128-bit halves (Zen 1),
    one-vector tiles ran a P.V batch matmul 25-35% slower than two-vector ones (8x1 0.63 ms, 6x2
    0.47), yet 7 of the 13 AVX2 shapes are one vector wide: drawn uniformly they took most of
    the draws."""
    w = np.array([(r * v / (r + v)) ** 2 for r, v in shapes], dtype=float)
    return w / w.sum()


def row_candidates(holes, vi: int) -> list:
    """``[(index, hole)]`` of a tiled stage's spatial ``holes`` (``(index, hole)`` pairs) that
    its register tile's rows may run along: all but the vector hole ``vi`` with more than one
    iteration, and of those the ones off the batch axes where there is one (rows along a batch
    axis, a head of P.V, load a vector and a broadcast per row and step, reusing nothing)."""
    others = [(i, h) for i, h in holes if i != vi and h.extent > 1]
    return [x for x in others if not x[1].batch] or others


def _outer(rng, extent: int, inner: int, parts: int, sample_tile) -> list:
    """Lengths of a ``parts``-level split whose innermost length is ``inner``: the levels above it
    sampled over the ``ceil(extent / inner)`` tiles."""
    return list(sample_tile(rng, -(-extent // inner), parts - 1)) + [inner]


def sample_register_tiles(rng, sketch: Sketch, hardware, table: dict, sample_tile) -> dict:
    """{hole index: lengths} for the spatial holes of the tiled stages of ``sketch`` whose
    decisions ``table`` lacks, drawn with probability :data:`REGISTER_TILE_PROB` per stage as a
    register micro-tile (see the module docstring): the vector hole's innermost length a multiple
    of the vector, one other spatial hole's the rows, the rest 1. Empty when the draw says no.
    A stage with a :class:`TileHole` ``covers`` (fused rows, there for their register tiles)
    always draws, its rows along that hole."""
    groups: dict = {}
    for idx, h in sketch.holes.items():
        if type(h) is TileHole and h.parts == SPATIAL_PARTS:
            groups.setdefault(sketch.steps[idx].stage_id, []).append((idx, h))
    lanes = max(1, hardware.vector_bytes // 4)
    out = {}
    for holes in groups.values():
        vec = [(i, h) for i, h in holes if h.vector]
        rows = [(i, h) for i, h in holes if h.covers and not h.vector and h.extent > 1]
        if len(vec) != 1 or any(i in table for i, _ in holes) \
                or not rows and rng.random() >= REGISTER_TILE_PROB:
            continue
        vi, vh = vec[0]
        others = rows or row_candidates(holes, vi)
        ri, rh = others[int(rng.integers(len(others)))] if others else (None, None)
        shapes = register_shapes(lanes, hardware.vector_registers,
                                 rh.extent if rh is not None else 1, vh.extent)
        if not shapes or vh.extent < lanes:
            continue
        rows, nvec = shapes[int(rng.choice(len(shapes), p=shape_weights(shapes)))]
        out[vi] = _outer(rng, vh.extent, min(nvec * lanes, vh.extent), vh.parts, sample_tile)
        for i, h in holes:
            if i == vi:
                continue
            inner = min(rows, h.extent) if i == ri else 1
            out[i] = _outer(rng, h.extent, inner, h.parts, sample_tile)
    return out


def keep_inner(rng, lengths: list, extent: int, sample_tile) -> list:
    """A re-sampled split that keeps the innermost length of ``lengths`` (a register tile)."""
    return _outer(rng, extent, lengths[-1], len(lengths) + 1, sample_tile) if lengths else []


def cover(lengths, extent: int) -> list:
    """``lengths`` (a split's inner lengths) with the outermost one raised so that they span
    ``extent`` (a :class:`TileHole` ``covers``): unchanged when they do; else the innermost kept,
    the middle ones kept when they divide the innermost tiles' count and set to 1 otherwise."""
    lengths = list(lengths)
    if not lengths or math.prod(lengths) >= extent:
        return lengths
    if len(lengths) == 1:
        return [extent]
    tiles = -(-extent // lengths[-1])  # of the innermost length
    mid = math.prod(lengths[1:-1])
    if tiles % mid:
        lengths[1:-1] = [1] * (len(lengths) - 2)
        mid = 1
    lengths[0] = tiles // mid
    return lengths
