"""Find the offload bundles in one ELF member's ``.hip_fatbin`` sections.

A HIP fat binary holds bundles back to back (one per linked translation unit,
each page-aligned), so a section is walked from its start: find a magic, read
that bundle's header, jump past its extent, repeat. A magic inside a bundle's
payload, or anywhere outside ``.hip_fatbin``, is never reported.

Two ways to do that walk, one per kind of zip member:

* compressed (:func:`scan_stream`): the section headers sit at the end of the
  ELF file, after the bundles, and the member can be read only once, front to
  back. So every magic is noted as a *candidate* while streaming (its offset,
  its parsed header, a CCOB's header inflated on the fly) and a valid
  candidate's payload is passed over unsearched; once the section table has
  streamed by, the candidates inside ``.hip_fatbin`` are kept and the rest are
  dropped. Passing over payloads is what keeps the scan near one inflate pass.
* stored (:func:`scan_stored`): read the section table first, then only the
  bundle headers and the bytes between bundles.

A section that begins inside a region the stream passed over (bundle-like data
that started before it) cannot be walked any more; it is reported as unknown,
never guessed.
"""

from __future__ import annotations

import bisect
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rocm_bake.errors import RocmBakeError
from rocm_bake.offload.formats import (
    CCOB_LAYOUTS,
    ELF_MAGIC,
    EM_AMDGPU,
    FATBIN_SECTION,
    SHT_NOBITS,
    BundleHeader,
    CcobHeader,
    Corrupt,
    ElfHeader,
    InflatedPrefix,
    SectionHeader,
    ccob_truncated,
    ccob_version,
    check_entries_within,
    elf_header,
    first_read,
    inflater,
    parse_ccob_header,
    read_bundle_header,
    section_entry_size,
    section_table,
    section_table_span,
)
from rocm_bake.offload.source import ForwardSource, StoredSource
from rocm_bake.offload.targets import DEVICE_KINDS, processor_of_mach

#: A member with more magics, or bundle entries, than this is refused as
#: hostile: what the scan remembers stays bounded (a real libtorch_hip.so has a
#: few thousand bundles of a few entries each).
MAX_CANDIDATES = 1 << 16
MAX_ENTRIES_TOTAL = 1 << 20


class _Budget:
    """Counts what one member's scan keeps, and refuses past the bounds above."""

    def __init__(self, where: Where) -> None:
        self.where, self.candidates, self.entries = where, 0, 0

    def keep(self, cand: Candidate) -> Candidate:
        self.candidates += 1
        self.entries += len(cand.header.entries) if cand.header else 0
        if self.candidates > MAX_CANDIDATES or self.entries > MAX_ENTRIES_TOTAL:
            raise self.where.error(
                cand.offset,
                f"more than {MAX_CANDIDATES} offload bundle magics or {MAX_ENTRIES_TOTAL} bundle entries: "
                f"refused as corrupt or hostile",
            )
        return cand

#: One ``CodeObjectSource`` as plain data: the scanner builds these, and the
#: wheel report turns them into ``CodeObjectSource`` objects once, at the end.
Source = dict[str, Any]


class Where:
    """Names the wheel/member/section in every error, so a refusal is actionable."""

    def __init__(self, wheel: str, member: str, section: str | None = None) -> None:
        self.wheel, self.member, self.section = wheel, member, section

    def within(self, section: str) -> Where:
        return Where(self.wheel, self.member, section)

    def error(self, offset: int, problem: str) -> RocmBakeError:
        sec = f" section {self.section}" if self.section else ""
        return RocmBakeError(f"{self.wheel}: {self.member}{sec} at offset {offset:#x}: {problem}")


# ------------------------------------------------------------- candidates


