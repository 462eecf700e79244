"""Reading a wheel safely: member paths, capped dist-info reads, validated core metadata.

Three refusals, each naming the wheel and what was wrong, before anything
is written:

* **Members that escape the install root.** An installer joins each member
  name to site-packages (or a ``.data`` scheme path); a name that is
  absolute, has a ``..`` component, a drive letter or a backslash (a path
  separator on Windows) would write outside it — ``../../../../tmp/evil.pth``
  is code run at every interpreter start. The index refuses such a wheel as
  it refuses a bad filename.
* **Oversized dist-info members.** ``METADATA`` is served verbatim as the
  PEP 658 ``.metadata`` file and kept in the hash cache, so it is read
  streamed under a cap (:data:`MAX_METADATA_BYTES`). A 1.5 MB wheel whose
  METADATA inflates to 1.5 GB fails on its declared size, before any
  inflation; one that lies about its size stops at the cap.
* **Metadata pip or uv would reject.** Parsed with
  ``packaging.metadata.Metadata.from_email(validate=True)``; an error in
  Name, Version, Requires-Dist or Requires-Python fails the build naming the
  field, so a broken requirement never reaches a user's resolver. Everything
  else that strict validation flags is a quirk real wheels carry and
  installers accept (torch's ``License-File`` and ``Dynamic`` under
  ``Metadata-Version: 2.1``, a free-text ``License``), and is tolerated.
"""

from __future__ import annotations

import re
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from rocm_bake.errors import RocmBakeError

if TYPE_CHECKING:
    from packaging.metadata import Metadata
    from packaging.version import Version

#: Cap on a wheel's METADATA: torch's is ~40 KB; 16 MiB leaves room for any real long description.
MAX_METADATA_BYTES = 16 << 20
_READ_CHUNK = 1 << 20
#: Fields whose errors pip or uv turn into a failed resolve (raw names, as ``packaging`` spells them).
CRITICAL_FIELDS = {
    "name": "Name",
    "version": "Version",
    "requires_dist": "Requires-Dist",
    "requires_python": "Requires-Python",
}
_DRIVE = re.compile(r"^[A-Za-z]:")


@dataclass(frozen=True)
class WheelMetadata:
    """A wheel's core metadata: the bytes served (PEP 658) and the parsed, validated fields."""

    raw: bytes
    metadata: "Metadata"
    #: Requires-Python exactly as written (``data-requires-python`` carries it verbatim).
    requires_python: str | None

    @property
    def name(self) -> str:
        return self.metadata.name

    @property
    def version(self) -> "Version":
        return self.metadata.version


def unsafe_member_reason(name: str) -> str | None:
    """Why member ``name`` would land outside the install root, or None when it is safe."""
    if not name:
        return "an empty name"
    if "\0" in name:
        return "a NUL byte"
    if "\\" in name:
        return "a backslash (a path separator on Windows)"
    if name.startswith("/"):
        return "an absolute path"
    if _DRIVE.match(name):
        return "a drive letter"
    if ".." in name.split("/"):
        return "a '..' component"
    return None


def check_members(zf: zipfile.ZipFile, where: str) -> None:
    """Refuse the wheel if any member would escape the install root (one error listing them)."""
    bad = []
    for info in zf.infolist():
        reason = unsafe_member_reason(info.filename)
        if reason is not None:
            bad.append(f"{info.filename!r} ({reason})")
    if bad:
        shown = ", ".join(bad[:5]) + (f" and {len(bad) - 5} more" if len(bad) > 5 else "")
        raise RocmBakeError(
            f"{where}: rule safe-members: member {shown} would be installed outside the install root; "
            f"refused, as a bad filename is"
        )


def metadata_member(zf: zipfile.ZipFile, where: str) -> zipfile.ZipInfo:
    found = [i for i in zf.infolist() if i.filename.count("/") == 1 and i.filename.endswith(".dist-info/METADATA")]
    if len(found) != 1:
        raise RocmBakeError(
            f"{where}: rule dist-info: expected one top-level *.dist-info/METADATA, found {len(found)}"
        )
    return found[0]


def read_capped(zf: zipfile.ZipFile, info: zipfile.ZipInfo, cap: int, where: str) -> bytes:
    """Member bytes, streamed, never more than ``cap``: refused on the declared size, or at the cap."""
    what = f"{where}: rule member-size: {info.filename}"
    limit = f"over the {cap >> 20} MiB cap for a dist-info member"
    if info.file_size > cap:
        raise RocmBakeError(f"{what} inflates to {info.file_size:,} bytes, {limit} (not read)")
    parts: list[bytes] = []
    total = 0
    with zf.open(info) as handle:
        while chunk := handle.read(min(_READ_CHUNK, cap + 1 - total)):
            parts.append(chunk)
            total += len(chunk)
            if total > cap:
                raise RocmBakeError(f"{what} inflates past its declared size, {limit} (reading stopped)")
    return b"".join(parts)


def _field_errors(group: BaseExceptionGroup) -> list[tuple[str, str]]:  # type: ignore[type-arg]
    """(raw field name, message) for every leaf InvalidMetadata in ``group``."""
    from packaging.metadata import InvalidMetadata

    out = []
    for exc in group.exceptions:
        if isinstance(exc, BaseExceptionGroup):
            out += _field_errors(exc)
        elif isinstance(exc, InvalidMetadata):
            out.append((exc.field.lower().replace("-", "_"), str(exc)))
    return out


