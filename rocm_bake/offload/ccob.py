"""CCOB compressed offload bundles (``--offload-compress``): the header.

``CCOB``, uint16 version, uint16 method (``llvm::compression::Format``: 0
zlib, 1 zstd), then v1: uint32 uncompressed size; v2: uint32 total size,
uint32 uncompressed size; v3: uint64 total size, uint64 uncompressed size;
then a uint64 truncated MD5, then the compressed data, which inflates to an
uncompressed bundle (``inflate`` produces just its header).
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from rocm_bake.offload.corrupt import Corrupt

CCOB_MAGIC = b"CCOB"
#: ``llvm::compression::Format`` values stored in the CCOB method field.
CCOB_METHODS = {0: "zlib", 1: "zstd"}
#: CCOB header layouts: struct after the first 8 bytes, header size, has a total size.
CCOB_LAYOUTS = {1: ("<IQ", 20, False), 2: ("<IIQ", 24, True), 3: ("<QQQ", 32, True)}


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


def first_read(method: int) -> int:
    """Compressed bytes to read first: zstd emits nothing until a whole block (<= 128 KiB) is in."""
    return (128 << 10) + 64 if CCOB_METHODS.get(method) == "zstd" else 16 << 10
