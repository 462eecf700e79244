"""Which GPUs a wheel's device code is for, read from its offload bundles.

The spec: "A downloaded asset does not say which GPU it is for ... torch-…
whl is the same string for gfx950 and gfx1201, and the two files differ by
about 40MB of device code." So the only trustworthy answer is inside the
binaries. This module opens a wheel with ``zipfile`` and reads each ELF
member in place (never extracted to disk), finds its ``.hip_fatbin``
section(s) through the real ELF section headers, and parses the
clang-offload-bundler containers found there:

* uncompressed: ``__CLANG_OFFLOAD_BUNDLE__`` (24 bytes), uint64 entry count,
  then per entry uint64 offset, uint64 size, uint64 id length and the id
  (``hipv4-amdgcn-amd-amdhsa--gfx950``, ``host-x86_64-unknown-linux-gnu``);
  offsets are relative to the bundle start, all integers little-endian.
* compressed (``--offload-compress``): ``CCOB``, uint16 version, uint16
  method (``llvm::compression::Format``: 0 zlib, 1 zstd), then v1: uint32
  uncompressed size; v2: uint32 total size, uint32 uncompressed size; v3:
  uint64 total size, uint64 uncompressed size; then a uint64 truncated MD5,
  then the compressed data, which inflates to an uncompressed bundle.

A HIP fat binary may hold several bundles back to back (one per linked
translation unit, each aligned), so a section is scanned for every magic.
Stand-alone AMDGPU code objects (``e_machine`` 224, e.g. AITER's ``.co``
kernels) are reported from their ``e_flags`` processor field.

Targets are reported as bare processors (``gfx90a`` for
``gfx90a:xnack+``); the target-id features are kept in ``notes``.
"""

from __future__ import annotations

import importlib.util
import shutil
import struct
import subprocess
import threading
import zipfile
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Literal

from pydantic import BaseModel

from rocm_bake.arch import validate_arch
from rocm_bake.errors import RocmBakeError

BUNDLE_MAGIC = b"__CLANG_OFFLOAD_BUNDLE__"
CCOB_MAGIC = b"CCOB"
ELF_MAGIC = b"\x7fELF"
EM_AMDGPU = 224
SHT_NOBITS = 8

#: Sanity bounds: a header beyond these is corruption, not a real bundle.
MAX_ENTRIES = 4096
MAX_ID_LEN = 4096
_CHUNK = 1 << 20
#: Members up to this size are read into memory whole (never to disk).
IN_MEMORY_LIMIT = 64 << 20

#: ``llvm::compression::Format`` values stored in the CCOB method field.
CCOB_METHODS = {0: "zlib", 1: "zstd"}

#: EF_AMDGPU_MACH values (``e_flags & 0xff``) from LLVM's BinaryFormat/ELF.h.
AMDGPU_MACH: dict[int, str] = {
    0x02C: "gfx900", 0x02D: "gfx902", 0x02E: "gfx904", 0x02F: "gfx906",
    0x030: "gfx908", 0x031: "gfx909", 0x032: "gfx90c", 0x033: "gfx1010",
    0x034: "gfx1011", 0x035: "gfx1012", 0x036: "gfx1030", 0x037: "gfx1031",
    0x038: "gfx1032", 0x039: "gfx1033", 0x03D: "gfx1035", 0x03E: "gfx1034",
    0x03F: "gfx90a", 0x040: "gfx940", 0x041: "gfx1100", 0x042: "gfx1013",
    0x043: "gfx1150", 0x044: "gfx1103", 0x045: "gfx1036", 0x046: "gfx1101",
    0x047: "gfx1102", 0x048: "gfx1200", 0x049: "gfx1250", 0x04A: "gfx1151",
    0x04B: "gfx941", 0x04C: "gfx942", 0x04E: "gfx1201", 0x04F: "gfx950",
    0x051: "gfx9-generic", 0x052: "gfx10-1-generic", 0x053: "gfx10-3-generic",
    0x054: "gfx11-generic", 0x055: "gfx1152", 0x058: "gfx1153",
    0x059: "gfx12-generic", 0x05A: "gfx1251", 0x05F: "gfx9-4-generic",
}

