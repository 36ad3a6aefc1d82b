"""Compilation targets as typed values (``"llvm"`` is this host CPU, ``"cuda"`` an NVIDIA GPU).

The string of an LLVM target names its CPU and the CPU features that change the code tecomp
generates (vector width, FMA, half/bfloat and dot-product instructions):
``llvm -mcpu=znver3 -mattr=+avx,+avx2,+f16c,+fma``. Tuning records store that string, so a
record says which instructions its timing used; :mod:`tecomp.schedule.target_match` decides which
records a target may use (older records, without ``-mattr``, match on their ``-mcpu``).
"""
from __future__ import annotations

import enum
import functools
from dataclasses import dataclass

__all__ = ["CODEGEN_FEATURES", "Target", "TargetKind"]

#: the LLVM CPU features named in a target's string: those that change the instructions (and so
#: the timings) of generated kernels; the other flags LLVM reports (aes, rdrnd, xsave ...) do not
CODEGEN_FEATURES = frozenset({
    # x86: vector width and FMA, half/bfloat16 conversions and arithmetic, int8 dot products
    "avx", "avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512dq", "avx512vl", "avx512vnni",
    "avx512bf16", "avx512fp16", "avxvnni", "amx-tile", "amx-int8", "amx-bf16",
    # AArch64: SIMD, scalable vectors, half/bfloat16 and int8 dot products
    "neon", "sve", "sve2", "sme", "fullfp16", "bf16", "dotprod", "i8mm",
})


class TargetKind(enum.Enum):
    LLVM = "llvm"
    CUDA = "cuda"


@dataclass(frozen=True)
class Target:
    """A compilation target.

    Attributes
    ----------
    kind : TargetKind
    cpu : str
        LLVM CPU name for ``llvm`` (the host's when parsed from ``"llvm"``).
    features : str
        LLVM feature string (``+avx512f,...``) for ``llvm``: the host's when parsed from a string
        without ``-mattr`` (tecomp compiles for the host CPU).
    arch : str
        ``sm_XX`` for ``cuda``.
    """

    kind: TargetKind
    cpu: str = ""
    features: str = ""
    arch: str = ""

    @staticmethod
    def parse(t) -> "Target":
        """Accept a Target or a string: ``"llvm"``, ``"llvm -mcpu=NAME"``,
        ``"llvm -mcpu=NAME -mattr=+avx2,+fma"``, ``"cuda"``, ``"cuda -arch=sm_90"``."""
        if isinstance(t, Target):
            return t
        if not isinstance(t, str) or not t.split():
            raise ValueError(f"target must be a string like 'llvm' or 'cuda', got {t!r}")
        head, *opts = t.split()
        kw = {}
        for o in opts:
            if not o.startswith("-") or "=" not in o:
                raise ValueError(f"target {t!r}: option {o!r} is not of the form -key=value")
            k, v = o.lstrip("-").split("=", 1)
            kw[k] = v
        if head == "llvm":
            unknown = set(kw) - {"mcpu", "mattr"}
            if unknown:
                raise ValueError(f"target {t!r}: unknown option(s) {sorted(unknown)}")
            if "mattr" in kw:
                bad = [f for f in kw["mattr"].split(",") if f and f[0] not in "+-"]
                if bad:
                    raise ValueError(f"target {t!r}: -mattr lists features as +name or -name, "
                                     f"got {bad}")
            cpu, feats = host_cpu()
            return Target(TargetKind.LLVM, kw.get("mcpu", cpu), kw.get("mattr", feats))
        if head == "cuda":
            unknown = set(kw) - {"arch"}
            if unknown:
                raise ValueError(f"target {t!r}: unknown option(s) {sorted(unknown)}")
            return Target(TargetKind.CUDA, arch=kw.get("arch", "sm_90"))
        raise ValueError(f"unknown target {head!r}; use 'llvm' (this CPU) or 'cuda'")

    @functools.cached_property  # a frozen dataclass's __dict__: set once, read per record
    def codegen_features(self) -> tuple:
        """The enabled features of :data:`CODEGEN_FEATURES` (``("+avx2", "+fma", ...)``,
        sorted): what ``-mattr`` of the target's string lists."""
        on = {f[1:] for f in self.features.split(",") if f.startswith("+")}
        return tuple(f"+{f}" for f in sorted(on & CODEGEN_FEATURES))

    def host_mismatch(self) -> str:
        """Why tecomp cannot build for this target on this machine ("" when it can).

        tecomp emits LLVM code for the CPU it runs on: an ``llvm`` target must name this host's
        CPU and the features of :data:`CODEGEN_FEATURES` it has (``"llvm"`` alone always does).
        A target of another CPU still serves to read that CPU's records and to search for it
        (a Ray cluster's nodes of that CPU measure), but code built here would be the host's
        under another CPU's name. ``cuda`` targets are checked where they are measured.
        """
        if self.kind is not TargetKind.LLVM:
            return ""
        host = _host()
        if self.cpu != host.cpu:
            return (f"target '{self}' names the CPU {self.cpu}, but this host is a {host.cpu}: "
                    f"tecomp compiles for the CPU it runs on (use target='llvm'; records of "
                    f"{self.cpu} stay usable as seeds, see TuningOptions.cross_target_seeds)")
        if self.codegen_features != host.codegen_features:
            mine, theirs = set(self.codegen_features), set(host.codegen_features)
            parts = ([f"this host lacks {','.join(sorted(mine - theirs))}"] if mine - theirs
                     else []) + ([f"the code would use {','.join(sorted(theirs - mine))} as well"]
                                 if theirs - mine else [])
            return (f"target '{self}' names other CPU features than this host's "
                    f"({'; '.join(parts)}): tecomp compiles for the features of the CPU it runs "
                    f"on (use target='llvm')")
        return ""

    def require_host(self) -> "Target":
        """This target, when tecomp can build for it here (:meth:`host_mismatch`).

        Raises
        ------
        ValueError
            An ``llvm`` target of another CPU, or of other features than this host's.
        """
        why = self.host_mismatch()
        if why:
            raise ValueError(why)
        return self

    def __str__(self):
        return self._string

    @functools.cached_property
    def _string(self) -> str:
        if self.kind is TargetKind.LLVM:
            feats = self.codegen_features
            return f"llvm -mcpu={self.cpu}" + (f" -mattr={','.join(feats)}" if feats else "")
        return f"cuda -arch={self.arch}"


@functools.cache
def _host() -> Target:
    """This machine's llvm target (its codegen features worked out once)."""
    return Target(TargetKind.LLVM, *host_cpu())


def host_cpu() -> tuple:
    """(LLVM CPU name, feature string) of this machine."""
    from .codegen.llvm_cpu import host_cpu as detect
    return detect()
