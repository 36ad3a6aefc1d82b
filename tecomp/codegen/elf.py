"""ELF64 relocatable objects read as data (nothing is linked or run): their symbols, and a check of
their whole structure before LLVM's RuntimeDyld links one.

``tc.load`` checks an export's objects against its manifest before LLVM links them: LLVM aborts
the whole process on an undefined symbol it cannot resolve, and a manifest whose symbol names an
internal function (an outlined parallel body) would call it with the kernel's arguments.

The manifest's SHA-256 of a file only tells corruption: whoever edits an object can update its
hash. RuntimeDyld trusts the object's structure (it divides by ``sh_entsize``, reads sections past
the end of the file, aborts on a relocation type it does not implement, writes a relocation at any
offset), so :func:`read_symbols` first checks every header, section, symbol and relocation the
way the exporter writes them and raises ``ValueError`` for anything else.
"""
from __future__ import annotations

import platform
import struct
from dataclasses import dataclass

__all__ = ["ObjectSymbols", "read_symbols", "is_elf", "object_imports", "MACHINES"]

_SHT_NULL, _SHT_PROGBITS, _SHT_SYMTAB, _SHT_STRTAB, _SHT_RELA, _SHT_NOBITS = 0, 1, 2, 3, 4, 8
_SHT_X86_64_UNWIND = 0x70000001
_SHF_WRITE, _SHF_ALLOC, _SHF_EXEC, _SHF_MERGE, _SHF_STRINGS, _SHF_INFO_LINK = 1, 2, 4, 16, 32, 64
_SHF_X86_64_LARGE = 0x10000000
_SHN_UNDEF, _SHN_LORESERVE, _SHN_ABS = 0, 0xFF00, 0xFFF1
_STB_LOCAL, _STB_GLOBAL, _STB_WEAK = 0, 1, 2
_STT_NOTYPE, _STT_OBJECT, _STT_FUNC, _STT_SECTION, _STT_FILE = 0, 1, 2, 3, 4
_SHDR = struct.Struct("<IIQQQQIIQQ")  # name type flags addr offset size link info addralign entsize
_SYM = struct.Struct("<IBBHQQ")  # name info other shndx value size
_RELA = struct.Struct("<QQq")  # offset info addend
#: the most sections, and the most bytes of NOBITS sections (allocated at load), an object may have
MAX_SECTIONS, MAX_NOBITS = 4096, 1 << 26
_BASE_FLAGS = _SHF_WRITE | _SHF_ALLOC | _SHF_EXEC | _SHF_MERGE | _SHF_STRINGS | _SHF_INFO_LINK


@dataclass(frozen=True)
class Machine:
    """What an object of one ``e_machine`` may hold: its relocation types (type -> name, bytes
    written at ``r_offset``), its section types and section flags besides the common ones."""

    name: str
    relocations: dict
    section_types: frozenset
    flags: int


#: The machines whose objects load, and the relocation types allowed: those LLVM's RuntimeDyldELF
#: implements that the exporter (the JIT code model: large on both) was seen to emit, in every
#: kernel object the test suite compiles and in the thread pool's. x86-64: absolute 64-bit (code,
#: constants, calls through a register), PC64 (.eh_frame). AArch64 (cross-compiled with LLVM):
#: MOVW_UABS_G0..G3 (addresses), CALL26/JUMP26 (calls, through RuntimeDyld's stubs), the GOT
#: pair, ABS64/PREL64/PREL32 (data, .eh_frame). Anything else is refused, not linked.
MACHINES = {
    62: Machine("x86-64", {1: ("R_X86_64_64", 8), 24: ("R_X86_64_PC64", 8)},
                frozenset({_SHT_X86_64_UNWIND}), _BASE_FLAGS | _SHF_X86_64_LARGE),
    183: Machine("AArch64", {257: ("R_AARCH64_ABS64", 8), 260: ("R_AARCH64_PREL64", 8),
                             261: ("R_AARCH64_PREL32", 4), 264: ("R_AARCH64_MOVW_UABS_G0_NC", 4),
                             266: ("R_AARCH64_MOVW_UABS_G1_NC", 4),
                             268: ("R_AARCH64_MOVW_UABS_G2_NC", 4),
                             269: ("R_AARCH64_MOVW_UABS_G3", 4), 282: ("R_AARCH64_JUMP26", 4),
                             283: ("R_AARCH64_CALL26", 4), 311: ("R_AARCH64_ADR_GOT_PAGE", 4),
                             312: ("R_AARCH64_LD64_GOT_LO12_NC", 4)},
                 frozenset(), _BASE_FLAGS),
}
_HOST_MACHINE = {"x86_64": 62, "amd64": 62, "aarch64": 183, "arm64": 183}
_BASE_TYPES = frozenset({_SHT_PROGBITS, _SHT_SYMTAB, _SHT_STRTAB, _SHT_RELA, _SHT_NOBITS})
_LOADED = frozenset({_SHT_PROGBITS, _SHT_NOBITS, _SHT_X86_64_UNWIND})  # what RuntimeDyld copies


