"""Golden generated code: the LLVM IR our CPU emitter writes (before LLVM optimizes it) and the PTX
of the cuda target, for a few canonical kernels, diffed against tests/data/golden/. A refactor that
changes generated code fails here; when the change is meant, regenerate on purpose with

    .venv/bin/python tests/codegen/test_golden.py --regenerate

and review the diff of tests/data/golden/ like code. The CPU IR is emitted for 256-bit vector
registers whatever the host has, with the target triple and data layout left out, so the files do
not depend on the machine; they do depend on llvmlite's LLVM (the PTX most), which each file's
first line records: under another LLVM the comparison is skipped, saying so.
"""
from __future__ import annotations

import difflib
import pathlib
import sys

import llvmlite
import llvmlite.binding as llvm
import numpy as np
import pytest

import tecomp as tc
from tecomp.codegen import vector_plan
from tecomp.codegen.llvm_cpu import emit_module
from tecomp.workloads import builders as W
from tecomp.workloads.hand_schedules import matmul_schedule

GOLDEN = pathlib.Path(__file__).resolve().parent.parent / "data" / "golden"
LLVM = f"llvmlite {llvmlite.__version__} (LLVM {'.'.join(map(str, llvm.llvm_version_info))})"
HEADER = f"; tecomp golden, made with {LLVM}"
REGISTER_BITS = 256


def _matmul():
    wl = W.matmul(64, 48, 40)
    return wl, matmul_schedule(wl.dag, tile_i=4, tile_j=8, unroll_k=2)


def _softmax():
    wl = W.softmax(16, 37)
    return wl, None


def _csr_spmm():
    wl = W.csr_spmm(24, 40, 16, density=0.2, seed=3)
    return wl, None


#: name -> (workload and schedule, target)
KERNELS = {
    "matmul_hand_cpu.ll": (_matmul, "llvm"),
    "softmax_cpu.ll": (_softmax, "llvm"),
    "csr_spmm_cpu.ll": (_csr_spmm, "llvm"),
    "matmul_cuda.ptx": (lambda: (W.matmul(64, 48, 40), None), "cuda"),
    "softmax_cuda.ptx": (_softmax, "cuda"),
}


def _cpu_ir(wl, sched) -> str:
    func = tc.lower(sched if sched is not None else wl.dag)
    with vector_plan.pinned_register_bits(REGISTER_BITS):  # the golden's width, not the host's
        text = emit_module(func)
    return "\n".join(line for line in text.splitlines()
                     if not line.startswith(("target triple", "target datalayout")))


def generate(name: str) -> str:
    make, target = KERNELS[name]
    wl, sched = make()
    if target == "llvm":
        body = _cpu_ir(wl, sched)
    else:
        body = tc.build(wl.dag, target="cuda", schedule=sched, cache=False).source()
    return f"{HEADER}\n{body.rstrip()}\n"


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_generated_code_is_the_golden(name):
    path = GOLDEN / name
    want = path.read_text()
    if want.splitlines()[0] != HEADER:
        pytest.skip(f"{name} was made with another LLVM ({want.splitlines()[0]!r}); this is "
                    f"{LLVM}: regenerate to compare")
    got = generate(name)
    if got != want:
        diff = "".join(difflib.unified_diff(want.splitlines(True), got.splitlines(True),
                                            f"golden/{name}", "generated", n=2))
        lines = diff.splitlines()
        more = f"\n... {len(lines) - 80} more diff lines" if len(lines) > 80 else ""
        pytest.fail(f"generated code of {name} changed (regenerate on purpose with "
                    f"`.venv/bin/python tests/codegen/test_golden.py --regenerate`):\n"
                    + "\n".join(lines[:80]) + more)


@pytest.mark.parametrize("name", sorted(n for n in KERNELS if KERNELS[n][1] == "llvm"))
def test_golden_kernels_compute_their_reference(name):
    """The golden kernels are right, not only unchanged: built for this host, each agrees with its
    numpy/scipy reference on random data."""
    wl, sched = KERNELS[name][0]()
    k = tc.build(wl.dag, target="llvm", schedule=sched, cache=False)
    ins = wl.make_inputs(np.random.default_rng(7))
    got = k(*ins)
    np.testing.assert_allclose(got, wl.reference(ins)[0], rtol=2e-5, atol=1e-5)


if __name__ == "__main__":
    if sys.argv[1:] != ["--regenerate"]:
        sys.exit(f"usage: {sys.argv[0]} --regenerate   (rewrites {GOLDEN}/*)")
    GOLDEN.mkdir(parents=True, exist_ok=True)
    for name in sorted(KERNELS):
        (GOLDEN / name).write_text(generate(name))
        print(f"wrote {GOLDEN / name}")
