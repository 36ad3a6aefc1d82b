"""The symbols of an ELF64 relocatable object, read as data (nothing is linked or run).

``tc.load`` checks an export's objects against its manifest before LLVM links them: LLVM aborts
the whole process on an undefined symbol it cannot resolve, and a manifest whose symbol names an
internal function (an outlined parallel body) would call it with the kernel's arguments.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass

__all__ = ["ObjectSymbols", "read_symbols", "is_elf", "object_imports"]

_SHT_SYMTAB = 2
_STB_GLOBAL, _STB_WEAK = 1, 2
_STT_FUNC = 2


@dataclass
class ObjectSymbols:
    """``defined``: global/weak functions the object defines (what may be called);
    ``undefined``: the symbols it needs from outside (what the process must resolve)."""

    defined: set
    undefined: set


def is_elf(data: bytes) -> bool:
    return data[:4] == b"\x7fELF"


def read_symbols(data: bytes, what: str = "object") -> ObjectSymbols:
    """The symbols of the ELF64 little-endian relocatable object ``data``; ValueError naming
    ``what`` when it is not one or is malformed."""
    if not is_elf(data) or len(data) < 64:
        raise ValueError(f"{what} is not an ELF object")
    if data[4] != 2 or data[5] != 1:
        raise ValueError(f"{what} is not a 64-bit little-endian ELF object")
    try:
        shoff, = struct.unpack_from("<Q", data, 0x28)
        shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
        if shentsize != 64 or shnum > 65535:
            raise ValueError("bad section header table")
        sections = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + 64 * i) for i in range(shnum)]
        defined, undefined = set(), set()
        for sh in sections:
            if sh[1] != _SHT_SYMTAB:
                continue
            off, size, link, entsize = sh[4], sh[5], sh[6], sh[9]
            if entsize != 24 or link >= shnum or off + size > len(data):
                raise ValueError("bad symbol table")
            stroff, strsize = sections[link][4], sections[link][5]
            if stroff + strsize > len(data):
                raise ValueError("bad string table")
            strtab = data[stroff:stroff + strsize]
            for i in range(1, size // 24):
                name_off, info, _other, shndx, _value, _size = struct.unpack_from(
                    "<IBBHQQ", data, off + 24 * i)
                end = strtab.find(b"\0", name_off)
                if name_off >= len(strtab) or end < 0:
                    raise ValueError("a symbol name outside the string table")
                name = strtab[name_off:end].decode("utf-8", "replace")
                bind, typ = info >> 4, info & 0xF
                if not name or bind not in (_STB_GLOBAL, _STB_WEAK):
                    continue
                if shndx == 0:
                    undefined.add(name)
                elif typ == _STT_FUNC:
                    defined.add(name)
    except struct.error:
        raise ValueError(f"{what} is a truncated or malformed ELF object") from None
    except ValueError as e:
        raise ValueError(f"{what} is a malformed ELF object: {e}") from None
    return ObjectSymbols(defined, undefined)


def object_imports(obj: bytes, declared) -> list:
    """The functions the object code ``obj`` calls outside itself (``KernelObject.imports``, what
    an export's manifest lists): its undefined symbols when it is an ELF object, else ``declared``
    (the functions its LLVM IR declares). The IR does not tell: LLVM lowers some intrinsics to
    library calls only when it emits machine code, and which depends on the CPU (``llvm.memset``
    of a row became a call to ``memset`` on an Intel AVX-512 host, ``expf`` on others)."""
    if is_elf(obj):
        return sorted(read_symbols(obj, "kernel object").undefined)
    return sorted(declared)
