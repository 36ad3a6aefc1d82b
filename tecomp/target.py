"""Compilation targets as typed values (``"llvm"`` is this host CPU, ``"cuda"`` an NVIDIA GPU)."""
from __future__ import annotations

import enum
from dataclasses import dataclass

__all__ = ["Target", "TargetKind"]


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
        LLVM feature string (``+avx512f,...``) for ``llvm``.
    arch : str
        ``sm_XX`` for ``cuda``.
    """

    kind: TargetKind
    cpu: str = ""
    features: str = ""
    arch: str = ""

    @staticmethod
    def parse(t) -> "Target":
        """Accept a Target or a string: ``"llvm"``, ``"llvm -mcpu=NAME"``, ``"cuda"``,
        ``"cuda -arch=sm_90"``."""
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
            cpu, feats = host_cpu()
            return Target(TargetKind.LLVM, kw.get("mcpu", cpu), kw.get("mattr", feats))
        if head == "cuda":
            unknown = set(kw) - {"arch"}
            if unknown:
                raise ValueError(f"target {t!r}: unknown option(s) {sorted(unknown)}")
            return Target(TargetKind.CUDA, arch=kw.get("arch", "sm_90"))
        raise ValueError(f"unknown target {head!r}; use 'llvm' (this CPU) or 'cuda'")

    def __str__(self):
        if self.kind is TargetKind.LLVM:
            return f"llvm -mcpu={self.cpu}"
        return f"cuda -arch={self.arch}"


def host_cpu() -> tuple:
    """(LLVM CPU name, feature string) of this machine."""
    from .codegen.llvm_cpu import host_cpu as detect
    return detect()
