"""Make a cost-model prior (``tecomp/search/priors/*.npz``) from operator-suite tuning logs.

Each log directory holds one ``<operator>.jsonl`` per operator of the DSL suite
(``tecomp.testing.operator_suite``); every measured record is replayed, its features extracted
on this machine, and its cost kept, labelled within a group per operator and directory. At
most ``--per-group`` programs of each group are kept: the best half of them, and the rest
spread evenly over the others, so that the model learns the whole range of speeds.

    python scripts/make_model_prior.py tecomp/search/priors/avx2.npz \\
        tuning_logs/znver1/operator_suite_64_s29 tuning_logs/znver1/operator_suite_64_s30
"""
import argparse
import os
import sys

import numpy as np

from tecomp.schedule.records import load_records
from tecomp.search.features import FeatureExtractor
from tecomp.search.model_prior import load_prior, save_prior
from tecomp.search.record_candidates import candidates_from_records
from tecomp.search.task import SearchTask
from tecomp.testing.operator_suite import OPERATORS, operator_case


def spread(costs: np.ndarray, k: int) -> list:
    """Indices of at most ``k`` programs: the best ``k // 2``, then the rest evenly spaced."""
    order = list(np.argsort(costs, kind="stable"))
    if len(order) <= k:
        return order
    half = k // 2
    rest = order[half:]
    pick = np.linspace(0, len(rest) - 1, k - half).round().astype(int)
    return order[:half] + [rest[i] for i in sorted(set(pick))]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("logdirs", nargs="+")
    ap.add_argument("--per-group", type=int, default=64)
    args = ap.parse_args(argv)
    feats, costs, groups = [], [], []
    for d in args.logdirs:
        run = os.path.basename(os.path.normpath(d))
        for op in OPERATORS:
            log = os.path.join(d, f"{op}.jsonl")
            if not os.path.exists(log):
                continue
            case = operator_case(op)
            cands, c, skipped = candidates_from_records(case.dag, load_records(log))
            f = FeatureExtractor(SearchTask(case.dag, "llvm")).extract(cands)
            keep = [i for i in spread(c, args.per_group) if f[i].any()]
            feats += [f[i] for i in keep]
            costs += [c[i] for i in keep]
            groups += [f"{op} {run}"] * len(keep)
            print(f"{run} {op}: {len(keep)} of {len(cands)} programs ({skipped} skipped)",
                  flush=True)
    save_prior(args.out, feats, costs, groups)
    p = load_prior(args.out)
    print(f"{args.out}: {len(p)} programs in {len(set(p.groups))} groups, "
          f"{os.path.getsize(args.out) / 1e3:.0f} kB")


if __name__ == "__main__":
    sys.exit(main())
