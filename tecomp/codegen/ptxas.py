"""ptxas, NVIDIA's PTX assembler, as the validator of emitted PTX (no GPU needed).

:func:`find_ptxas` looks on ``PATH``, under ``$CUDA_HOME``/``$CUDA_PATH`` and in the bin directory of
the ``nvidia-cuda-nvcc`` pip package (the ``cuda`` extra); :func:`check_ptx` assembles PTX for an
arch with ``-v`` and reports registers, shared memory and spills per kernel, or raises
:class:`PTXError` with ptxas's message.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field

__all__ = ["PTXError", "PtxasReport", "KernelResources", "find_ptxas", "check_ptx"]


class PTXError(RuntimeError):
    """ptxas rejected the PTX; the message is ptxas's."""


@dataclass
class KernelResources:
    """What ``ptxas -v`` reports for one kernel."""
    registers: int = 0
    shared_bytes: int = 0
    spill_stores: int = 0
    spill_loads: int = 0
    stack_bytes: int = 0


@dataclass
class PtxasReport:
    """The result of :func:`check_ptx`: per-kernel resources and ptxas's full output."""
    arch: str
    kernels: dict = field(default_factory=dict)  # name -> KernelResources
    output: str = ""

    @property
    def spills(self) -> int:
        return sum(k.spill_stores + k.spill_loads for k in self.kernels.values())


def _pip_candidates() -> list:
    out = []
    try:
        import nvidia.cuda_nvcc as pkg  # the nvidia-cuda-nvcc wheel
        for base in getattr(pkg, "__path__", []):
            out.append(os.path.join(base, "bin", "ptxas"))
    except ImportError:
        pass
    return out


def find_ptxas() -> str | None:
    """The path of a ptxas executable, or None when there is none."""
    found = shutil.which("ptxas")
    if found:
        return found
    cands = [os.path.join(os.environ[v], "bin", "ptxas") for v in ("CUDA_HOME", "CUDA_PATH")
             if os.environ.get(v)]
    cands += _pip_candidates() + ["/usr/local/cuda/bin/ptxas"]
    return next((c for c in cands if os.path.isfile(c) and os.access(c, os.X_OK)), None)


_FUNC = re.compile(r"Compiling entry function '([^']+)'")
_PROPS = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED = re.compile(r"Used (\d+) registers(?:.*?(\d+) bytes smem)?")


def _parse(text: str) -> dict:
    kernels, cur = {}, None
    for line in text.splitlines():
        m = _FUNC.search(line)
        if m:
            cur = kernels.setdefault(m.group(1), KernelResources())
            continue
        if cur is None:
            continue
        m = _PROPS.search(line)
        if m:
            cur.stack_bytes, cur.spill_stores, cur.spill_loads = map(int, m.groups())
        m = _USED.search(line)
        if m:
            cur.registers = int(m.group(1))
            cur.shared_bytes = int(m.group(2) or 0)
    return kernels


def check_ptx(ptx: str, arch: str = "sm_90", ptxas: str | None = None,
              timeout: float = 120.0) -> PtxasReport:
    """Assemble ``ptx`` for ``arch`` with ``ptxas -v``.

    Raises
    ------
    FileNotFoundError
        No ptxas (see :func:`find_ptxas`).
    PTXError
        ptxas failed; the message holds its output.
    """
    exe = ptxas or find_ptxas()
    if exe is None:
        raise FileNotFoundError("ptxas not found: install CUDA or the 'cuda' extra "
                                "(nvidia-cuda-nvcc), or put ptxas on PATH")
    with tempfile.TemporaryDirectory(prefix="tecomp_ptx_") as d:
        src = os.path.join(d, "kernel.ptx")
        with open(src, "w") as fh:
            fh.write(ptx)
        r = subprocess.run([exe, f"-arch={arch}", "-v", src, "-o", os.path.join(d, "kernel.cubin")],
                           capture_output=True, text=True, timeout=timeout)
    out = (r.stdout + r.stderr).strip()
    if r.returncode != 0:
        raise PTXError(f"ptxas -arch={arch} failed (exit {r.returncode}):\n{out}")
    return PtxasReport(arch, _parse(out), out)