class Candidate:
    """A magic found at ``offset`` (in the member) and what its bytes say.

    ``extent`` is None when the end cannot be known (a CCOB v1 of an unknown
    method or version); ``reached`` is how far the parse read, which tells a
    truncated bundle from a corrupt one once the section's end is known.
    """

    __slots__ = ("offset", "ccob", "extent", "header_end", "reached", "header", "ccob_header", "error", "unknown")

    def __init__(self, offset: int, ccob: bool) -> None:
        self.offset, self.ccob = offset, ccob
        self.extent: int | None = None
        self.header_end = self.reached = 0
        self.header: BundleHeader | None = None
        self.ccob_header: CcobHeader | None = None
        self.error: str | None = None
        self.unknown: str | None = None


def parse_candidate(src: ForwardSource | StoredSource, offset: int, ccob: bool, avail: int) -> Candidate:
    """Parse the bundle at ``offset``; ``avail`` bytes exist from there (member or section end)."""
    read_at = src.read_at
    cand = Candidate(offset, ccob)
    if not ccob:
        try:
            cand.header = header = read_bundle_header(lambda o, n: read_at(offset + o, n), avail)
            check_entries_within(header, avail)
        except Corrupt as exc:
            cand.error, cand.reached = exc.problem, exc.need or 0
            return cand
        cand.header_end = cand.reached = header.header_end
        cand.extent = header.extent
        return cand
    try:
        _parse_ccob(src, cand, avail)
    except Corrupt as exc:
        cand.error, cand.extent = exc.problem, None
    return cand


def _parse_ccob(src: ForwardSource | StoredSource, cand: Candidate, avail: int) -> None:
    """Fill ``cand`` from a CCOB header and its inflated inner header.

    ``cand.reached`` follows the bytes looked at (header, then compressed data
    fed), so a bundle cut by its section's end reads as truncated.
    """
    offset, read_at = cand.offset, src.read_at
    cand.reached = 32
    head = read_at(offset, min(32, avail))
    version = ccob_version(head)
    if version not in CCOB_LAYOUTS:
        cand.header_end = cand.reached = 8
        cand.unknown = (
            f"CCOB magic with version {version}, which rocm-bake does not know (corrupt, or a newer "
            f"format): unreadable, targets unknown"
        )
        return
    hdr = parse_ccob_header(head, avail)
    hs = hdr.header_size
    cand.ccob_header, cand.header_end, cand.reached = hdr, hs, hs
    label = hdr.label
    decoder = inflater(hdr.method)
    if decoder is None:
        cand.extent = hdr.total_size
        cand.unknown = f"{label}: compressed with a method rocm-bake cannot read, targets unknown"
        return
    data_len = (hdr.total_size if hdr.total_size is not None else avail) - hs
    prefix = InflatedPrefix(lambda o, n: read_at(offset + hs + o, n), data_len, decoder, step=first_read(hdr.method))
    try:
        inner = read_bundle_header(prefix.get, hdr.uncompressed_size, prefetch=1024)
        check_entries_within(inner, hdr.uncompressed_size)
    except Corrupt as exc:
        cand.reached = hs + prefix.fed
        what = exc.problem if exc.problem.startswith("compressed data") else f"decompressed data: {exc.problem}"
        raise Corrupt(f"{label}: {what}") from None
    cand.header, cand.reached = inner, hs + prefix.fed
    if hdr.total_size is not None:
        cand.extent = hdr.total_size
        return
    # v1 has no size field: inflate to the end of its stream to find where it
    # ends, dropping what was read (a committed candidate is never re-read).
    start = offset + hs

    def forward(o: int, n: int) -> bytes:
        src.release(start + o)
        return read_at(start + o, n)

    prefix.read = forward
    try:
        cand.extent = hs + prefix.drain()
    except Corrupt as exc:
        raise Corrupt(f"{label}: {exc.problem}") from None
    finally:
        cand.reached = hs + prefix.fed