#: Generic processors and the parts their code runs on (LLVM AMDGPUUsage,
#: "Generic processors"). Code for a generic target loads on each member.
GENERIC_COVERS: dict[str, frozenset[str]] = {
    "gfx9-generic": frozenset({"gfx900", "gfx902", "gfx904", "gfx906", "gfx909", "gfx90c"}),
    "gfx9-4-generic": frozenset({"gfx940", "gfx941", "gfx942", "gfx950"}),
    "gfx10-1-generic": frozenset({"gfx1010", "gfx1011", "gfx1012", "gfx1013"}),
    "gfx10-3-generic": frozenset(
        {"gfx1030", "gfx1031", "gfx1032", "gfx1033", "gfx1034", "gfx1035", "gfx1036"}
    ),
    "gfx11-generic": frozenset(
        {"gfx1100", "gfx1101", "gfx1102", "gfx1103", "gfx1150", "gfx1151", "gfx1152", "gfx1153"}
    ),
    "gfx12-generic": frozenset({"gfx1200", "gfx1201"}),
}

DEVICE_KINDS = frozenset({"hip", "hipv4", "openmp", "cuda"})


class BundleEntry(BaseModel):
    """One entry of an offload bundle's header."""

    bundle_id: str
    kind: str
    triple: str
    processor: str | None  # None for the host entry
    features: list[str]
    size: int


class CodeObjectSource(BaseModel):
    """Where device code was found in one wheel member."""

    member: str
    section: str | None
    offset: int
    kind: Literal["bundle", "compressed-bundle", "code-object"]
    targets: list[str]
    entries: list[BundleEntry] = []
    readable: bool = True
    note: str | None = None


class WheelTargets(BaseModel):
    """The gfx targets a wheel's device code carries.

    ``pure`` means the wheel holds no native (ELF) code at all;
    ``device_code`` that at least one bundle or code object was found;
    ``compressed_unknown`` that some device code could not be read, so
    ``targets`` may be incomplete.
    """

    wheel: str
    targets: list[str]
    pure: bool
    device_code: bool
    compressed_unknown: bool
    notes: list[str]
    sources: list[CodeObjectSource]

    def summary(self) -> dict[str, object]:
        """The ``--json`` shape: ``{"wheel", "targets", "pure"}`` plus the caveats."""
        return {
            "wheel": self.wheel,
            "targets": self.targets,
            "pure": self.pure,
            "device_code": self.device_code,
            "compressed_unknown": self.compressed_unknown,
            "notes": self.notes,
        }


class _Where:
    """Names the wheel/member/section in every error, so a refusal is actionable."""

    def __init__(self, wheel: str, member: str, section: str | None = None) -> None:
        self.wheel, self.member, self.section = wheel, member, section

    def error(self, offset: int, problem: str) -> RocmBakeError:
        sec = f" section {self.section}" if self.section else ""
        return RocmBakeError(
            f"{self.wheel}: {self.member}{sec} at offset {offset:#x}: {problem}"
        )


class _Blob:
    """Random access to a zip member's bytes without extracting it.

    ``ZipExtFile`` can seek: forward seeks inflate and discard, backward ones
    restart, so memory stays bounded even for a 1 GB ``libtorch_hip.so``.
    """

    def __init__(self, handle: IO[bytes], size: int) -> None:
        self._handle, self.size = handle, size

    def read_at(self, offset: int, length: int) -> bytes:
        if offset < 0 or length < 0 or offset > self.size:
            return b""
        self._handle.seek(offset)
        return self._handle.read(min(length, self.size - offset))


class _BytesBlob(_Blob):
    def __init__(self, data: bytes) -> None:  # noqa: D107 - trivial
        self._data, self.size = data, len(data)

    def read_at(self, offset: int, length: int) -> bytes:
        if offset < 0 or length < 0:
            return b""
        return self._data[offset : offset + length]


# --------------------------------------------------------------------- ELF


class _Section(BaseModel):
    name: str
    type: int
    offset: int
    size: int


