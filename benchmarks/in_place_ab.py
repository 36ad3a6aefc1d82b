"""What in-place ranking buys: one model built from its log twice, ranked by the in-place timings
the log holds (``tc.compile_model``'s default) and by the search's timings alone
(``in_place=False``), timed against each other with the protocol of ``tecomp.bench``, round by
round, at 2 threads. Both builds' outputs are checked against each other.

    benchmarks/run.sh in_place_ab.py --model resnet50=tuning_logs/znver3/resnet50.jsonl ...
        [--rounds 15] [--cache benchmarks/.onnx_cache]

The paired rounds matter more than the medians on a noisy machine: the line "faster in k of n
rounds" counts the rounds in which the in-place build beat the search-ranked one.

``--model NAME=LOG,OTHER_LOG`` compares two logs instead (each build ranked as
``tc.compile_model`` ranks by default), e.g. a fresh cold-measured tuning against the shipped one.
"""
import argparse
import os
import warnings

import numpy as np

import tecomp as tc
from tecomp.bench.protocol import TECOMP, Config, compare
from tecomp.bench.threads import tecomp_threads


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", action="append", required=True, metavar="NAME=LOG",
                    help="an ONNX file NAME.onnx in --cache and its tuning log; repeatable")
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--cache", default=os.path.join(os.path.dirname(__file__), ".onnx_cache"))
    args = ap.parse_args()
    for item in args.model:
        name, _, logs = item.partition("=")
        log, _, other = logs.partition(",")
        path = os.path.join(args.cache, f"{name}.onnx")
        if not os.path.isfile(path) or not all(os.path.isfile(f) for f in (log, other or log)):
            ap.error(f"--model {item}: need {path} (models_vs_peers.py --export-only) and {logs}")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model = tc.from_onnx(path)
            ranked = tc.compile_model(model, log=log)
            plain = (tc.compile_model(model, log=other) if other else
                     tc.compile_model(model, log=log, in_place=False))
        labels = (log, other) if other else ("in-place ranked", "search-ranked")
        rng = np.random.default_rng(0)
        xs = [rng.integers(0, 2, s).astype(d) if d.kind in "iu" else
              rng.standard_normal(s).astype(d) for s, d in ranked.input_specs]
        ya, yb = ranked(*xs), plain(*xs)
        ya, yb = (ya, yb) if isinstance(ya, tuple) else ((ya,), (yb,))
        err = max(float(np.max(np.abs(a - b)) / (np.max(np.abs(b)) or 1.0))
                  for a, b in zip(ya, yb))
        assert err < 1e-3, f"{name}: the two builds differ (max relative error {err:.2e})"
        cmp = compare([Config(TECOMP, labels[0], 2, lambda m=ranked: m(*xs), tecomp_threads(2)),
                       Config(TECOMP, labels[1], 2, lambda m=plain: m(*xs), tecomp_threads(2))],
                      rounds=args.rounds)
        a, b = cmp.timings
        print(f"== {name} ({logs}), 2 threads, {args.rounds} rounds")
        for t in (a, b):
            print(f"  {t.config.variant:<16} median {t.median * 1e3:9.3f} ms  spread "
                  f"{t.low * 1e3:.3f}..{t.high * 1e3:.3f}  rounds "
                  + " ".join(f"{x * 1e3:.2f}" for x in t.per_round))
        wins = sum(x < y for x, y in zip(a.per_round, b.per_round))
        print(f"  {labels[0]} faster in {wins} of {len(a.per_round)} rounds; median ratio "
              f"{labels[1]} / {labels[0]} {b.median / a.median:.3f}", flush=True)


if __name__ == "__main__":
    main()