def _problem_within(cand: Candidate, limit: int) -> str | None:
    """Why ``cand`` does not fit in the ``limit`` bytes its section has left (None: it fits)."""
    if cand.error is not None:
        if cand.reached > limit:
            return f"offload bundle truncated: it needs more than the {limit:#x} bytes left in the section"
        return cand.error
    if cand.ccob:
        hdr = cand.ccob_header
        if cand.header_end > limit:
            return "compressed offload bundle (CCOB) header truncated"
        if hdr is not None and cand.extent is not None and cand.extent > limit:
            return ccob_truncated(hdr.version, cand.extent, limit)
        return None
    assert cand.header is not None
    if cand.header_end > limit:
        return f"offload bundle truncated: its header needs {cand.header_end:#x} bytes, the section has {limit:#x}"
    try:
        check_entries_within(cand.header, limit)
    except Corrupt as exc:
        return exc.problem
    return None


def _source(cand: Candidate, where: Where, section_start: int) -> Source:
    entries: list[dict[str, Any]] = [
        {
            "bundle_id": e.bundle_id, "kind": e.parsed.kind, "triple": e.parsed.triple,
            "processor": e.parsed.processor, "features": list(e.parsed.features), "size": e.size,
            "foreign": e.parsed.foreign,
        }
        for e in (cand.header.entries if cand.header else [])
    ]
    foreign = [f"entry {e['bundle_id']!r}: {e['foreign']}: target unknown" for e in entries if e["foreign"]]
    note = cand.unknown
    if cand.ccob and cand.unknown is None and cand.ccob_header is not None:
        note = f"{cand.ccob_header.label}: decompressed header"
    if foreign:
        note = "; ".join(([note] if note else []) + foreign)
    return {
        "member": where.member, "section": where.section, "offset": cand.offset - section_start,
        # A CCOB magic whose version no LLVM writes is not known to be compressed at all.
        "kind": ("compressed-bundle" if cand.ccob_header is not None else "unreadable") if cand.ccob else "bundle",
        "targets": sorted({e["processor"] for e in entries if e["processor"] and e["kind"] in DEVICE_KINDS}),
        "entries": entries, "readable": cand.unknown is None and not foreign, "note": note,
    }


def _unreadable(where: Where, offset: int, note: str) -> Source:
    return {
        "member": where.member, "section": where.section, "offset": offset, "kind": "unreadable",
        "targets": [], "readable": False, "note": note,
    }


def _walk(cands: list[Candidate], where: Where, start: int, size: int) -> list[Source]:
    """Sources of one section from its candidates (in order, none inside another's extent)."""
    sources: list[Source] = []
    for cand in cands:
        problem = _problem_within(cand, start + size - cand.offset)
        if problem is not None:
            raise where.error(cand.offset, problem)
        sources.append(_source(cand, where, start))
        if cand.extent is None:
            sources[-1]["note"] = f"{sources[-1]['note']}; its end is unknown, the rest of the section is not scanned"
            break
    if not sources:
        sources.append(
            _unreadable(where, 0, f"holds {size} bytes but no offload bundle: unreadable, targets unknown")
        )
    return sources


# -------------------------------------------------------------------- ELF


def _elf_front(head: bytes, where: Where) -> ElfHeader | list[Source]:
    """The ELF header, or the whole answer for a code object or an ELF without sections."""
    try:
        hdr = elf_header(head)
    except Corrupt as exc:
        raise where.error(exc.offset, exc.problem) from None
    if hdr.machine == EM_AMDGPU:
        processor = processor_of_mach(hdr.flags)
        return [{
            "member": where.member, "section": None, "offset": 0, "kind": "code-object",
            "targets": [processor] if processor else [], "readable": processor is not None,
            "note": None if processor else f"AMDGPU code object with unknown EF_AMDGPU_MACH "
            f"{hdr.flags & 0xFF:#x}: targets unknown",
        }]
    if hdr.shoff == 0:
        # No section table (e.g. sstrip'ed): .hip_fatbin cannot be located, so
        # whatever device code it may hold is unknown rather than absent.
        return [_unreadable(where, 0, "ELF without section headers: cannot look for .hip_fatbin, targets unknown")]
    return hdr