class _Bad(ValueError):
    pass


def _need(cond, msg: str) -> None:
    if not cond:
        raise _Bad(msg)


@dataclass
class ObjectSymbols:
    """``defined``: global/weak functions the object defines (what may be called);
    ``undefined``: the symbols it needs from outside (what the process must resolve)."""

    defined: set
    undefined: set


def is_elf(data: bytes) -> bool:
    """Whether ``data`` starts with the ELF magic number."""
    return data[:4] == b"\x7fELF"


def _header(data: bytes, for_load: bool) -> tuple:
    """``(machine, shoff, shnum, shstrndx)`` of the ELF header, checked."""
    _need(len(data) >= 64, f"{len(data)} bytes, shorter than an ELF header")
    _need(data[4] == 2 and data[5] == 1, "not a 64-bit little-endian object")
    _need(data[6] == 1 and data[7] in (0, 3) and data[8] == 0, "unknown ELF version or OS ABI")
    (e_type, e_machine, e_version, _entry, e_phoff, e_shoff, _flags, e_ehsize, _phentsize, e_phnum,
     e_shentsize, e_shnum, e_shstrndx) = struct.unpack_from("<HHIQQQIHHHHHH", data, 16)
    _need(e_type == 1, f"e_type {e_type} is not a relocatable object")
    _need(e_version == 1 and e_ehsize == 64, "bad e_version or e_ehsize")
    _need(e_phoff == 0 and e_phnum == 0, "a relocatable object with program headers")
    if for_load:
        _need(e_machine in MACHINES, f"e_machine {e_machine} is not one this tecomp loads "
                                     f"({', '.join(m.name for m in MACHINES.values())})")
        here = _HOST_MACHINE.get(platform.machine().lower())
        _need(e_machine == here, f"e_machine {e_machine} ({MACHINES[e_machine].name}) is not "
                                 f"this machine's")
    _need(e_shentsize == _SHDR.size, f"e_shentsize {e_shentsize} is not {_SHDR.size}")
    _need(1 <= e_shnum <= MAX_SECTIONS, f"e_shnum {e_shnum} is not in [1, {MAX_SECTIONS}]")
    _need(64 <= e_shoff and e_shoff % 8 == 0 and e_shoff + e_shnum * _SHDR.size <= len(data),
          f"the section header table (e_shoff {e_shoff}, {e_shnum} entries) is not aligned "
          f"inside the {len(data)}-byte file")
    _need(0 < e_shstrndx < e_shnum, f"e_shstrndx {e_shstrndx} is not a section")
    return e_machine, e_shoff, e_shnum, e_shstrndx


def _strtab(data: bytes, sh: tuple, what: str) -> bytes:
    _need(sh[1] == _SHT_STRTAB, f"{what} is not a string table")
    tab = data[sh[4]:sh[4] + sh[5]]
    _need(len(tab) >= 1 and tab[0] == 0 and tab[-1] == 0,
          f"{what} does not start and end with a NUL byte")
    return tab


def _name(tab: bytes, off: int, what: str) -> bytes:
    _need(off < len(tab), f"{what}: name offset {off} outside its string table")
    return tab[off:tab.index(b"\0", off)]


