"""The ``rocm-torch`` metapackage, built in code as a real wheel, byte-for-byte reproducible.

rocm-torch is a metapackage generated per index: its ``device-<arch>`` extra
pins every wheel in that index at once, and each index declares only its own
architecture's extra, so asking gfx950's index for ``[device-gfx1201]`` fails
rather than installing mismatched binaries. The extra is spelled
``device-<arch>`` so that when wheel variants land, the architecture is
already a first-class coordinate. A fat build's index declares only its
combined extra, ``device-gfx950-gfx1201`` (see ``rocm_bake.archset``).

Version (derived deterministically from its contents): the torch wheel's
public version when the index has torch (so ``pip list`` reads sensibly),
else ``0``, plus a local ``+h<12 hex>`` that is the sha256 of the
metadata lines it pins (the extra's name and every ``name==version``). Same
pins, same version and same bytes; any change to what it pins, a new version.
Zip entries are stored (no deflate: zlib versions differ), sorted, with a
fixed 1980-01-01 timestamp and fixed permissions.
"""

from __future__ import annotations

import base64
import hashlib
import io
import zipfile

from packaging.version import Version
from pydantic import BaseModel

from rocm_bake.archset import ArchSet
from rocm_bake.index.versions import METAPACKAGE

DIST_NAME = "rocm_torch"
ZIP_EPOCH = (1980, 1, 1, 0, 0, 0)
SUMMARY = "Pins one ROCm architecture's wheels from its per-arch index"


class Metapackage(BaseModel):
    filename: str
    version: str
    data: bytes
    metadata: bytes  # the METADATA member, served as ``<wheel>.metadata`` (PEP 658)


def summary(arch: ArchSet) -> str:
    return SUMMARY if not arch.is_fat else f"Pins the {arch} fat build's wheels from its own index"


def requirement_lines(arch: ArchSet, pins: dict[str, Version]) -> list[str]:
    """``Provides-Extra`` for this index's arch set only, then one ``==`` pin per project, sorted."""
    extra = arch.extra
    lines = [f"Provides-Extra: {extra}"]
    lines += [f'Requires-Dist: {name}=={pins[name]}; extra == "{extra}"' for name in sorted(pins)]
    return lines


def metapackage_version(arch: ArchSet, pins: dict[str, Version]) -> str:
    digest = hashlib.sha256("\n".join(requirement_lines(arch, pins)).encode()).hexdigest()[:12]
    torch = pins.get("torch")
    return f"{torch.public if torch else '0'}+h{digest}"


def _record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def build_metapackage(arch: ArchSet, pins: dict[str, Version]) -> Metapackage:
    """The wheel's bytes for ``arch``'s index, pinning ``pins`` (canonical name → version)."""
    if METAPACKAGE in pins:
        raise ValueError("the metapackage cannot pin itself")
    version = metapackage_version(arch, pins)
    info = f"{DIST_NAME}-{version}.dist-info"
    metadata = "\n".join(
        ["Metadata-Version: 2.1", f"Name: {METAPACKAGE}", f"Version: {version}", f"Summary: {summary(arch)}"]
        + requirement_lines(arch, pins)
    ).encode() + b"\n"
    wheel = b"Wheel-Version: 1.0\nGenerator: rocm-bake\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    members = {f"{info}/METADATA": metadata, f"{info}/WHEEL": wheel}
    record = "".join(f"{name},{_record_hash(data)},{len(data)}\n" for name, data in sorted(members.items()))
    members[f"{info}/RECORD"] = (record + f"{info}/RECORD,,\n").encode()
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_STORED) as zf:
        for name in sorted(members):
            zinfo = zipfile.ZipInfo(name, date_time=ZIP_EPOCH)
            zinfo.create_system = 3
            zinfo.external_attr = 0o100644 << 16
            zf.writestr(zinfo, members[name])
    return Metapackage(
        filename=f"{DIST_NAME}-{version}-py3-none-any.whl",
        version=version,
        data=buf.getvalue(),
        metadata=metadata,
    )
