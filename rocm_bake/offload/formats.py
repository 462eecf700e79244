"""Byte formats: ELF headers, clang-offload-bundler bundles and CCOB compressed bundles.

* uncompressed bundle: ``__CLANG_OFFLOAD_BUNDLE__`` (24 bytes), uint64 entry
  count, then per entry uint64 offset, uint64 size, uint64 id length and the
  id (``hipv4-amdgcn-amd-amdhsa--gfx950``, ``host-x86_64-unknown-linux-gnu``);
  offsets are relative to the bundle start, all integers little-endian.
* compressed (``--offload-compress``): ``CCOB``, uint16 version, uint16
  method (``llvm::compression::Format``: 0 zlib, 1 zstd), then v1: uint32
  uncompressed size; v2: uint32 total size, uint32 uncompressed size; v3:
  uint64 total size, uint64 uncompressed size; then a uint64 truncated MD5,
  then the compressed data, which inflates to an uncompressed bundle.

The parsers read through a *getter* ``get(offset, length) -> bytes`` relative
to the bundle start, so the same code serves a member read once front to back,
a stored member read in place, and the inflated prefix of a CCOB bundle. They
raise :class:`Corrupt`; whether that is an error depends on where the bytes
turn out to be (a magic inside a section's bundles, or one that occurs by
chance elsewhere in the file), which the scanner decides.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable
from typing import NamedTuple, Protocol

from rocm_bake.zstd import zstd_if_installed
from rocm_bake.offload.targets import BundleId, parse_bundle_id

BUNDLE_MAGIC = b"__CLANG_OFFLOAD_BUNDLE__"
CCOB_MAGIC = b"CCOB"
ELF_MAGIC = b"\x7fELF"
EM_AMDGPU = 224
SHT_NOBITS = 8
FATBIN_SECTION = b".hip_fatbin"

#: Sanity bounds: a header beyond these is corruption, not a real bundle.
MAX_ENTRIES = 4096
MAX_ID_LEN = 4096
MAX_SECTIONS = 1 << 16
#: The largest header a bundle can have within the bounds above.
MAX_HEADER = 32 + MAX_ENTRIES * (24 + MAX_ID_LEN)
#: Compressed bytes a CCOB may take before its inner header inflates: zstd
#: emits a block's output only when the whole block (<= 128 KiB) is in.
MAX_CCOB_PREFIX_INPUT = 4 << 20
#: Inflated output is discarded in pieces of this size (v1 end search).
_DRAIN = 1 << 20

#: ``llvm::compression::Format`` values stored in the CCOB method field.
CCOB_METHODS = {0: "zlib", 1: "zstd"}
#: CCOB header layouts: struct after the first 8 bytes, header size, has a total size.
CCOB_LAYOUTS = {1: ("<IQ", 20, False), 2: ("<IIQ", 24, True), 3: ("<QQQ", 32, True)}

Getter = Callable[[int, int], bytes]
_U64 = struct.Struct("<Q")
_ENTRY = struct.Struct("<QQQ")


class Corrupt(Exception):
    """Bytes that do not parse; ``offset`` is relative to the structure's start.

    ``need`` (when known) is how many bytes from the start the parse looked at
    to decide: past a section's end, the honest report is "truncated".
    """

    def __init__(self, problem: str, offset: int = 0, need: int | None = None) -> None:
        super().__init__(problem)
        self.problem, self.offset, self.need = problem, offset, need


# --------------------------------------------------------------------- ELF


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


# ----------------------------------------------------------------- bundles


class RawEntry(NamedTuple):
    offset: int
    size: int
    bundle_id: str
    parsed: BundleId


class BundleHeader(NamedTuple):
    """An uncompressed bundle's entries; ``extent`` is its length (header and payloads)."""

    entries: list[RawEntry]
    header_end: int
    extent: int


