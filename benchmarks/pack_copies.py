"""Transposing copies (a packed operand's panels) with and without the register-transpose emitter
(``tecomp/codegen/llvm_transpose.py``), built both ways and timed interleaved in one process.

    benchmarks/run.sh pack_copies.py [--rounds 5] [--threads 1]

Two kinds of copy, each in both loop orders (the source's rows innermost, as the search's pack
stage orders them, or the panel's lanes innermost):
- ``A[i, k]`` into row panels ``Y[i // L, k, i % L]`` (a matmul's A packed for a register tile
  of ``L`` rows);
- BERT's ``K[b, j, h, d]`` into ``Y[b, h, j // L, d, j % L]`` (Q.K^T's packed K).
The "before" kernels are the same schedules emitted as plain loops (``TRANSPOSE_COPIES`` off).
Every output is checked against numpy.
"""
import argparse

import numpy as np

import tecomp as tc
from tecomp.bench.protocol import Config, compare
from tecomp.bench.threads import tecomp_threads
from tecomp.codegen.llvm_cpu import StmtEmitter
from tecomp.codegen.memory import aligned_copy

PANELS = [(256, 512, 4), (252, 768, 6), (256, 511, 8), (256, 512, 16), (128, 768, 32)]
HEADS = [8, 16, 32, 64]  # K of one BERT layer, batch 1, packed along the sequence


def panel_case(m, k, lanes, order):
    A = tc.placeholder((m, k), name="A")
    Y = tc.compute((m // lanes, k, lanes), lambda a, kk, b: A[a * lanes + b, kk], name="Y")
    dag = tc.ComputeDAG([A, Y])
    s = tc.Schedule(dag)
    ax = dict(zip("akb", s[Y].axes))
    s[Y].reorder(*[ax[c] for c in order])
    s[Y].parallel(ax["a"])
    x = np.random.default_rng(0).standard_normal((m, k)).astype("float32")
    return dag, s, x, x.reshape(m // lanes, lanes, k).transpose(0, 2, 1)


def heads_case(f, order, B=1, J=128, H=12, D=64):
    K = tc.placeholder((B, J, H, D), name="K")
    Y = tc.compute((B, H, J // f, D, f), lambda b, h, jo, d, ji: K[b, jo * f + ji, h, d],
                   name="Y")
    dag = tc.ComputeDAG([K, Y])
    s = tc.Schedule(dag)
    ax = dict(zip("bhodi", s[Y].axes))
    s[Y].reorder(*[ax[c] for c in order])
    s[Y].parallel(s[Y].fuse(ax["b"], ax["h"], ax["o"]))
    x = np.random.default_rng(0).standard_normal((B, J, H, D)).astype("float32")
    return dag, s, x, x.reshape(B, J // f, f, H, D).transpose(0, 3, 1, 4, 2)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    cases = [(f"A {m}x{k} -> panels of {lanes}, {o}", panel_case(m, k, lanes, order))
             for m, k, lanes in PANELS
             for o, order in (("rows inner", "abk"), ("lanes inner", "akb"))]
    cases += [(f"K 128x12x64 -> panels of {f}, {o}", heads_case(f, order)) for f in HEADS
              for o, order in (("rows inner", "bhoid"), ("lanes inner", "bhodi"))]
    cfgs = []
    for label, (dag, s, x, want) in cases:
        x = aligned_copy(x)
        for on in (False, True):
            StmtEmitter.TRANSPOSE_COPIES = on
            k = tc.build(dag, schedule=s, cache=False)
            out = k(x)
            np.testing.assert_array_equal(out, want)
            cfgs.append(Config("tecomp", f"{label}: {'transposes' if on else 'loops'}",
                               args.threads, (lambda k=k, x=x, out=out: k(x, out=out)),
                               tecomp_threads(args.threads)))
    StmtEmitter.TRANSPOSE_COPIES = True
    res = compare(cfgs, rounds=args.rounds)
    by = {t.config.variant: t for t in res.timings}
    print(f"{'copy':<48} {'loops us':>9} {'transposes us':>14} {'speedup':>8}")
    for label, _ in cases:
        a, b = by[f"{label}: loops"], by[f"{label}: transposes"]
        print(f"{label:<48} {a.median * 1e6:9.2f} {b.median * 1e6:14.2f} "
              f"{a.median / b.median:7.2f}x")


if __name__ == "__main__":
    main()