def _sections(data: bytes, machine: Machine | None, shoff: int, shnum: int, shstrndx: int):
    """The section headers, each checked on its own; and the section-name string table."""
    shs = [_SHDR.unpack_from(data, shoff + _SHDR.size * i) for i in range(shnum)]
    _need(not any(shs[0]), "section 0 is not a null section")
    types = _BASE_TYPES | (machine.section_types if machine else frozenset({_SHT_X86_64_UNWIND}))
    flags = machine.flags if machine else _BASE_FLAGS | _SHF_X86_64_LARGE
    nobits = 0
    for i, (_nm, typ, fl, addr, off, size, link, info, align, _ent) in enumerate(shs[1:], 1):
        w = f"section {i}"
        _need(typ in types, f"{w}: type {typ:#x} is not one the exporter writes")
        _need(fl & ~flags == 0, f"{w}: flags {fl:#x} are not ones the exporter writes")
        _need(addr == 0, f"{w}: sh_addr {addr:#x} in a relocatable object")
        _need(align == 0 or (align & (align - 1) == 0 and align <= 4096),
              f"{w}: sh_addralign {align} is not a power of two up to 4096")
        _need(link < shnum and info < shnum or typ == _SHT_SYMTAB,
              f"{w}: sh_link {link} or sh_info {info} is not a section")
        if typ == _SHT_NOBITS:
            nobits += size
            _need(nobits <= MAX_NOBITS, f"{w}: more than {MAX_NOBITS} bytes of NOBITS sections")
        else:
            _need(off + size <= len(data), f"{w}: {size} bytes at offset {off} run past the end "
                                           f"of the {len(data)}-byte file")
    shstr = _strtab(data, shs[shstrndx], "the section-name table (e_shstrndx)")
    names = [_name(shstr, sh[0], f"section {i}: sh_name") for i, sh in enumerate(shs)]
    return shs, names


def _symbols(data: bytes, shs: list, names: list) -> tuple:
    """``(symbol index, its symbols, their names)``: the one symbol table, checked."""
    tables = [i for i, sh in enumerate(shs) if sh[1] == _SHT_SYMTAB]
    _need(len(tables) == 1, f"{len(tables)} symbol tables, not one")
    idx = tables[0]
    _nm, _t, _f, _a, off, size, link, info, _al, entsize = shs[idx]
    _need(entsize == _SYM.size and size % _SYM.size == 0 and off % 8 == 0 and size > 0,
          f"the symbol table's sh_entsize {entsize} or size {size} is not a whole number of "
          f"{_SYM.size}-byte entries, or its offset {off} is not aligned")
    _need(0 < link < len(shs), f"the symbol table's string table sh_link {link} is not a section")
    strtab = _strtab(data, shs[link], "the symbol string table")
    syms = list(_SYM.iter_unpack(data[off:off + size]))
    _need(info <= len(syms), f"the symbol table's sh_info {info} exceeds its {len(syms)} entries")
    _need(not any(syms[0]), "symbol 0 is not the null symbol")
    sym_names = [b""]
    for i, (name, st_info, _other, shndx, value, sz) in enumerate(syms[1:], 1):
        w = f"symbol {i}"
        nm = _name(strtab, name, w)
        sym_names.append(nm)
        bind, typ = st_info >> 4, st_info & 0xF
        _need(bind in (_STB_LOCAL, _STB_GLOBAL, _STB_WEAK), f"{w}: binding {bind}")
        _need(typ in (_STT_NOTYPE, _STT_OBJECT, _STT_FUNC, _STT_SECTION, _STT_FILE),
              f"{w}: type {typ} (TLS, common and indirect functions are not written)")
        if typ == _STT_FILE or shndx == _SHN_ABS:  # the source file's name, and nothing else
            _need(typ == _STT_FILE and shndx == _SHN_ABS and bind == _STB_LOCAL,
                  f"{w}: an absolute symbol that is not a local file name")
        elif shndx == _SHN_UNDEF:  # resolved by name in this process: the imports
            _need(bind != _STB_LOCAL and nm and typ in (_STT_NOTYPE, _STT_OBJECT, _STT_FUNC),
                  f"{w}: an undefined symbol that is not a named global")
        else:
            _need(shndx < len(shs) and shndx < _SHN_LORESERVE, f"{w}: st_shndx {shndx:#x} is not "
                                                               f"a section")
            sec = shs[shndx]
            _need(sec[1] in _LOADED and sec[2] & _SHF_ALLOC,
                  f"{w}: defined in section {shndx}, which is not loaded")
            _need(value + sz <= sec[5], f"{w}: value {value:#x} size {sz} outside its section "
                                        f"{names[shndx].decode('utf-8', 'replace')!r}")
    return idx, syms, sym_names