class _ElfHeader(BaseModel):
    elf64: bool
    little: bool
    machine: int
    flags: int
    shoff: int
    shentsize: int
    shnum: int
    shstrndx: int


def _elf_header(head: bytes, where: _Where) -> _ElfHeader:
    if len(head) < 52:
        raise where.error(0, "ELF header truncated")
    klass, data = head[4], head[5]
    if klass not in (1, 2) or data not in (1, 2):
        raise where.error(0, f"unsupported ELF class {klass} / data encoding {data}")
    e = "<" if data == 1 else ">"
    if klass == 2:
        if len(head) < 64:
            raise where.error(0, "ELF64 header truncated")
        machine = struct.unpack_from(e + "H", head, 0x12)[0]
        shoff = struct.unpack_from(e + "Q", head, 0x28)[0]
        flags = struct.unpack_from(e + "I", head, 0x30)[0]
        shentsize, shnum, shstrndx = struct.unpack_from(e + "HHH", head, 0x3A)
    else:
        machine = struct.unpack_from(e + "H", head, 0x12)[0]
        shoff = struct.unpack_from(e + "I", head, 0x20)[0]
        flags = struct.unpack_from(e + "I", head, 0x24)[0]
        shentsize, shnum, shstrndx = struct.unpack_from(e + "HHH", head, 0x2E)
    return _ElfHeader(
        elf64=klass == 2, little=data == 1, machine=machine, flags=flags,
        shoff=shoff, shentsize=shentsize, shnum=shnum, shstrndx=shstrndx,
    )


def _parse_shdr(hdr: _ElfHeader, raw: bytes) -> tuple[int, int, int, int, int]:
    """(name, type, offset, size, link) of one section header."""
    e = "<" if hdr.little else ">"
    if hdr.elf64:
        name, stype, _flags, _addr, off, size, link = struct.unpack_from(e + "IIQQQQI", raw, 0)
    else:
        name, stype, _flags, _addr, off, size, link = struct.unpack_from(e + "IIIIIII", raw, 0)
    return name, stype, off, size, link


def _elf_sections(blob: _Blob, hdr: _ElfHeader, where: _Where) -> list[_Section]:
    """Section table with names, honouring the SHN_XINDEX escapes."""
    if hdr.shoff == 0:
        return []
    want = 64 if hdr.elf64 else 40
    if hdr.shentsize < want:
        raise where.error(0, f"section header size {hdr.shentsize} is smaller than {want}")
    first = blob.read_at(hdr.shoff, hdr.shentsize)
    if len(first) < hdr.shentsize:
        raise where.error(hdr.shoff, "section headers truncated")
    _, _, _, size0, link0 = _parse_shdr(hdr, first)
    shnum = hdr.shnum or size0
    shstrndx = link0 if hdr.shstrndx == 0xFFFF else hdr.shstrndx
    if shnum > 1 << 16:
        raise where.error(hdr.shoff, f"implausible section count {shnum}")
    table = blob.read_at(hdr.shoff, shnum * hdr.shentsize)
    if len(table) < shnum * hdr.shentsize:
        raise where.error(hdr.shoff, f"section headers truncated ({shnum} expected)")
    raw = [_parse_shdr(hdr, table[i * hdr.shentsize :]) for i in range(shnum)]
    if shstrndx >= shnum:
        raise where.error(hdr.shoff, f"section name table index {shstrndx} out of range")
    _, _, str_off, str_size, _ = raw[shstrndx]
    strtab = blob.read_at(str_off, str_size)
    sections = []
    for name_off, stype, off, size, _ in raw:
        end = strtab.find(b"\0", name_off)
        name = strtab[name_off : end if end >= 0 else None].decode("latin-1")
        sections.append(_Section(name=name, type=stype, offset=off, size=size))
    return sections


def _processor_of_mach(flags: int) -> str | None:
    return AMDGPU_MACH.get(flags & 0xFF)


# ------------------------------------------------------------ bundle parse


