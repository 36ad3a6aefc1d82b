"""A crafted object file in an export (its SHA-256 updated to match) is a ValueError naming the
malformed ELF structure, raised in this process before LLVM's RuntimeDyld sees the bytes: the
linker divides by ``sh_entsize``, reads sections past the end of the file, aborts on relocation
types it does not implement and writes relocations wherever they say, killing the process."""
from __future__ import annotations

import json
import platform
import shutil
import struct
import subprocess
import sys
import textwrap

import pytest

import tecomp as tc
from tecomp import deploy
from tecomp.codegen import threadpool
from tecomp.codegen.elf import MACHINES, read_symbols
from tecomp.deploy.manifest import sha256
from tecomp.schedule.records import MeasureResult, Record, append_records
from tecomp.testing import hand_schedules as H
from tecomp.testing import workloads as W

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux") or platform.machine().lower() not in ("x86_64", "amd64"),
    reason="the crafted objects are x86-64 ELF")

_SH = struct.Struct("<IIQQQQIIQQ")


@pytest.fixture(scope="module")
def export_dir(tmp_path_factory):
    """A kernel export whose object has parallel loops (relocations to the runtime's entry)."""
    d = tmp_path_factory.mktemp("elf_export")
    log = str(d / "log.jsonl")
    mm = W.matmul(32, 24, 16)
    append_records(log, [Record(mm.dag.workload_key, str(tc.Target.parse("llvm")),
                                H.matmul_schedule(mm.dag).records(), {},
                                MeasureResult(costs=[1e-3]))])
    deploy.export(log, d / "out", [mm])
    return d / "out"


def _kernel_object(export_dir):
    m = json.loads((export_dir / deploy.MANIFEST).read_text())
    return (export_dir / m["kernels"][0]["object"]).read_bytes()


def _sections(obj: bytes) -> list:
    """``(header offset, header fields, name)`` of every section."""
    shoff, = struct.unpack_from("<Q", obj, 0x28)
    shnum, shstrndx = struct.unpack_from("<HH", obj, 0x3C)
    hdrs = [(shoff + 64 * i, _SH.unpack_from(obj, shoff + 64 * i)) for i in range(shnum)]
    strtab = obj[hdrs[shstrndx][1][4]:]
    return [(h, f, strtab[f[0]:strtab.index(b"\0", f[0])].decode()) for h, f in hdrs]


def _section(obj, name):
    return next((h, f) for h, f, n in _sections(obj) if n == name)


def _set(obj: bytes, fmt: str, off: int, value) -> bytes:
    b = bytearray(obj)
    struct.pack_into(fmt, b, off, value)
    return bytes(b)


def _first_rela(obj):
    _, f = _section(obj, ".rela.ltext")
    return f[4]  # r_offset at +0, r_info at +8


def _rela_entsize_0(o):
    return _set(o, "<Q", _section(o, ".rela.ltext")[0] + 56, 0)


def _code_past_eof(o):
    return _set(o, "<Q", _section(o, ".ltext")[0] + 32, 0x40000000)


def _bad_sh_name(o):
    return _set(o, "<I", _section(o, ".ltext")[0], 0xFFFFFF)


def _reloc_symbol_out_of_range(o):
    r_info, = struct.unpack_from("<Q", o, _first_rela(o) + 8)
    return _set(o, "<Q", _first_rela(o) + 8, (9999 << 32) | (r_info & 0xFFFFFFFF))


def _reloc_unknown_type(o):  # R_X86_64_GOTPCREL: implemented by RuntimeDyld, never written
    r_info, = struct.unpack_from("<Q", o, _first_rela(o) + 8)
    return _set(o, "<Q", _first_rela(o) + 8, (r_info >> 32 << 32) | 9)


def _reloc_past_section(o):
    size = _section(o, ".ltext")[1][5]
    return _set(o, "<Q", _first_rela(o), size - 4)


def _huge_shoff(o):
    return _set(o, "<Q", 0x28, 2 ** 63)