def _relocations(data: bytes, machine: Machine | None, shs: list, symtab: int, syms: list,
                 frames: dict) -> None:
    """Every relocation: the symbol it names, its type and the bytes it writes in its section (in
    ``.eh_frame``, ``frames[section]``: only an FDE's initial location, not the records' framing
    that was checked)."""
    for i, (_nm, typ, _f, _a, off, size, link, info, _al, entsize) in enumerate(shs):
        if typ != _SHT_RELA:
            continue
        w = f"relocation section {i}"
        _need(entsize == _RELA.size and size % _RELA.size == 0 and off % 8 == 0,
              f"{w}: sh_entsize {entsize} or size {size} is not a whole number of "
              f"{_RELA.size}-byte entries, or its offset {off} is not aligned")
        _need(link == symtab, f"{w}: sh_link {link} is not the symbol table")
        _need(0 < info, f"{w}: sh_info {info} is not a section")
        target = shs[info]
        _need(target[1] in _LOADED and target[1] != _SHT_NOBITS and target[2] & _SHF_ALLOC,
              f"{w}: relocates section {info}, which is not loaded code or data")
        for k, (r_off, r_info, _add) in enumerate(_RELA.iter_unpack(data[off:off + size])):
            sym, rtype = r_info >> 32, r_info & 0xFFFFFFFF
            _need(0 < sym < len(syms), f"{w}: entry {k}: symbol index {sym} is not a symbol")
            _need(syms[sym][1] & 0xF != _STT_FILE, f"{w}: entry {k}: names a file symbol")
            if machine is None:
                continue
            _need(rtype in machine.relocations, f"{w}: entry {k}: relocation type {rtype} is not "
                                                f"one tecomp loads on {machine.name}")
            width = machine.relocations[rtype][1]
            _need(r_off + width <= target[5], f"{w}: entry {k}: writes {width} bytes at offset "
                                              f"{r_off:#x}, past its section's {target[5]}")
            _need(info not in frames or frames[info].get(r_off) == width,
                  f"{w}: entry {k}: writes .eh_frame at {r_off:#x}, not an FDE's initial location")


_WIDTH = {0x0: 8, 0x3: 4, 0x4: 8, 0xB: 4, 0xC: 8}  # absptr, udata4, udata8, sdata4, sdata8


def _uleb(sec: bytes, p: int, end: int) -> int:
    """The offset after the LEB128 number at ``p`` (which must end before ``end``)."""
    while True:
        _need(p < end, ".eh_frame: a LEB128 number runs past its record")
        if not sec[p] & 0x80:
            return p + 1
        p += 1


def _cie(sec: bytes, p: int, end: int) -> int:
    """The pointer encoding of the CIE whose body (after its id) is ``sec[p:end]``."""
    _need(p < end and sec[p] in (1, 3), ".eh_frame: a CIE of an unknown version")
    version = sec[p]
    z = sec.find(b"\0", p + 1, end)
    _need(z >= 0, ".eh_frame: a CIE's augmentation string runs past its record")
    aug = sec[p + 1:z]
    _need(aug in (b"", b"zR"), f".eh_frame: CIE augmentation {aug[:8]!r} is not 'zR'")
    q = _uleb(sec, _uleb(sec, z + 1, end), end)  # code, data alignment factors
    q = q + 1 if version == 1 else _uleb(sec, q, end)  # return address register
    if not aug:
        return 0x0
    q = _uleb(sec, q, end)  # augmentation data length
    _need(q < end, ".eh_frame: a CIE lacks its pointer encoding")
    enc = sec[q]
    _need(enc & 0xF in _WIDTH and enc & 0xF0 in (0x00, 0x10),
         f".eh_frame: pointer encoding {enc:#x} is not a plain or PC-relative one")
    return enc


