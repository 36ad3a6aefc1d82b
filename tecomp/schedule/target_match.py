"""Which tuning records a target may use, decided on the target strings records store.

A CPU target's string names its CPU and the CPU features that change generated code
(``llvm -mcpu=znver3 -mattr=+avx,+avx2,+f16c,+fma``, see :mod:`tecomp.target`); records written
before features were named carry ``-mcpu`` alone. The schedule layer sees targets only as these
strings (it does not import the target layer), so the comparison lives here, on strings.

- A record of the same CPU whose features are the target's, or that names no features (an older
  log), is tuned for this target (:attr:`TargetMatch.SAME`).
- A record that needs a feature the target lacks (``+avx512f`` on an AVX2 machine) is never used:
  its timing used instructions this CPU does not have, so it does not rank schedules here
  (:attr:`TargetMatch.MISSING_FEATURES`).
- Any other record of the same kind (another CPU, or a CPU with fewer features) is valid but may
  not be the fastest choice (:attr:`TargetMatch.OTHER`); builds use it, with a warning, when
  nothing matches better.
"""
from __future__ import annotations

import enum
import functools

__all__ = ["TargetMatch", "match_target", "same_target", "missing_features", "target_features"]


class TargetMatch(enum.Enum):
    """How a record's target relates to the target a build or tuning asks for."""
    SAME = "same"
    OTHER = "other"
    MISSING_FEATURES = "missing_features"
    OTHER_KIND = "other_kind"


def _options(target: str):
    """``(kind, {option: value})`` of a target string, or ``None`` when it is not of the form
    ``KIND -key=value ...``."""
    head, *opts = str(target).split() or [""]
    kw = {}
    for o in opts:
        if not o.startswith("-") or "=" not in o:
            return None
        k, v = o.lstrip("-").split("=", 1)
        kw[k] = v
    return head, kw


def target_features(target: str):
    """The enabled features (``{"+avx2", ...}``) a target string names with ``-mattr``, or
    ``None`` when it names none (a CPU string written before features were named)."""
    parsed = _options(target)
    if parsed is None or "mattr" not in parsed[1]:
        return None
    return frozenset(f for f in parsed[1]["mattr"].split(",") if f.startswith("+"))


def missing_features(recorded: str, target: str) -> list:
    """The features a record's target names that ``target`` lacks, sorted (``[]`` when either
    string names no features)."""
    have, need = target_features(target), target_features(recorded)
    if have is None or need is None:
        return []
    return sorted(need - have)


def match_target(recorded: str, target) -> TargetMatch:
    """How the target string ``recorded`` (a record's) relates to ``target`` (a Target or its
    string); see the module docstring."""
    return _match(str(recorded), str(target))


@functools.lru_cache(maxsize=1024)
def _match(recorded: str, target: str) -> TargetMatch:
    # cached: ranking a log compares every record's string with one target, and a log holds
    # few distinct strings (93k shipped records, a handful of targets)
    if recorded == target:
        return TargetMatch.SAME
    mine, theirs = _options(target), _options(recorded)
    if mine is None or theirs is None:  # not KIND -k=v: compare the kinds only
        same_kind = recorded.split()[:1] == target.split()[:1]
        return TargetMatch.OTHER if same_kind else TargetMatch.OTHER_KIND
    if mine[0] != theirs[0]:
        return TargetMatch.OTHER_KIND
    if missing_features(recorded, target):
        return TargetMatch.MISSING_FEATURES
    if mine[0] != "llvm" or theirs[1].get("mcpu") != mine[1].get("mcpu"):
        return TargetMatch.OTHER
    have, need = target_features(target), target_features(recorded)
    if have is None or need is None or have == need:
        return TargetMatch.SAME
    return TargetMatch.OTHER  # this CPU, tuned with fewer of its features enabled


def same_target(recorded: str, target) -> bool:
    """Whether a record of target string ``recorded`` was tuned for ``target`` (what a resumed
    tuning counts as already measured)."""
    return match_target(recorded, target) is TargetMatch.SAME