def _undefined_local(o):  # an import outside the symbol check (a local name LLVM would resolve)
    h, f = _section(o, ".symtab")
    for k in range(f[5] // 24):
        info, _, shndx = struct.unpack_from("<BBH", o, f[4] + 24 * k + 4)
        if k and shndx == 0:
            return _set(o, "<B", f[4] + 24 * k + 4, info & 0xF)
    raise AssertionError("no undefined symbol")


def _ifunc(o):  # a resolver RuntimeDyld would run at load
    h, f = _section(o, ".symtab")
    for k in range(f[5] // 24):
        info, = struct.unpack_from("<B", o, f[4] + 24 * k + 4)
        if info & 0xF == 2:
            return _set(o, "<B", f[4] + 24 * k + 4, (info & 0xF0) | 10)
    raise AssertionError("no function symbol")


def _aarch64(o):
    return _set(o, "<H", 0x12, 183)


MUTATIONS = {
    "rela sh_entsize 0": (_rela_entsize_0, "sh_entsize 0"),
    "code section past the end of the file": (_code_past_eof, "run past the end"),
    "sh_name outside the string table": (_bad_sh_name, "sh_name"),
    "relocation symbol index out of range": (_reloc_symbol_out_of_range, "symbol index 9999"),
    "unknown relocation type": (_reloc_unknown_type, "relocation type 9 is not one"),
    "relocation past its section": (_reloc_past_section, "past its section"),
    "huge e_shoff": (_huge_shoff, "e_shoff 9223372036854775808"),
    "truncated header": (lambda o: o[:40], "shorter than an ELF header"),
    "truncated file": (lambda o: o[:len(o) // 2], "inside the|past the end"),
    "undefined local symbol": (_undefined_local, "undefined symbol that is not a named global"),
    "indirect function": (_ifunc, "type 10"),
    "another machine": (_aarch64, "e_machine 183"),
}


def test_real_objects_pass_with_the_allowed_relocations(export_dir):
    """The exporter's own objects (a kernel and the thread pool) are accepted, and every one of
    their relocations is of an allowed type."""
    allowed = MACHINES[62].relocations
    for obj in (_kernel_object(export_dir), threadpool.object_code()):
        read_symbols(obj, "object")
        for _, f, name in _sections(obj):
            if f[1] == 4:
                for _, r_info, _ in struct.iter_unpack("<QQq", obj[f[4]:f[4] + f[5]]):
                    assert r_info & 0xFFFFFFFF in allowed, (name, r_info & 0xFFFFFFFF)


@pytest.mark.parametrize("kind", list(MUTATIONS))
def test_a_malformed_object_is_a_value_error_in_process(export_dir, tmp_path, kind):
    mutate, match = MUTATIONS[kind]
    good = _kernel_object(export_dir)
    bad = mutate(good)
    with pytest.raises(ValueError, match=f"malformed ELF object: .*({match})"):
        read_symbols(bad, "kernel")
    dst = tmp_path / "copy"
    shutil.copytree(export_dir, dst)
    m = json.loads((dst / deploy.MANIFEST).read_text())
    k = m["kernels"][0]
    (dst / k["object"]).write_bytes(bad)
    k["object_sha256"] = sha256(bad)  # whoever edits the object can update its hash
    (dst / deploy.MANIFEST).write_text(json.dumps(m))
    with pytest.raises(ValueError, match="malformed ELF object"):
        tc.load(dst)


def test_the_runtime_eh_frame_is_checked():
    """The thread pool's ``.eh_frame`` goes to the process's unwinder: its records' framing, and
    relocations that would rewrite it after the check, are refused."""
    rt = threadpool.object_code()
    h, f = _section(rt, ".eh_frame")
    with pytest.raises(ValueError, match="runs past the section"):
        read_symbols(_set(rt, "<I", f[4], 0x7FFFFFF0))
    with pytest.raises(ValueError, match="augmentation"):
        read_symbols(_set(rt, "<B", f[4] + 9, ord("P")))  # "zR" -> "PR": a personality
    _, rf = _section(rt, ".rela.eh_frame")
    with pytest.raises(ValueError, match="not an FDE's initial location"):
        read_symbols(_set(rt, "<Q", rf[4], 0))  # rewrite the first record's length


FUZZ = textwrap.dedent("""
    import random, struct, sys
    from tecomp.codegen import llvm_jit, objects, threadpool
    from tecomp.codegen.elf import read_symbols
    threadpool.runtime()  # its entry points resolve, as in a load
    accepted = rejected = 0
    for seed, obj in enumerate([open(sys.argv[1], "rb").read(), threadpool.object_code()]):
        shoff, = struct.unpack_from("<Q", obj, 0x28)
        shnum, = struct.unpack_from("<H", obj, 0x3C)
        code = [(o, o + s) for _, _, fl, _, o, s, *_ in (struct.unpack_from(
            "<IIQQQQIIQQ", obj, shoff + 64 * i) for i in range(shnum)) if fl & 4]
        where = [i for i in range(len(obj)) if not any(a <= i < b for a, b in code)]
        rng = random.Random(seed)
        for _ in range(int(sys.argv[2])):
            data = bytearray(obj)
            for p in rng.sample(where, rng.choice([1, 1, 2, 4])):
                data[p] = rng.choice([0, 0xFF, data[p] ^ (1 << rng.randrange(8)),
                                      rng.randrange(256)])
            try:
                syms = read_symbols(bytes(data), "fuzz")
            except ValueError:
                rejected += 1
                continue
            if objects.unresolved(sorted(syms.undefined)):
                continue  # the loaders refuse it by name
            llvm_jit.load_object(bytes(data), [])  # what passed is linked: it must not crash
            accepted += 1
    print("ok", accepted, rejected)
""")


def test_fuzzed_objects_never_crash_the_linker(export_dir, tmp_path):
    """Random byte changes outside the code of a kernel object and of the thread pool's: each is
    refused or links; the process (a child, so that a crash fails the test) never dies."""
    obj = tmp_path / "k.o"
    obj.write_bytes(_kernel_object(export_dir))
    r = subprocess.run([sys.executable, "-c", FUZZ, str(obj), "250"], capture_output=True,
                       text=True, timeout=600)
    assert r.returncode == 0 and r.stdout.startswith("ok"), (r.returncode, r.stderr[-2000:])
    accepted, rejected = map(int, r.stdout.split()[1:])
    assert rejected > 100 and accepted > 10, r.stdout
