"""Fetch an arch's wheels out of OCI images into ``DIST/wheels/<arch>/``.

Every wheel here has an architecture-independent filename (torch is
``torch-…-linux_x86_64.whl`` for gfx950 and gfx1201 alike), so one directory
per arch is what keeps them from overwriting each other; this module fills
that directory from images fetched by arch tag (see ``rocm_bake.registry.tags``).

* Only ``*.whl`` files directly inside the image's wheel directory are taken
  (default ``/wheels/``: every ``dockerfiles/*`` target ends in a ``FROM
  scratch AS wheels`` stage that copies its wheels there). Anything else in a
  layer is ignored and counted.
* Layers are applied in order with OCI whiteouts: ``.wh.<name>`` deletes
  ``<name>`` from lower layers, ``.wh..wh..opq`` hides a directory's lower
  contents, so a wheel deleted in a later layer is not extracted.
* Layers that cannot hold wheels are not fetched, when the image config's
  history says so: a ``COPY``/``ADD`` whose absolute destination is neither
  inside nor above the wheel directory. ``RUN`` layers and anything unclear
  are always fetched, so the skip never changes the result.
* Output is atomic: everything is written into a temp dir beside the target
  and renamed into place, with ``.rocm-bake-fetch.json`` recording each image's
  digest and wheels (name, sha256, size). An image whose digest is already
  recorded (and whose wheels are present at their recorded sizes) is not
  downloaded again; when every image is, nothing on disk changes.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import tarfile
import uuid
import zlib
from pathlib import Path
from typing import IO, Any

from packaging.utils import InvalidWheelFilename, parse_wheel_filename
from pydantic import BaseModel, ValidationError

from rocm_bake.archset import ArchSet
from rocm_bake.errors import RocmBakeError
from rocm_bake.registry.client import RegistryClient
from rocm_bake.registry.manifest import Descriptor, ResolvedImage
from rocm_bake.registry.reader import VerifyingReader
from rocm_bake.registry.reference import ImageRef
from rocm_bake.registry.tags import check_ref_for_arch

DEFAULT_WHEEL_DIR = "/wheels/"
FETCH_MANIFEST = ".rocm-bake-fetch.json"
SCHEMA_VERSION = 1
COPY_CHUNK = 1 << 20

Parts = tuple[str, ...]


class WheelRecord(BaseModel):
    name: str
    sha256: str
    size: int


class ImageRecord(BaseModel):
    """One image's contribution to an arch's wheel directory."""

    ref: str
    manifest_digest: str
    image_digest: str
    wheels: list[WheelRecord]


class FetchManifest(BaseModel):
    """The ``.rocm-bake-fetch.json`` beside the wheels."""

    schema_version: int = SCHEMA_VERSION
    arch: ArchSet
    wheel_dir: str
    images: list[ImageRecord]
    wheels: list[WheelRecord]


class ImageFetch(BaseModel):
    ref: str
    manifest_digest: str
    skipped: bool
    wheels: list[WheelRecord]
    bytes_fetched: int
    layers_fetched: int
    layers_skipped: int
    members_ignored: int


class FetchResult(BaseModel):
    arch: ArchSet
    wheels_dir: str
    #: True when every image's digest was already extracted: nothing changed.
    skipped: bool
    images: list[ImageFetch]
    wheels: list[WheelRecord]
    bytes_fetched: int
    wheel_bytes: int


# -- paths -----------------------------------------------------------------


def path_parts(name: str, what: str) -> Parts:
    """Normalise a tar member name; refuse one that climbs out with ``..``."""
    parts = tuple(p for p in name.replace("\\", "/").split("/") if p not in ("", "."))
    if ".." in parts:
        raise RocmBakeError(f"{what}: entry {name!r} escapes the image root (path traversal); refusing the image")
    return parts


def wheel_dir_parts(wheel_dir: str) -> Parts:
    """``/wheels/`` → ``("wheels",)``; must be absolute and not the root."""
    if not wheel_dir.startswith("/"):
        raise RocmBakeError(f"wheel directory {wheel_dir!r} must be an absolute in-image path like /wheels/")
    parts = path_parts(wheel_dir, "wheel directory")
    if not parts:
        raise RocmBakeError("wheel directory '/' refused: name the directory the image copies wheels into, e.g. /wheels/")
    return parts


def is_prefix(a: Parts, b: Parts) -> bool:
    return len(a) <= len(b) and b[: len(a)] == a


def check_wheel_name(name: str, what: str) -> None:
    try:
        parse_wheel_filename(name)
    except InvalidWheelFilename as exc:
        raise RocmBakeError(f"{what}: {name!r} is not a valid wheel filename: {exc}") from None


# -- which layers to fetch ---------------------------------------------------

COPY_ADD = re.compile(r"^(?:/bin/sh -c #\(nop\)\s*)?(COPY|ADD)\s+(.*)$", re.S)


def layer_may_hold_wheels(created_by: str | None, wheel_parts: Parts) -> bool:
    """False only for a COPY/ADD whose absolute destination is beside the wheel dir.

    A layer created by COPY or ADD writes only under its destination, so one
    copying to ``/opt/x`` cannot add or delete ``/wheels/*``. RUN can do
    anything, so it is always fetched.
    """
    text = re.sub(r"\s*# buildkit\s*$", "", (created_by or "").strip())
    match = COPY_ADD.match(text)
    if not match:
        return True
    args = [a for a in match.group(2).split() if not a.startswith("--")]
    if not args or not args[-1].startswith("/"):
        return True
    try:
        dest = path_parts(args[-1], "history")
    except RocmBakeError:
        return True
    return is_prefix(dest, wheel_parts) or is_prefix(wheel_parts, dest)


def select_layers(config: dict[str, Any], layer_count: int, wheel_parts: Parts) -> list[bool]:
    """Per layer, whether to fetch it; all when history does not map onto layers."""
    history = config.get("history") or []
    entries = [h for h in history if isinstance(h, dict) and not h.get("empty_layer")]
    if len(entries) != layer_count:
        return [True] * layer_count
    return [layer_may_hold_wheels(h.get("created_by"), wheel_parts) for h in entries]


def compression_of(desc: Descriptor) -> str:
    """``gzip``, ``zstd`` or ``none`` from a layer's media type; refuse the rest."""
    media = desc.mediaType
    if media.endswith("gzip"):
        return "gzip"
    if media.endswith("zstd"):
        return "zstd"
    if media.endswith(".tar") or media.endswith(".tar+"):
        return "none"
    raise RocmBakeError(f"layer {desc.digest}: unsupported layer media type {media!r}")


def open_tar(reader: VerifyingReader, compression: str) -> tarfile.TarFile:
    if compression == "gzip":
        return tarfile.open(fileobj=reader, mode="r|gz", bufsize=COPY_CHUNK)  # type: ignore[call-overload]
    if compression == "zstd":  # streamed: a zstd layer is decompressed as it arrives, never held whole
        from rocm_bake.zstd import zstd

        stream = zstd().ZstdFile(reader, mode="rb")
        return tarfile.open(fileobj=stream, mode="r|", bufsize=COPY_CHUNK)  # type: ignore[call-overload]
    return tarfile.open(fileobj=reader, mode="r|", bufsize=COPY_CHUNK)  # type: ignore[call-overload]


# -- applying layers ---------------------------------------------------------


class Staged(BaseModel):
    path: str
    sha256: str
    size: int


class LayerStack:
    """The wheel directory's contents after each layer, staged on disk."""

    def __init__(self, staging: Path, wheel_parts: Parts, prefix: str = "") -> None:
        self.staging = staging
        self.prefix = prefix
        self.wheel_parts = wheel_parts
        self.files: dict[str, Staged] = {}
        self.counter = 0
        self.ignored = 0

    def _new_part(self) -> Path:
        self.counter += 1
        return self.staging / f".part-{self.prefix}{self.counter}"

    def _write(self, src: IO[bytes]) -> Staged:
        dest = self._new_part()
        digest = hashlib.sha256()
        size = 0
        try:
            out = open(dest, "wb")
        except OSError as exc:
            raise cannot_write(dest, exc) from None
        with out:
            while chunk := src.read(COPY_CHUNK):
                digest.update(chunk)
                try:
                    out.write(chunk)
                except OSError as exc:  # a full disk is not "an unreadable layer"
                    raise cannot_write(dest, exc) from None
                size += len(chunk)
        return Staged(path=str(dest), sha256=digest.hexdigest(), size=size)

    def _copy(self, staged: Staged) -> Staged:
        dest = self._new_part()
        try:
            shutil.copyfile(staged.path, dest)
        except OSError as exc:
            raise cannot_write(dest, exc) from None
        return staged.model_copy(update={"path": str(dest)})

    def _drop(self, staged: Staged) -> None:
        Path(staged.path).unlink(missing_ok=True)

    def apply(self, tar: tarfile.TarFile, what: str) -> None:
        """Apply one layer: whiteouts hit lower layers only, then this layer's files land."""
        wp = self.wheel_parts
        clear_lower = False
        deletions: set[str] = set()
        added: dict[str, Staged] = {}
        for member in tar:
            parts = path_parts(member.name, what)
            if not parts:
                continue
            parent, base = parts[:-1], parts[-1]
            if base == ".wh..wh..opq":
                clear_lower |= is_prefix(parent, wp)
                continue
            if base.startswith(".wh."):
                target = (*parent, base[4:])
                if is_prefix(target, wp):
                    clear_lower = True
                elif parent == wp:
                    deletions.add(base[4:])
                continue
            if is_prefix(parts, wp):
                if not member.isdir():  # a file or link replacing the directory hides its contents
                    clear_lower = True
                continue
            if parent != wp or not base.endswith(".whl"):
                self.ignored += 1
                continue
            check_wheel_name(base, what)
            if member.isreg():
                src = tar.extractfile(member)
                assert src is not None
                if base in added:
                    self._drop(added[base])
                added[base] = self._write(src)
            elif member.islnk():
                added[base] = self._copy(self._link_target(member, added, what))
            elif member.issym():
                raise RocmBakeError(
                    f"{what}: wheel {member.name!r} is a symlink to {member.linkname!r}; refusing "
                    f"(its target could lie outside the wheel directory)"
                )
            elif member.isdir():
                deletions.add(base)
            else:
                raise RocmBakeError(f"{what}: wheel {member.name!r} is not a regular file (tar type {member.type!r})")
        if clear_lower:
            for staged in self.files.values():
                self._drop(staged)
            self.files = {}
        for name in deletions:
            if name in self.files:
                self._drop(self.files.pop(name))
        for name, staged in added.items():
            if name in self.files:
                self._drop(self.files[name])
            self.files[name] = staged

    def _link_target(self, member: tarfile.TarInfo, added: dict[str, Staged], what: str) -> Staged:
        link = path_parts(member.linkname, what)
        if link[:-1] == self.wheel_parts and link:
            found = added.get(link[-1]) or self.files.get(link[-1])
            if found is not None:
                return found
        raise RocmBakeError(
            f"{what}: wheel {member.name!r} is a hard link to {member.linkname!r}, which is not a wheel "
            f"already in {'/' + '/'.join(self.wheel_parts)}/; refusing"
        )


def apply_layer(client: RegistryClient, repository: str, desc: Descriptor, stack: LayerStack) -> None:
    """Stream one layer blob through tar into ``stack``, digest-verified."""
    what = f"layer {desc.digest}"
    compression = compression_of(desc)
    with client.open_blob(repository, desc) as reader:
        try:
            with open_tar(reader, compression) as tar:
                stack.apply(tar, what)
        except RocmBakeError:
            raise
        except (tarfile.TarError, zlib.error, EOFError, OSError) as exc:
            reader.drain()  # a corrupted blob reports as a digest mismatch, not a tar error
            raise RocmBakeError(f"{what}: not a readable {compression} tar: {exc}") from exc
        reader.drain()


# -- one image ---------------------------------------------------------------


def extract_image(
    client: RegistryClient,
    ref: ImageRef,
    resolved: ResolvedImage,
    wheel_parts: Parts,
    staging: Path,
    all_layers: bool,
    prefix: str = "",
) -> tuple[dict[str, Staged], int, int, int]:
    """Extract an image's wheels into ``staging``; return (wheels, fetched, skipped, ignored)."""
    config = client.get_blob_json(ref.repository, resolved.config)
    wanted = [True] * len(resolved.layers) if all_layers else select_layers(config, len(resolved.layers), wheel_parts)
    chosen = [desc for desc, keep in zip(resolved.layers, wanted) if keep]
    for desc in chosen:  # refuse an unreadable compression before downloading anything
        compression_of(desc)
    stack = LayerStack(staging, wheel_parts, prefix)
    for desc in chosen:
        apply_layer(client, ref.repository, desc, stack)
    return stack.files, len(chosen), len(resolved.layers) - len(chosen), stack.ignored


# -- the arch directory --------------------------------------------------------


def cannot_write(path: Path | str, exc: OSError) -> RocmBakeError:
    return RocmBakeError(f"cannot write {path}: {exc.strerror or exc}")


def check_writable(out: Path) -> None:
    """Refuse an ``out`` that cannot be written, before a layer is downloaded.

    The nearest existing ancestor of ``out`` must be a directory we may
    write to (``os.access`` reports a read-only file system even to root).
    """
    probe = out
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    if not probe.is_dir():
        raise RocmBakeError(f"cannot write {out}: {probe} is not a directory")
    # out itself is renamed away and back within its parent, so that parent must be writable too
    for place in (probe, out.parent) if probe == out else (probe,):
        if not os.access(place, os.W_OK | os.X_OK):
            why = "read-only file system" if _read_only(place) else "permission denied"
            raise RocmBakeError(f"cannot write {out}: {place} is not writable ({why}); nothing was fetched")


def _read_only(path: Path) -> bool:
    try:
        return bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    except OSError:
        return False


def read_fetch_manifest(out: Path) -> FetchManifest | None:
    path = out / FETCH_MANIFEST
    if not path.exists():
        return None
    try:
        return FetchManifest.model_validate_json(path.read_text(encoding="utf-8"))
    except (ValueError, ValidationError):
        return None


def reusable(record: ImageRecord, out: Path) -> bool:
    """An earlier extraction of this digest is still on disk at its recorded sizes."""
    for wheel in record.wheels:
        path = out / wheel.name
        if not path.is_file() or path.stat().st_size != wheel.size:
            return False
    return True


def swap_into_place(tmp: Path, out: Path) -> None:
    """Rename ``tmp`` to ``out``, moving an existing ``out`` aside first."""
    if not out.exists():
        os.rename(tmp, out)
        return
    old = out.with_name(f".old-{out.name}-{uuid.uuid4().hex[:8]}")
    os.rename(out, old)
    try:
        os.rename(tmp, out)
    except OSError:
        os.rename(old, out)
        raise
    shutil.rmtree(old, ignore_errors=True)


def link_or_copy(src: Path, dest: Path) -> None:
    try:
        os.link(src, dest)
    except OSError:
        shutil.copy2(src, dest)


def fetch_wheels(
    arch: ArchSet,
    image_refs: list[str],
    dist: Path,
    *,
    wheel_dir: str = DEFAULT_WHEEL_DIR,
    all_layers: bool = False,
    clients: dict[str, RegistryClient] | None = None,
    timeout_s: float | None = None,
) -> FetchResult:
    """Make ``dist/wheels/<arch>/`` hold exactly the wheels of ``image_refs``.

    Every ref is checked against ``arch`` before anything is downloaded.
    Wheel names shared by two images must have identical content.
    """
    if not image_refs:
        raise RocmBakeError(f"no images given for {arch}: pass at least one --image")
    refs = [check_ref_for_arch(r, arch) for r in image_refs]
    dupes = sorted({str(r) for r in refs if [str(x) for x in refs].count(str(r)) > 1})
    if dupes:
        raise RocmBakeError(f"image {', '.join(dupes)} given more than once for {arch}")
    wheel_parts = wheel_dir_parts(wheel_dir)
    wheel_dir_norm = "/" + "/".join(wheel_parts) + "/"
    dist = Path(dist)
    root = dist / "wheels"
    out = root / arch.dir_name
    if dist.exists() and not dist.is_dir():
        raise RocmBakeError(f"--out {dist}: is not a directory (wheels go to DIST/wheels/<arch>/)")
    if out.exists() and not (out / FETCH_MANIFEST).exists():
        raise RocmBakeError(
            f"{out} exists but has no {FETCH_MANIFEST}: not replacing files rocm-bake did not write"
        )
    previous = read_fetch_manifest(out)
    if previous is not None and (previous.arch != arch or previous.wheel_dir != wheel_dir_norm):
        previous = None
    owned = clients is None
    pool: dict[str, RegistryClient] = {} if clients is None else clients
    if owned and timeout_s is not None:  # --timeout: the inactivity bound of every request
        for ref in refs:
            pool.setdefault(ref.registry, RegistryClient(ref.registry, timeout_s=timeout_s))
    try:
        return _fetch(arch, refs, out, root, wheel_parts, wheel_dir_norm, previous, all_layers, pool)
    finally:
        if owned:
            for client in pool.values():
                client.close()


def _client(pool: dict[str, RegistryClient], registry: str) -> RegistryClient:
    if registry not in pool:
        pool[registry] = RegistryClient(registry)
    return pool[registry]


def _fetch(
    arch: ArchSet,
    refs: list[ImageRef],
    out: Path,
    root: Path,
    wheel_parts: Parts,
    wheel_dir: str,
    previous: FetchManifest | None,
    all_layers: bool,
    pool: dict[str, RegistryClient],
) -> FetchResult:
    known = {rec.manifest_digest: rec for rec in previous.images} if previous else {}
    base = sum(c.bytes_fetched for c in pool.values())
    plans: list[tuple[ImageRef, str, ImageRecord | None]] = []
    for ref in refs:
        digest = _client(pool, ref.registry).resolve_digest(ref)
        record = known.get(digest)
        plans.append((ref, digest, record if record and reusable(record, out) else None))
    if previous is not None and all(rec is not None for _, _, rec in plans) and len(previous.images) == len(plans):
        images = [
            ImageFetch(
                ref=str(ref), manifest_digest=digest, skipped=True, wheels=rec.wheels, bytes_fetched=0,
                layers_fetched=0, layers_skipped=0, members_ignored=0,
            )
            for ref, digest, rec in plans
            if rec is not None
        ]
        return _result(arch, out, True, images, previous.wheels, pool, base)

    check_writable(out)  # an unchanged fetch above writes nothing, so a read-only DIST is fine there
    try:
        root.mkdir(parents=True, exist_ok=True)
        # mkdir, not mkdtemp (0700): the directory gets the umask's mode like the rest of DIST,
        # so another user serving DIST (a web server) can still read it
        tmp = root / f".tmp-{out.name}-{uuid.uuid4().hex[:8]}"
        os.mkdir(tmp)
    except OSError as exc:
        raise cannot_write(root, exc) from None
    try:
        images, records, wheels = _populate(plans, out, tmp, wheel_parts, all_layers, pool)
        if not wheels:
            # An image with no wheels is a broken build, not an empty index: keep what was fetched before.
            raise RocmBakeError(
                f"no wheels found under {wheel_dir} in {', '.join(str(r) for r in refs)} for {arch}; "
                f"{out} is left as it was (is the image's final stage `FROM scratch` + COPY to {wheel_dir}?)"
            )
        manifest = FetchManifest(arch=arch, wheel_dir=wheel_dir, images=records, wheels=wheels)
        try:
            (tmp / FETCH_MANIFEST).write_text(manifest.model_dump_json(indent=2) + "\n", encoding="utf-8")
            swap_into_place(tmp, out)
        except OSError as exc:
            raise cannot_write(out, exc) from None
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return _result(arch, out, False, images, wheels, pool, base)


def _populate(
    plans: list[tuple[ImageRef, str, ImageRecord | None]],
    out: Path,
    tmp: Path,
    wheel_parts: Parts,
    all_layers: bool,
    pool: dict[str, RegistryClient],
) -> tuple[list[ImageFetch], list[ImageRecord], list[WheelRecord]]:
    images: list[ImageFetch] = []
    records: list[ImageRecord] = []
    owner: dict[str, tuple[str, WheelRecord]] = {}

    def claim(name: str, wheel: WheelRecord, ref: ImageRef) -> bool:
        """True if ``name`` is new; refuse a same-named wheel with other content."""
        if name in owner:
            other_ref, other = owner[name]
            if other.sha256 != wheel.sha256:
                raise RocmBakeError(
                    f"wheel {name} is in both {other_ref} and {ref} with different content "
                    f"(sha256 {other.sha256[:12]}… vs {wheel.sha256[:12]}…): refusing to pick one"
                )
            return False
        owner[name] = (str(ref), wheel)
        return True

    for index, (ref, digest, reuse) in enumerate(plans):
        client = _client(pool, ref.registry)
        if reuse is not None:
            for wheel in reuse.wheels:
                if claim(wheel.name, wheel, ref):
                    link_or_copy(out / wheel.name, tmp / wheel.name)
            records.append(reuse.model_copy(update={"ref": str(ref)}))
            images.append(
                ImageFetch(
                    ref=str(ref), manifest_digest=digest, skipped=True, wheels=reuse.wheels, bytes_fetched=0,
                    layers_fetched=0, layers_skipped=0, members_ignored=0,
                )
            )
            continue
        before = client.bytes_fetched
        pinned = ref.model_copy(update={"digest": digest})
        resolved = client.resolve_image(pinned)
        staged, fetched, skipped, ignored = extract_image(
            client, pinned, resolved, wheel_parts, tmp, all_layers, prefix=f"{index}-"
        )
        wheels = [WheelRecord(name=n, sha256=s.sha256, size=s.size) for n, s in sorted(staged.items())]
        for wheel in wheels:
            if claim(wheel.name, wheel, ref):
                os.replace(staged[wheel.name].path, tmp / wheel.name)
            else:
                Path(staged[wheel.name].path).unlink()
        records.append(ImageRecord(ref=str(ref), manifest_digest=digest, image_digest=resolved.image_digest, wheels=wheels))
        images.append(
            ImageFetch(
                ref=str(ref), manifest_digest=digest, skipped=False, wheels=wheels,
                bytes_fetched=client.bytes_fetched - before, layers_fetched=fetched,
                layers_skipped=skipped, members_ignored=ignored,
            )
        )
    all_wheels = sorted((w for _, w in owner.values()), key=lambda w: w.name)
    return images, records, all_wheels


def _result(
    arch: ArchSet, out: Path, skipped: bool, images: list[ImageFetch], wheels: list[WheelRecord],
    pool: dict[str, RegistryClient],
    base: int,
) -> FetchResult:
    return FetchResult(
        arch=arch,
        wheels_dir=str(out),
        skipped=skipped,
        images=images,
        wheels=wheels,
        bytes_fetched=sum(c.bytes_fetched for c in pool.values()) - base,
        wheel_bytes=sum(w.size for w in wheels),
    )