def _fatbin_sections(
    sections: list[SectionHeader], names: dict[int, str], size: int, where: Where
) -> list[tuple[str, SectionHeader]]:
    found = []
    for sec in sections:
        name = names.get(sec.name_offset)
        if name is None or sec.type == SHT_NOBITS or not sec.size:
            continue
        if sec.offset + sec.size > size:
            raise where.within(name).error(sec.offset, "section runs past the end of the file (truncated)")
        found.append((name, sec))
    return sorted(found, key=lambda item: item[1].offset)


def _name(raw: bytes) -> str:
    return raw.split(b"\0", 1)[0].decode("latin-1")


def _names_from(table: bytes, sections: list[SectionHeader]) -> dict[int, str]:
    names = {}
    for sec in sections:
        raw = table[sec.name_offset : sec.name_offset + 64]
        if raw.startswith(FATBIN_SECTION):
            names[sec.name_offset] = _name(raw)
    return names


def _walk_sections(src: ForwardSource | StoredSource, sections: list[SectionHeader], names: dict[int, str],
                   size: int, where: Where) -> list[Source]:
    """Walk each named ``.hip_fatbin`` section from its own start, bundle by bundle (one budget for all)."""
    budget = _Budget(where)
    sources: list[Source] = []
    for name, sec in _fatbin_sections(sections, names, size, where):
        swhere = where.within(name)
        end = sec.offset + sec.size
        cands: list[Candidate] = []
        pos = sec.offset
        while (hit := src.find(pos, end)) is not None:
            cand = budget.keep(parse_candidate(src, hit.offset, hit.ccob, end - hit.offset))
            cands.append(cand)
            if cand.error is not None or not cand.extent:
                break  # an error is raised by _walk; an unknown end stops the walk
            pos = hit.offset + cand.extent
        sources.extend(_walk(cands, swhere, sec.offset, sec.size))
    return sources


def _rescan(reopen: Callable[[], ForwardSource], sections: list[SectionHeader], strtab: SectionHeader,
            names: dict[int, str] | None, size: int, where: Where) -> list[Source]:
    """Walk only the ``.hip_fatbin`` sections, now that the section table is known.

    Bundle-like data elsewhere (a blob in ``.rodata`` whose header claims
    bytes past its end) hid a section's start or its name from the first
    pass; with the table in hand, a fresh pass reads the name table if it was
    hidden, then walks each section from its own start, as a stored member is
    walked. A rare case, paid for by one or two more inflate passes.
    """
    if names is None:
        src = reopen()
        table = src.capture(strtab.offset, strtab.size)
        src.finish()
        names = _names_from(bytes(table), sections)
    src = reopen()
    sources = _walk_sections(src, sections, names, size, where)
    src.finish()
    return sources