def parse_core_metadata(data: bytes, where: str) -> WheelMetadata:
    """Validate METADATA bytes the way a resolver needs them; see the module docstring."""
    from packaging.metadata import InvalidMetadata, Metadata, parse_email

    try:
        meta = Metadata.from_email(data, validate=True)
    except BaseExceptionGroup as group:
        fatal = [(f, m) for f, m in _field_errors(group) if f in CRITICAL_FIELDS]
        if fatal:
            raise _metadata_error(where, fatal) from None
        meta = Metadata.from_email(data, validate=False)
    try:
        for field in CRITICAL_FIELDS:  # validated lazily when strict parsing stopped at a tolerated quirk
            getattr(meta, field)
    except InvalidMetadata as exc:
        raise _metadata_error(where, [(exc.field.lower().replace("-", "_"), str(exc))]) from None
    raw, _unparsed = parse_email(data)
    return WheelMetadata(raw=data, metadata=meta, requires_python=raw.get("requires_python"))


def _metadata_error(where: str, errors: list[tuple[str, str]]) -> RocmBakeError:
    shown = "; ".join(f"{CRITICAL_FIELDS.get(f, f)}: {_printable(_explained(m))}" for f, m in errors)
    return RocmBakeError(f"{where}: rule core-metadata: METADATA {shown} (pip and uv would reject this wheel)")


def _explained(message: str) -> str:
    """packaging's "has invalid data" means the header repeats or is not UTF-8: say so."""
    if message.endswith("has invalid data"):
        return message.replace("has invalid data", "is repeated or is not valid UTF-8 text")
    return message


def _printable(message: str) -> str:
    return message.encode("ascii", "backslashreplace").decode() if not message.isprintable() else message


def read_metadata_bytes(path: Path, where: str | None = None) -> bytes:
    """Check the wheel's member names, then read its METADATA under :data:`MAX_METADATA_BYTES`."""
    where = where or Path(path).name
    try:
        with zipfile.ZipFile(path) as zf:
            check_members(zf, where)
            return read_capped(zf, metadata_member(zf, where), MAX_METADATA_BYTES, where)
    except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, ValueError, NotImplementedError) as exc:
        raise RocmBakeError(f"{where}: rule wheel-archive: not a readable zip archive ({exc})") from None
    except OSError as exc:
        raise RocmBakeError(f"{where}: cannot read the wheel ({exc.strerror or exc})") from None


#: RECORD hash algorithms a wheel may use (the wheel spec: sha256 or stronger; never md5 or sha1).
RECORD_HASHES = ("sha256", "sha384", "sha512")
#: RECORD lists every member but itself and its signatures.
RECORD_UNHASHED = ("RECORD", "RECORD.jws", "RECORD.p7s")


def _record_rows(data: bytes, where: str) -> dict[str, tuple[str, str]]:
    import csv
    import io

    rows: dict[str, tuple[str, str]] = {}
    try:
        for row in csv.reader(io.StringIO(data.decode("utf-8"))):
            if not row:
                continue
            path, digest, size = (row + ["", ""])[:3]
            rows[path] = (digest, size)
    except (UnicodeDecodeError, csv.Error) as exc:
        raise RocmBakeError(f"{where}: rule record: RECORD is not a readable CSV ({exc})") from None
    return rows


def check_record(path: Path, where: str | None = None) -> None:
    """Every member's bytes match its RECORD hash and size; none unlisted, none listed but absent.

    pip checks RECORD only as it installs: a wheel whose member was changed
    after it was built would otherwise enter the index (its ``#sha256=`` then
    vouching for the altered archive) and fail, or not, on each user's machine.
    """
    import base64
    import hashlib

    where = where or Path(path).name
    problems: list[str] = []
    try:
        with zipfile.ZipFile(path) as zf:
            dist_info = metadata_member(zf, where).filename.split("/", 1)[0]
            record = read_capped(zf, zf.getinfo(f"{dist_info}/RECORD"), MAX_METADATA_BYTES, where) \
                if f"{dist_info}/RECORD" in zf.NameToInfo else None
            if record is None:
                raise RocmBakeError(f"{where}: rule record: no {dist_info}/RECORD (a wheel lists and hashes "
                                    "every member there)")
            rows = _record_rows(record, where)
            members = [i for i in zf.infolist() if not i.is_dir()]
            for info in members:
                if info.filename.startswith(f"{dist_info}/") and info.filename.split("/", 1)[1] in RECORD_UNHASHED:
                    continue
                listed = rows.get(info.filename)
                if listed is None:
                    problems.append(f"{info.filename} is not listed")
                    continue
                algo, _, expected = listed[0].partition("=")
                if algo not in RECORD_HASHES or not expected:
                    problems.append(f"{info.filename} has no sha256 (or stronger) hash")
                    continue
                digest, size = hashlib.new(algo), 0
                with zf.open(info) as member:
                    while chunk := member.read(1 << 20):
                        digest.update(chunk)
                        size += len(chunk)
                got = base64.urlsafe_b64encode(digest.digest()).rstrip(b"=").decode()
                if got != expected.rstrip("="):
                    problems.append(f"{info.filename} does not match its {algo}")
                elif listed[1] and listed[1] != str(size):
                    problems.append(f"{info.filename} is {size} bytes, RECORD says {listed[1]}")
            present = {i.filename for i in members}
            problems += [f"{p} is listed but absent" for p in rows if p not in present and not p.endswith("/")]
    except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, ValueError, NotImplementedError) as exc:
        raise RocmBakeError(f"{where}: rule wheel-archive: not a readable zip archive ({exc})") from None
    except OSError as exc:
        raise RocmBakeError(f"{where}: cannot read the wheel ({exc.strerror or exc})") from None
    if problems:
        shown = "; ".join(problems[:5]) + (f"; and {len(problems) - 5} more" if len(problems) > 5 else "")
        raise RocmBakeError(f"{where}: rule record: {shown} (pip would refuse to install it)")