def _check_eh_frame(sec: bytes) -> dict:
    """Check the records of the ``.eh_frame`` contents ``sec``.

    RuntimeDyld registers a loaded ``.eh_frame`` with the process's unwinder (libgcc's
    ``__register_frame``), which walks its records whenever anything in the process unwinds: a
    record length that runs past the section, an FDE pointing at no CIE, or a pointer encoding that
    reads through memory (``DW_EH_PE_indirect``, a personality routine) would make it read out of
    bounds. LLVM writes CIEs with augmentation ``zR`` (or none) and plain or PC-relative pointers;
    nothing else is accepted. The call-frame instructions are read within their records, by the
    unwinder, only when it unwinds through the object's code.

    Returns
    -------
    dict of int to int
        The offset of each FDE's initial location (what a relocation may write) to its width.
    """
    cies: dict = {}  # offset of a CIE -> its pointer encoding
    pc_fields: dict = {}
    p = 0
    while p < len(sec):
        _need(p + 4 <= len(sec), ".eh_frame: a record's length runs past the section")
        length, = struct.unpack_from("<I", sec, p)
        if length == 0:  # the terminator: the last word
            _need(p + 4 == len(sec), ".eh_frame: records after the terminator")
            break
        end = p + 4 + length
        _need(length >= 4 and length != 0xFFFFFFFF and end <= len(sec),
             f".eh_frame: a record of length {length:#x} at {p:#x} runs past the section")
        cie_delta, = struct.unpack_from("<I", sec, p + 4)
        if cie_delta == 0:
            cies[p] = _cie(sec, p + 8, end)
        else:
            enc = cies.get(p + 4 - cie_delta)
            _need(enc is not None, f".eh_frame: the FDE at {p:#x} points at no CIE before it")
            width = _WIDTH[enc & 0xF]
            _need(8 + 2 * width <= length + 4, f".eh_frame: the FDE at {p:#x} is too short")
            pc_fields[p + 8] = width
        p = end
    return pc_fields


def read_symbols(data: bytes, what: str = "object", for_load: bool = True) -> ObjectSymbols:
    """The symbols of the ELF64 little-endian relocatable object ``data``, once its whole structure
    is checked.

    Parameters
    ----------
    data : bytes
        The object file.
    what : str
        What it is, for the messages.
    for_load : bool
        Also require this host's machine and only the relocation types of :data:`MACHINES`
        (what LLVM links here); ``False`` for the exporter's own objects.

    Returns
    -------
    ObjectSymbols

    Raises
    ------
    ValueError
        ``"{what}: malformed ELF object: ..."`` naming the first problem (or not an ELF object).
    """
    if not is_elf(data):
        raise ValueError(f"{what} is not an ELF object")
    try:
        e_machine, shoff, shnum, shstrndx = _header(data, for_load)
        machine = MACHINES[e_machine] if for_load else None
        shs, names = _sections(data, machine, shoff, shnum, shstrndx)
        symtab, syms, sym_names = _symbols(data, shs, names)
        frames = {}
        for i, (sh, name) in enumerate(zip(shs, names)):
            if name == b".eh_frame":  # RuntimeDyld registers it with the unwinder, which walks it
                _need(sh[1] != _SHT_NOBITS and sh[2] & _SHF_ALLOC, ".eh_frame is not loaded data")
                frames[i] = _check_eh_frame(data[sh[4]:sh[4] + sh[5]])
        _relocations(data, machine, shs, symtab, syms, frames)
    except (_Bad, struct.error) as e:
        raise ValueError(f"{what}: malformed ELF object: {e}") from None
    defined, undefined = set(), set()
    for (_n, info, _o, shndx, _v, _s), nm in zip(syms[1:], sym_names[1:]):
        if nm and info >> 4 in (_STB_GLOBAL, _STB_WEAK):
            name = nm.decode("utf-8", "replace")
            if shndx == _SHN_UNDEF:
                undefined.add(name)
            elif info & 0xF == _STT_FUNC:
                defined.add(name)
    return ObjectSymbols(defined, undefined)


def object_imports(obj: bytes, declared) -> list:
    """The functions the object code ``obj`` calls outside itself (``KernelObject.imports``, what
    an export's manifest lists): its undefined symbols when it is an ELF object, else ``declared``
    (the functions its LLVM IR declares). The IR does not tell: LLVM lowers some intrinsics to
    library calls only when it emits machine code, and which depends on the CPU (``llvm.memset``
    of a row became a call to ``memset`` on an Intel AVX-512 host, ``expf`` on others)."""
    if is_elf(obj):
        return sorted(read_symbols(obj, "kernel object", for_load=False).undefined)
    return sorted(declared)