def parse_bundle_id(bundle_id: str) -> tuple[str, str, str | None, list[str]]:
    """Split ``<kind>-<arch>-<vendor>-<os>-<env>[-<target id>]``.

    Returns (kind, triple, processor, features). The target id may itself
    hold dashes (``gfx9-4-generic``), hence at most five splits, as
    clang-offload-bundler does.
    """
    parts = bundle_id.split("-", 5)
    if len(parts) < 5:
        raise ValueError(f"malformed offload bundle id {bundle_id!r}")
    kind = parts[0]
    triple = "-".join(parts[1:5])
    target_id = parts[5] if len(parts) == 6 else ""
    if not target_id:
        return kind, triple, None, []
    processor, *features = target_id.split(":")
    return kind, triple, processor, features


def _u64(data: bytes, pos: int) -> int:
    return struct.unpack_from("<Q", data, pos)[0]


def _parse_uncompressed(
    blob: _Blob, base: int, limit: int, where: _Where
) -> tuple[list[BundleEntry], int]:
    """Entries of the bundle at ``base`` and its extent (bytes from ``base``)."""
    head = blob.read_at(base, 32)
    if len(head) < 32 or limit < 32:
        raise where.error(base, "offload bundle truncated inside its header")
    count = _u64(head, 24)
    if count == 0 or count > MAX_ENTRIES:
        raise where.error(base, f"offload bundle claims {count} entries (corrupt header)")
    pos = 32
    raw_entries: list[tuple[int, int, str]] = []
    for index in range(count):
        fixed = blob.read_at(base + pos, 24) if pos + 24 <= limit else b""
        if len(fixed) < 24:
            raise where.error(base, f"offload bundle truncated in entry {index} of {count}")
        offset, size, id_len = struct.unpack_from("<QQQ", fixed, 0)
        pos += 24
        if id_len == 0 or id_len > MAX_ID_LEN:
            raise where.error(base, f"offload bundle entry {index} has id length {id_len} (corrupt)")
        raw_id = blob.read_at(base + pos, id_len) if pos + id_len <= limit else b""
        if len(raw_id) < id_len:
            raise where.error(base, f"offload bundle truncated in entry {index}'s id")
        try:
            bundle_id = raw_id.decode("ascii")
        except UnicodeDecodeError:
            raise where.error(base, f"offload bundle entry {index} id is not ASCII (corrupt)") from None
        pos += id_len
        if offset + size > limit:
            raise where.error(
                base,
                f"offload bundle entry {bundle_id!r} spans {offset:#x}+{size:#x}, past the "
                f"{limit:#x} bytes available (truncated)",
            )
        raw_entries.append((offset, size, bundle_id))
    header_end = pos
    entries = []
    for offset, size, bundle_id in raw_entries:
        try:
            kind, triple, processor, features = parse_bundle_id(bundle_id)
        except ValueError as exc:
            raise where.error(base, str(exc)) from None
        entries.append(
            BundleEntry(
                bundle_id=bundle_id, kind=kind, triple=triple,
                processor=processor, features=features, size=size,
            )
        )
    extent = max([header_end] + [o + s for o, s, _ in raw_entries])
    return entries, extent


class _CcobHeader(BaseModel):
    version: int
    method: int
    header_size: int
    total_size: int | None
    uncompressed_size: int
    hash: int


def _parse_ccob_header(blob: _Blob, base: int, limit: int, where: _Where) -> _CcobHeader:
    head = blob.read_at(base, 32)
    if len(head) < 8:
        raise where.error(base, "compressed offload bundle (CCOB) truncated inside its header")
    version, method = struct.unpack_from("<HH", head, 4)
    layouts = {1: ("<IQ", 20, False), 2: ("<IIQ", 24, True), 3: ("<QQQ", 32, True)}
    if version not in layouts:
        raise where.error(base, f"compressed offload bundle (CCOB) version {version} is unknown")
    fmt, header_size, has_total = layouts[version]
    if len(head) < header_size or limit < header_size:
        raise where.error(base, f"compressed offload bundle (CCOB v{version}) header truncated")
    fields = struct.unpack_from(fmt, head, 8)
    total = fields[0] if has_total else None
    uncompressed, digest = fields[-2], fields[-1]
    if total is not None and (total < header_size or total > limit):
        raise where.error(
            base,
            f"compressed offload bundle (CCOB v{version}) claims {total} bytes but only "
            f"{limit} are available (truncated)",
        )
    return _CcobHeader(
        version=version, method=method, header_size=header_size,
        total_size=total, uncompressed_size=uncompressed, hash=digest,
    )