def read_bundle_header(get: Getter, avail: int, prefetch: int = 4096) -> BundleHeader:
    """Parse the bundle at relative offset 0; ``avail`` bytes exist from there.

    The first ``prefetch`` bytes are fetched at once (a header is usually a
    few hundred bytes: one read, not one per field). Entry ids are validated
    against the target grammar (``targets``): a malformed id is corruption,
    reported with the id. A :class:`Corrupt` raised here carries ``need``, the
    bytes the parse had to look at to decide, so a caller that learns the real
    limit later can tell truncation from corruption.
    """
    block = get(0, min(avail, prefetch))
    have = len(block)
    if avail < 32 or have < 32 or not block.startswith(BUNDLE_MAGIC):
        raise Corrupt("offload bundle truncated inside its header", need=32)
    count = _U64.unpack_from(block, 24)[0]
    if count == 0 or count > MAX_ENTRIES:
        raise Corrupt(f"offload bundle claims {count} entries (corrupt header)", need=32)
    pos = 32
    entries: list[RawEntry] = []
    for index in range(count):
        if pos + 24 > avail:
            raise Corrupt(f"offload bundle truncated in entry {index} of {count}", need=pos + 24)
        if pos + 24 > have:  # a header longer than the first block: fetch the rest
            block = block[:pos] + get(pos, max(prefetch, 24))
            have = len(block)
            if have < pos + 24:
                raise Corrupt(f"offload bundle truncated in entry {index} of {count}", need=pos + 24)
        offset, size, id_len = _ENTRY.unpack_from(block, pos)
        pos += 24
        if id_len == 0 or id_len > MAX_ID_LEN:
            raise Corrupt(f"offload bundle entry {index} has id length {id_len} (corrupt)", need=pos)
        if pos + id_len > avail:
            raise Corrupt(f"offload bundle truncated in entry {index}'s id", need=pos + id_len)
        if pos + id_len > have:
            block = block[:pos] + get(pos, max(prefetch, id_len))
            have = len(block)
            if have < pos + id_len:
                raise Corrupt(f"offload bundle truncated in entry {index}'s id", need=pos + id_len)
        raw_id = block[pos : pos + id_len]
        pos += id_len
        try:
            bundle_id = raw_id.decode("ascii")
        except UnicodeDecodeError:
            raise Corrupt(f"offload bundle entry {index} id is not ASCII (corrupt)", need=pos) from None
        try:
            parsed = parse_bundle_id(bundle_id)
        except ValueError as exc:
            raise Corrupt(f"offload bundle entry {index}: {exc}", need=pos) from None
        entries.append(RawEntry(offset, size, bundle_id, parsed))
    extent = max([pos] + [e.offset + e.size for e in entries])
    return BundleHeader(entries, pos, extent)


def check_entries_within(header: BundleHeader, limit: int) -> None:
    """Every entry's payload must lie within the ``limit`` bytes available."""
    for e in header.entries:
        if e.offset + e.size > limit:
            raise Corrupt(
                f"offload bundle entry {e.bundle_id!r} spans {e.offset:#x}+{e.size:#x}, past the "
                f"{limit:#x} bytes available (truncated)"
            )


# -------------------------------------------------------------------- CCOB


class CcobHeader(NamedTuple):
    version: int
    method: int
    header_size: int
    total_size: int | None
    uncompressed_size: int
    hash: int

    @property
    def label(self) -> str:
        return f"CCOB v{self.version} {CCOB_METHODS.get(self.method, f'method {self.method}')}"


def ccob_version(head: bytes) -> int:
    if len(head) < 8:
        raise Corrupt("compressed offload bundle (CCOB) truncated inside its header")
    return int(struct.unpack_from("<H", head, 4)[0])


def parse_ccob_header(head: bytes, avail: int) -> CcobHeader:
    """A CCOB header of a known version (check :func:`ccob_version` first)."""
    version, method = struct.unpack_from("<HH", head, 4)
    fmt, header_size, has_total = CCOB_LAYOUTS[version]
    if len(head) < header_size or avail < header_size:
        raise Corrupt(f"compressed offload bundle (CCOB v{version}) header truncated")
    fields = struct.unpack_from(fmt, head, 8)
    total = fields[0] if has_total else None
    uncompressed, digest = fields[-2], fields[-1]
    if total is not None and total < header_size:
        raise Corrupt(f"compressed offload bundle (CCOB v{version}) claims {total} bytes, less than its header")
    if total is not None and total > avail:
        raise Corrupt(ccob_truncated(version, total, avail))
    if uncompressed < 32:
        raise Corrupt(
            f"compressed offload bundle (CCOB v{version}) inflates to {uncompressed} bytes, "
            f"too few for an offload bundle (corrupt)"
        )
    return CcobHeader(version, method, header_size, total, uncompressed, digest)


def ccob_truncated(version: int, total: int, avail: int) -> str:
    return (
        f"compressed offload bundle (CCOB v{version}) claims {total} bytes but only "
        f"{avail} are available (truncated)"
    )


class Inflater(Protocol):
    """zlib's and zstd's decompressors behind one face, output capped per call."""

    def feed(self, data: bytes, max_out: int) -> bytes: ...
    def has_output(self) -> bool: ...
    @property
    def eof(self) -> bool: ...
    @property
    def unused(self) -> int: ...