def scan_stream(src: ForwardSource, where: Where,
                reopen: Callable[[], ForwardSource] | None = None) -> list[Source]:
    """Scan a compressed member in one forward pass (see the module docstring).

    ``reopen`` gives a fresh pass over the same member: when bundle-like data
    outside ``.hip_fatbin`` hid a section from the first pass, the sections are
    walked again from their known offsets instead of reporting them unknown.
    """
    front = _elf_front(src.read_at(0, 64), where)
    if not isinstance(front, ElfHeader):
        return front
    hdr = front
    try:
        span = section_table_span(hdr, src.size)
        entsize = section_entry_size(hdr)
    except Corrupt as exc:
        raise where.error(hdr.shoff, exc.problem) from None
    if hdr.shoff < 64 or hdr.shoff + entsize > src.size:
        raise where.error(hdr.shoff, "section headers truncated (e_shoff lies outside the file)")
    table = src.capture(hdr.shoff, span)
    cands: list[Candidate] = []
    budget = _Budget(where)
    pos = 0
    while (hit := src.find(pos)) is not None:
        cand = budget.keep(parse_candidate(src, hit.offset, hit.ccob, src.size - hit.offset))
        cands.append(cand)
        if cand.error is None and cand.extent:
            pos = hit.offset + cand.extent
        else:
            pos = max(hit.offset + 1, src.start)
    src.finish()
    try:
        sections, shstrndx = section_table(hdr, bytes(table))
    except Corrupt as exc:
        raise where.error(exc.offset, exc.problem) from None
    strtab = sections[shstrndx]
    # Names come from the .hip_fatbin strings seen while streaming: the name
    # table usually streamed by before the section table said where it was.
    seen = {abs_off: raw for abs_off, raw in src.names}
    names = {}
    for sec in sections:
        if sec.name_offset + len(FATBIN_SECTION) <= strtab.size:
            raw = seen.get(strtab.offset + sec.name_offset)
            if raw is not None:
                names[sec.name_offset] = _name(raw[: strtab.size - sec.name_offset])
    skips = [(c.offset, c.offset + c.extent) for c in cands if c.error is None and c.extent]
    hidden = next((s for s in skips if s[0] < strtab.offset + strtab.size and strtab.offset < s[1]), None)
    if hidden is not None and reopen is not None:
        return _rescan(reopen, sections, strtab, None, src.size, where)
    if hidden is not None:
        return [_unreadable(
            where, 0,
            f"the section name table at {strtab.offset:#x} lies inside bundle-like data found at "
            f"{hidden[0]:#x}: cannot tell which sections are .hip_fatbin, targets unknown",
        )]
    offsets = [c.offset for c in cands]
    fatbins = _fatbin_sections(sections, names, src.size, where)
    if reopen is not None and any(s[0] < sec.offset < s[1] for _n, sec in fatbins for s in skips):
        return _rescan(reopen, sections, strtab, names, src.size, where)
    sources: list[Source] = []
    for name, sec in fatbins:
        swhere = where.within(name)
        end = sec.offset + sec.size
        inside = cands[bisect.bisect_left(offsets, sec.offset) : bisect.bisect_left(offsets, end)]
        straddle = next((s for s in skips if s[0] < sec.offset < s[1]), None)
        if straddle is not None:
            sources.append(_unreadable(
                swhere, 0,
                f"begins inside bundle-like data found at {straddle[0]:#x}, before the section; its "
                f"bundles cannot be told apart from that data in one pass, targets unknown",
            ))
            continue
        sources.extend(_walk(inside, swhere, sec.offset, sec.size))
    return sources


def scan_stored(src: StoredSource, where: Where) -> list[Source]:
    """Scan a stored member in place: section table first, then only bundle headers."""
    front = _elf_front(src.read_at(0, 64), where)
    if not isinstance(front, ElfHeader):
        return front
    hdr = front
    try:
        span = section_table_span(hdr, src.size)
        sections, shstrndx = section_table(hdr, src.read_at(hdr.shoff, span))
    except Corrupt as exc:
        raise where.error(exc.offset or hdr.shoff, exc.problem) from None
    strtab = sections[shstrndx]
    names = {}
    for sec in sections:
        if sec.name_offset + len(FATBIN_SECTION) <= strtab.size:
            raw = src.read_at(strtab.offset + sec.name_offset, min(64, strtab.size - sec.name_offset))
            if raw.startswith(FATBIN_SECTION):
                names[sec.name_offset] = _name(raw)
    return _walk_sections(src, sections, names, src.size, where)


def scan_file(path: Path, label: str, member: str) -> list[Source] | None:
    """Device code in one file on disk (an installed shared object or code object); None when it is not ELF.

    The file is read in place, as a stored wheel member is; ``label`` and
    ``member`` name it in errors (a distribution and its file, say).
    """
    with open(path, "rb") as handle:
        src = StoredSource(handle, 0, os.fstat(handle.fileno()).st_size, lambda _n: None)
        if src.read_at(0, 4) != ELF_MAGIC:
            return None
        return scan_stored(src, Where(label, member))