def _range_chunks(blob: _Blob, start: int, length: int) -> Iterator[bytes]:
    pos = 0
    while pos < length:
        chunk = blob.read_at(start + pos, min(_CHUNK, length - pos))
        if not chunk:
            return
        pos += len(chunk)
        yield chunk


def zstd_available() -> str | None:
    """How zstd bundles can be read here: ``"zstandard"``, ``"zstd-cli"`` or None."""
    if importlib.util.find_spec("zstandard") is not None:
        return "zstandard"
    if shutil.which("zstd"):
        return "zstd-cli"
    return None


def _inflate_prefix(method: int, chunks: Iterator[bytes], want: int) -> bytes:
    """The first ``want`` bytes of a compressed stream (stops early: headers only)."""
    name = CCOB_METHODS.get(method)
    if name == "zlib":
        inflater = zlib.decompressobj()
        out = bytearray()
        for chunk in chunks:
            out += inflater.decompress(chunk, want - len(out))
            while inflater.unconsumed_tail and len(out) < want:
                out += inflater.decompress(inflater.unconsumed_tail, want - len(out))
            if len(out) >= want or inflater.eof:
                break
        return bytes(out[:want])
    if name == "zstd":
        how = zstd_available()
        if how == "zstandard":
            import zstandard  # type: ignore[import-not-found]

            reader = zstandard.ZstdDecompressor().decompressobj()
            out = bytearray()
            for chunk in chunks:
                out += reader.decompress(chunk)
                if len(out) >= want:
                    break
            return bytes(out[:want])
        if how == "zstd-cli":
            return _zstd_cli_prefix(chunks, want)
    raise LookupError(name or f"method {method}")