class _ZlibInflater:
    def __init__(self) -> None:
        self._d = zlib.decompressobj()

    def feed(self, data: bytes, max_out: int) -> bytes:
        tail = self._d.unconsumed_tail
        try:
            return self._d.decompress(tail + data if tail else data, max(max_out, 1))
        except zlib.error as exc:
            raise Corrupt(f"compressed data is corrupt ({exc})") from None

    def has_output(self) -> bool:
        return bool(self._d.unconsumed_tail) and not self._d.eof

    @property
    def eof(self) -> bool:
        return self._d.eof

    @property
    def unused(self) -> int:
        return len(self._d.unused_data)


class _ZstdInflater:
    def __init__(self) -> None:
        zstd = _ZSTD
        self._error = zstd.ZstdError
        self._d = zstd.ZstdDecompressor()

    def feed(self, data: bytes, max_out: int) -> bytes:
        if self._d.eof:
            return b""
        try:
            return self._d.decompress(data, max(max_out, 1))
        except (self._error, EOFError) as exc:
            raise Corrupt(f"compressed data is corrupt ({exc})") from None

    def has_output(self) -> bool:
        return not self._d.needs_input and not self._d.eof

    @property
    def eof(self) -> bool:
        return self._d.eof

    @property
    def unused(self) -> int:
        return len(self._d.unused_data)


def first_read(method: int) -> int:
    """Compressed bytes to read first: zstd emits nothing until a whole block (<= 128 KiB) is in."""
    return (128 << 10) + 64 if CCOB_METHODS.get(method) == "zstd" else 16 << 10


#: Imported with this module (2 ms), not inside the first scan that meets a zstd bundle; the one lookup
#: the registry's zstd layers use too. None only in the ``rocm_torch`` checker's copy on a Python without it.
_ZSTD = zstd_if_installed()


def inflater(method: int) -> Inflater | None:
    """A fresh decompressor for a CCOB method; None for a method rocm-bake does not know (or zstd, where absent)."""
    name = CCOB_METHODS.get(method)
    if name == "zlib":
        return _ZlibInflater()
    if name == "zstd" and _ZSTD is not None:
        return _ZstdInflater()
    return None


class InflatedPrefix:
    """The first bytes a CCOB's data inflates to, produced only as far as they are asked for.

    ``read(offset, length)`` gives compressed bytes from the data start (a
    forward-only reader may keep what it hands out until the caller releases
    it); output beyond what the inner header needs is never produced.
    ``step`` is the compressed bytes per read, doubling up to 256 KiB: a zlib
    header inflates from the first few KB, and a forward reader keeps what it
    hands out.
    """

    __slots__ = ("read", "data_len", "inflater", "out", "fed", "step")

    def __init__(self, read: Getter, data_len: int, inflater: Inflater, step: int = 16 << 10) -> None:
        self.read, self.data_len, self.inflater, self.step = read, data_len, inflater, step
        self.out, self.fed = bytearray(), 0

    def get(self, offset: int, length: int) -> bytes:
        want = offset + length
        if not self.fed:  # first call: one read, one inflate (the common, whole story)
            chunk = self.read(0, min(self.step, self.data_len))
            self.fed = len(chunk)
            self.out += self.inflater.feed(chunk, want)
            if len(self.out) >= want:
                return bytes(self.out[offset:want])
        while len(self.out) < want and not self.inflater.eof:
            if self.inflater.has_output():
                self.out += self.inflater.feed(b"", want - len(self.out))
                continue
            if self.fed >= min(self.data_len, MAX_CCOB_PREFIX_INPUT):
                if self.fed >= self.data_len:
                    break
                raise Corrupt(
                    f"inner bundle header not found in the first {MAX_CCOB_PREFIX_INPUT >> 20} MiB "
                    f"of compressed data (corrupt)"
                )
            chunk = self.read(self.fed, min(self.step, self.data_len - self.fed))
            if not chunk:
                break
            self.step = min(self.step * 2, 256 << 10)
            self.fed += len(chunk)
            self.out += self.inflater.feed(chunk, want - len(self.out))
        return bytes(self.out[offset:want])

    def drain(self) -> int:
        """Inflate (and discard) to the end of the stream; the compressed length consumed."""
        while not self.inflater.eof:
            if self.inflater.has_output():
                self.inflater.feed(b"", _DRAIN)
                continue
            if self.fed >= self.data_len:
                raise Corrupt("compressed data ends before its stream does (truncated)")
            chunk = self.read(self.fed, min(_DRAIN, self.data_len - self.fed))
            if not chunk:
                raise Corrupt("compressed data ends before its stream does (truncated)")
            self.fed += len(chunk)
            self.inflater.feed(chunk, _DRAIN)
        return self.fed - self.inflater.unused
