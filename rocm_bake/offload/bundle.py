"""Uncompressed clang-offload-bundler bundles: the header and its entries.

``__CLANG_OFFLOAD_BUNDLE__`` (24 bytes), uint64 entry count, then per entry
uint64 offset, uint64 size, uint64 id length and the id
(``hipv4-amdgcn-amd-amdhsa--gfx950``, ``host-x86_64-unknown-linux-gnu``);
offsets are relative to the bundle start, all integers little-endian. The
header is read through a getter (``corrupt.Getter``), so a CCOB bundle's
inflated prefix parses the same way.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from rocm_bake.offload.corrupt import Corrupt, Getter
from rocm_bake.offload.targets import BundleId, parse_bundle_id

BUNDLE_MAGIC = b"__CLANG_OFFLOAD_BUNDLE__"

#: Sanity bounds: a header beyond these is corruption, not a real bundle.
MAX_ENTRIES = 4096
MAX_ID_LEN = 4096
#: The largest header a bundle can have within the bounds above.
MAX_HEADER = 32 + MAX_ENTRIES * (24 + MAX_ID_LEN)

_U64 = struct.Struct("<Q")
_ENTRY = struct.Struct("<QQQ")


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