def _zstd_cli_prefix(chunks: Iterator[bytes], want: int) -> bytes:
    """Inflate through the ``zstd`` program over pipes (nothing touches disk)."""
    proc = subprocess.Popen(
        ["zstd", "-dcq"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
    )
    assert proc.stdin is not None and proc.stdout is not None
    stdin = proc.stdin

    def feed() -> None:
        try:
            for chunk in chunks:
                stdin.write(chunk)
        except (BrokenPipeError, ValueError, OSError):
            pass
        finally:
            try:
                stdin.close()
            except OSError:
                pass

    feeder = threading.Thread(target=feed, daemon=True)
    feeder.start()
    out = bytearray()
    while len(out) < want:
        piece = proc.stdout.read1(want - len(out))  # type: ignore[attr-defined]
        if not piece:
            break
        out += piece
    proc.stdout.close()
    proc.kill()
    proc.wait()
    feeder.join(timeout=5)
    return bytes(out[:want])


def _parse_compressed(
    blob: _Blob, base: int, limit: int, where: _Where, section_start: int
) -> tuple[CodeObjectSource, int | None]:
    """A CCOB bundle's source record and extent (None: unknown, v1)."""
    hdr = _parse_ccob_header(blob, base, limit, where)
    extent = hdr.total_size
    data_len = (hdr.total_size if hdr.total_size is not None else limit) - hdr.header_size
    label = f"CCOB v{hdr.version} {CCOB_METHODS.get(hdr.method, f'method {hdr.method}')}"
    source = CodeObjectSource(
        member=where.member, section=where.section, offset=base - section_start,
        kind="compressed-bundle", targets=[], readable=False,
    )
    want = min(hdr.uncompressed_size, 32 + MAX_ENTRIES * (24 + 128))
    try:
        prefix = _inflate_prefix(
            hdr.method, _range_chunks(blob, base + hdr.header_size, data_len), want
        )
    except LookupError as exc:
        source.note = f"{label}: compressed, targets unknown (no {exc} decompressor here)"
        return source, extent
    except zlib.error as exc:
        raise where.error(base, f"{label}: compressed data is corrupt ({exc})") from None
    if not prefix.startswith(BUNDLE_MAGIC):
        raise where.error(
            base, f"{label}: decompressed data is not an offload bundle (corrupt or truncated)"
        )
    # The inner header is all we need: its offsets are checked against the
    # uncompressed size the CCOB header declares.
    inner_where = _Where(where.wheel, where.member, f"{where.section} (inside {label})")
    entries, _ = _parse_uncompressed(_BytesBlob(prefix), 0, hdr.uncompressed_size, inner_where)
    source.entries = entries
    source.targets = _device_processors(entries)
    source.readable = True
    source.note = f"{label}: decompressed header"
    return source, extent


def _device_processors(entries: list[BundleEntry]) -> list[str]:
    return sorted({e.processor for e in entries if e.processor and e.kind in DEVICE_KINDS})


def _find_magic(blob: _Blob, start: int, end: int) -> int | None:
    """Absolute offset of the next bundle magic (either kind) in [start, end)."""
    overlap = len(BUNDLE_MAGIC) - 1
    pos = start
    while pos < end:
        chunk = blob.read_at(pos, min(_CHUNK + overlap, end - pos))
        if not chunk:
            return None
        hits = [i for i in (chunk.find(BUNDLE_MAGIC), chunk.find(CCOB_MAGIC)) if i >= 0]
        if hits:
            return pos + min(hits)
        if len(chunk) <= overlap:
            return None
        pos += len(chunk) - overlap
    return None


def scan_fatbin(blob: _Blob, start: int, size: int, where: _Where) -> list[CodeObjectSource]:
    """Every bundle in one ``.hip_fatbin`` section, back to back or padded."""
    sources: list[CodeObjectSource] = []
    end = start + size
    pos = start
    while pos < end:
        found = _find_magic(blob, pos, end)
        if found is None:
            break
        if blob.read_at(found, 4) == CCOB_MAGIC:
            source, extent = _parse_compressed(blob, found, end - found, where, start)
            sources.append(source)
            if extent is None:
                source.note = (source.note or "") + "; v1 has no size field, rest of section not scanned"
                break
        else:
            entries, extent = _parse_uncompressed(blob, found, end - found, where)
            sources.append(
                CodeObjectSource(
                    member=where.member, section=where.section, offset=found - start,
                    kind="bundle", targets=_device_processors(entries), entries=entries,
                )
            )
        pos = found + max(extent, 1)
    if not sources and size and blob.read_at(start, min(size, 4096)).strip(b"\0"):
        sources.append(
            CodeObjectSource(
                member=where.member, section=where.section, offset=0, kind="bundle",
                targets=[], readable=False,
                note="section holds data but no offload bundle magic: targets unknown",
            )
        )
    return sources


# ------------------------------------------------------------------ wheels


def _member_sources(blob: _Blob, wheel: str, member: str) -> list[CodeObjectSource] | None:
    """Device code in one member; None when the member is not ELF."""
    head = blob.read_at(0, 64)
    if not head.startswith(ELF_MAGIC):
        return None
    where = _Where(wheel, member)
    hdr = _elf_header(head, where)
    if hdr.machine == EM_AMDGPU:
        processor = _processor_of_mach(hdr.flags)
        return [
            CodeObjectSource(
                member=member, section=None, offset=0, kind="code-object",
                targets=[processor] if processor else [], readable=processor is not None,
                note=None if processor else f"AMDGPU code object with unknown EF_AMDGPU_MACH "
                f"{hdr.flags & 0xFF:#x}: targets unknown",
            )
        ]
    if hdr.shoff == 0:
        # No section table (e.g. sstrip'ed): .hip_fatbin cannot be located, so
        # whatever device code it may hold is unknown rather than absent.
        return [
            CodeObjectSource(
                member=member, section=None, offset=0, kind="bundle", targets=[], readable=False,
                note="ELF without section headers: cannot look for .hip_fatbin, targets unknown",
            )
        ]
    sources: list[CodeObjectSource] = []
    for section in _elf_sections(blob, hdr, where):
        if section.name.startswith(".hip_fatbin") and section.type != SHT_NOBITS and section.size:
            swhere = _Where(wheel, member, section.name)
            if section.offset + section.size > blob.size:
                raise swhere.error(section.offset, "section runs past the end of the file (truncated)")
            sources.extend(scan_fatbin(blob, section.offset, section.size, swhere))
    return sources


def wheel_targets(path: Path) -> WheelTargets:
    """Report the gfx targets in ``path``'s device code, reading it in place."""
    path = Path(path)
    if not path.is_file():
        raise RocmBakeError(f"{path}: wheel not found")
    try:
        archive = zipfile.ZipFile(path)
    except zipfile.BadZipFile as exc:
        raise RocmBakeError(f"{path.name}: not a wheel (not a zip archive: {exc})") from None
    sources: list[CodeObjectSource] = []
    elf_members = 0
    with archive:
        for info in archive.infolist():
            if info.is_dir() or info.file_size < 4:
                continue
            try:
                with archive.open(info) as handle:
                    if handle.read(4) != ELF_MAGIC:
                        continue
                    handle.seek(0)
                    # Small members are read once into memory; big ones (a 1 GB
                    # libtorch_hip.so) are read in place by seeking, a few passes
                    # at most, so memory stays bounded.
                    blob = (
                        _BytesBlob(handle.read())
                        if info.file_size <= IN_MEMORY_LIMIT
                        else _Blob(handle, info.file_size)
                    )
                    found = _member_sources(blob, path.name, info.filename)
            except (zipfile.BadZipFile, zlib.error, EOFError) as exc:
                raise RocmBakeError(f"{path.name}: {info.filename}: cannot read member ({exc})") from None
            if found is None:
                continue
            elf_members += 1
            sources.extend(found)
    return _summarise(path.name, sources, elf_members)


def _summarise(wheel: str, sources: list[CodeObjectSource], elf_members: int) -> WheelTargets:
    targets = sorted({t for s in sources for t in s.targets})
    notes: list[str] = []
    for s in sources:
        where = f"{s.member}" + (f" {s.section}" if s.section else "")
        for e in s.entries:
            if e.features and e.kind in DEVICE_KINDS:
                notes.append(f"{where}: {e.processor} with features {':'.join(e.features)}")
        if not s.readable:
            notes.append(f"{where}: {s.note or 'targets unknown'}")
    return WheelTargets(
        wheel=wheel,
        targets=targets,
        pure=elf_members == 0,
        device_code=bool(sources),
        compressed_unknown=any(not s.readable for s in sources),
        notes=sorted(set(notes)),
        sources=sources,
    )


def covers(target: str, arch: str) -> bool:
    """True when code built for ``target`` loads on ``arch`` (same, or a generic covering it)."""
    return target == arch or arch in GENERIC_COVERS.get(target, frozenset())


def check_wheel_for_arch(path: Path, arch: str, allow_unknown: bool = False) -> WheelTargets:
    """Refuse a wheel whose device code is not for ``arch``; return its report.

    This is the failure the ``:latest`` tag causes: "written by whichever
    architecture was pushed last, with the wheels inside indistinguishable
    afterwards". Pure-Python and host-only wheels pass. A fat build that
    includes ``arch`` passes. Device code that cannot be read (a compressed
    bundle with no decompressor here) is refused unless ``allow_unknown``:
    a wrong-arch asset must not pass silently, and "unknown" is exactly how
    one would.
    """
    validate_arch(arch)
    report = wheel_targets(path)
    if report.compressed_unknown and not allow_unknown:
        raise RocmBakeError(
            f"{report.wheel}: cannot verify it is for {arch}: "
            + "; ".join(n for n in report.notes if "unknown" in n)
            + " (refused: an unverifiable asset could be another arch's; install the "
            "decompressor or pass allow_unknown to accept it)"
        )
    if report.targets and not any(covers(t, arch) for t in report.targets):
        raise RocmBakeError(
            f"{report.wheel}: device code is for {', '.join(report.targets)}, not {arch}: "
            f"refused for the {arch} index (a wheel fetched by a tag another arch pushed, "
            f"e.g. :latest, looks exactly like this)"
        )
    return report
