"""The ``rocm-torch`` metapackage, built in code as a real wheel, byte-for-byte reproducible.

rocm-torch is a metapackage generated per index: its ``device-<arch>`` extra
pins every wheel in that index at once, and each index declares only its own
architecture's extra, so asking gfx950's index for ``[device-gfx1201]`` fails
rather than installing mismatched binaries. The extra is spelled
``device-<arch>`` so that when wheel variants land, the architecture is
already a first-class coordinate. A fat build's index declares only its
combined extra, ``device-gfx950-gfx1201`` (see ``rocm_bake.archset``).

It also carries the ``rocm_torch`` package: ``python -m rocm_torch`` checks
that the installed wheels fit the host's GPUs (``rocm_bake.fit_check``, copied
in with the modules it runs on by ``rocm_bake.index.checker_copy``), reading
the index's record the build writes beside it: its arch set, its pins and
the index base it is served from, when the build was told one.

Version (derived deterministically from its contents): the torch wheel's
public version when the index has torch (so ``pip list`` reads sensibly),
else ``0``, plus a local ``+h<12 hex>``: the sha256 of the metadata lines it
pins (the extra's name and every ``name==version``), the index base and the
checker's code. Same inputs, same version and same bytes; any change to what
it pins, where it is served or what the checker does, a new version. Zip
entries are stored (no deflate: zlib versions differ), sorted, with a fixed
1980-01-01 timestamp and fixed permissions.
"""

from __future__ import annotations

import base64
import hashlib
import io
import zipfile

from packaging.version import Version
from pydantic import BaseModel

from rocm_bake.archset import ArchSet
from rocm_bake.index.checker_copy import code_members, package_members
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


def metapackage_version(arch: ArchSet, pins: dict[str, Version], index_base: str | None = None) -> str:
    digest = hashlib.sha256("\n".join(requirement_lines(arch, pins)).encode())
    digest.update(f"\nindex base {index_base or ''}\n".encode())
    for path, data in code_members():
        digest.update(f"{path}\0{hashlib.sha256(data).hexdigest()}\n".encode())
    torch = pins.get("torch")
    return f"{torch.public if torch else '0'}+h{digest.hexdigest()[:12]}"


def checker_record(arch: ArchSet, pins: dict[str, Version], version: str, index_base: str | None) -> dict[str, object]:
    """What ``python -m rocm_torch`` knows of its index (``rocm_torch/index.json``)."""
    return {"arches": list(arch.arches), "dir_name": arch.dir_name, "version": version,
            "pins": {name: str(pins[name]) for name in sorted(pins)}, "index_base": index_base}


def _record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def build_metapackage(arch: ArchSet, pins: dict[str, Version], index_base: str | None = None) -> Metapackage:
    """The wheel's bytes for ``arch``'s index, pinning ``pins`` (canonical name → version).

    ``index_base``: where the indexes are served (``<base>/<dir_name>/``), or
    None when the build was not told (the checker then prints a placeholder
    base in its install lines).
    """
    if METAPACKAGE in pins:
        raise ValueError("the metapackage cannot pin itself")
    version = metapackage_version(arch, pins, index_base)
    info = f"{DIST_NAME}-{version}.dist-info"
    metadata = "\n".join(
        ["Metadata-Version: 2.1", f"Name: {METAPACKAGE}", f"Version: {version}", f"Summary: {summary(arch)}"]
        + requirement_lines(arch, pins)
    ).encode() + b"\n"
    wheel = b"Wheel-Version: 1.0\nGenerator: rocm-bake\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    members = {**package_members(checker_record(arch, pins, version, index_base)),
               f"{info}/METADATA": metadata, f"{info}/WHEEL": wheel}
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
