"""ELF file and section headers: just enough to find a file's ``.hip_fatbin`` section and its GPU.

32 or 64 bit, either byte order; extended section numbering (``SHN_XINDEX``)
honoured. Bad bytes raise :class:`~rocm_bake.offload.corrupt.Corrupt`.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from rocm_bake.offload.corrupt import Corrupt

ELF_MAGIC = b"\x7fELF"
EM_AMDGPU = 224
SHT_NOBITS = 8
FATBIN_SECTION = b".hip_fatbin"
#: Sanity bound: a section count beyond this is corruption, not a real file.
MAX_SECTIONS = 1 << 16


class ElfHeader(NamedTuple):
    elf64: bool
    little: bool
    machine: int
    flags: int
    shoff: int
    shentsize: int
    shnum: int
    shstrndx: int


class SectionHeader(NamedTuple):
    name_offset: int
    type: int
    offset: int
    size: int
    link: int


def elf_header(head: bytes) -> ElfHeader:
    """The fields of an ELF file header (32 or 64 bit, either byte order)."""
    if len(head) < 52:
        raise Corrupt("ELF header truncated")
    klass, data = head[4], head[5]
    if klass not in (1, 2) or data not in (1, 2):
        raise Corrupt(f"unsupported ELF class {klass} / data encoding {data}")
    e = "<" if data == 1 else ">"
    if klass == 2:
        if len(head) < 64:
            raise Corrupt("ELF64 header truncated")
        machine = struct.unpack_from(e + "H", head, 0x12)[0]
        shoff = struct.unpack_from(e + "Q", head, 0x28)[0]
        flags = struct.unpack_from(e + "I", head, 0x30)[0]
        shentsize, shnum, shstrndx = struct.unpack_from(e + "HHH", head, 0x3A)
    else:
        machine = struct.unpack_from(e + "H", head, 0x12)[0]
        shoff = struct.unpack_from(e + "I", head, 0x20)[0]
        flags = struct.unpack_from(e + "I", head, 0x24)[0]
        shentsize, shnum, shstrndx = struct.unpack_from(e + "HHH", head, 0x2E)
    return ElfHeader(
        elf64=klass == 2, little=data == 1, machine=machine, flags=flags,
        shoff=shoff, shentsize=shentsize, shnum=shnum, shstrndx=shstrndx,
    )


def section_entry_size(hdr: ElfHeader) -> int:
    """``e_shentsize``, checked against the smallest real section header."""
    want = 64 if hdr.elf64 else 40
    if hdr.shentsize < want:
        raise Corrupt(f"section header size {hdr.shentsize} is smaller than {want}")
    return hdr.shentsize


def section_table_span(hdr: ElfHeader, member_size: int) -> int:
    """Bytes to read at ``e_shoff``: the table, or (extended numbering) as much as it may be."""
    entsize = section_entry_size(hdr)
    if hdr.shnum:
        return hdr.shnum * entsize
    return min(MAX_SECTIONS * entsize, max(member_size - hdr.shoff, entsize))


def parse_section_header(hdr: ElfHeader, raw: bytes, pos: int = 0) -> SectionHeader:
    e = "<" if hdr.little else ">"
    if hdr.elf64:
        name, stype, _flags, _addr, off, size, link = struct.unpack_from(e + "IIQQQQI", raw, pos)
    else:
        name, stype, _flags, _addr, off, size, link = struct.unpack_from(e + "IIIIIII", raw, pos)
    return SectionHeader(name, stype, off, size, link)


def section_table(hdr: ElfHeader, table: bytes) -> tuple[list[SectionHeader], int]:
    """Every section header and the index of the name table (SHN_XINDEX escapes honoured)."""
    entsize = section_entry_size(hdr)
    if len(table) < entsize:
        raise Corrupt("section headers truncated", hdr.shoff)
    first = parse_section_header(hdr, table)
    shnum = hdr.shnum or first.size
    shstrndx = first.link if hdr.shstrndx == 0xFFFF else hdr.shstrndx
    if shnum > MAX_SECTIONS:
        raise Corrupt(f"implausible section count {shnum}", hdr.shoff)
    if len(table) < shnum * entsize:
        raise Corrupt(f"section headers truncated ({shnum} expected)", hdr.shoff)
    if shstrndx >= shnum:
        raise Corrupt(f"section name table index {shstrndx} out of range", hdr.shoff)
    return [parse_section_header(hdr, table, i * entsize) for i in range(shnum)], shstrndx
