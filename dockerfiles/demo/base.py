#!/usr/bin/env python3
"""Make the demo stacks' base image on this machine and push it to a registry.

No image can be pulled from a public registry here, so the base is a Debian
rootfs made with ``debootstrap`` (python3, gcc, binutils: what the stand-in
builds need), cached by version outside the work tree, and turned into an
image ``FROM scratch`` by BuildKit: ``ADD rootfs.tar /``. It plays the part
of ``rocm/dev-ubuntu-*`` (ROCM_IMAGE) and ``python:*-slim`` (PYTHON_IMAGE)
for the demo stacks, and a real stack's config names the real ones instead.

Usage: ``python dockerfiles/demo/base.py --registry 127.0.0.1:5000 [--builder rocm-bake]``.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

#: Bump when the package list or trimming changes: it names the cache and the tag.
BASE_VERSION = "bookworm-1"
SUITE = "bookworm"
PACKAGES = ("python3", "gcc", "libc6-dev", "binutils")
MIRROR = os.environ.get("ROCM_BAKE_DEBIAN_MIRROR", "http://deb.debian.org/debian")
REPOSITORY = "rocm-bake/demo-base"
#: What the image never needs: apt's download cache, docs, translations.
TRIM = ("var/cache/apt/archives", "var/lib/apt/lists", "usr/share/doc", "usr/share/man", "usr/share/locale",
        "usr/share/info")


def cache_dir() -> Path:
    root = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return root / "rocm-bake" / "demo-base" / BASE_VERSION


@contextlib.contextmanager
def cache_lock(directory: Path) -> Iterator[None]:
    """The rootfs cache's lock: one build of it at a time on this machine (every checkout shares the cache)."""
    with (directory / ".lock").open("a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            print(f"demo base: waiting for another build of the rootfs ({directory / '.lock'})", flush=True)
            fcntl.flock(handle, fcntl.LOCK_EX)
        yield


def ensure_rootfs() -> Path:
    """The rootfs tarball, made once per BASE_VERSION (debootstrap takes about a minute).

    The cache is shared by every checkout here: it is built under the cache's lock (a second build waits,
    then finds it made), in a private temporary directory, and appears by one atomic rename.
    """
    out = cache_dir() / "rootfs.tar"
    if out.is_file():
        return out
    if shutil.which("debootstrap") is None:
        sys.exit("demo base: debootstrap not found: `make setup` installs it (apt-get install debootstrap)")
    out.parent.mkdir(parents=True, exist_ok=True)
    with cache_lock(out.parent):
        if out.is_file():
            return out
        started = time.monotonic()
        with tempfile.TemporaryDirectory(dir=out.parent, prefix=".build-") as tmp:
            rootfs = Path(tmp) / "rootfs"
            print(f"demo base: debootstrap {SUITE} with {', '.join(PACKAGES)} ...", flush=True)
            subprocess.run(
                ["debootstrap", "--variant=minbase", f"--include={','.join(PACKAGES)}", SUITE, str(rootfs), MIRROR],
                check=True, stdout=subprocess.DEVNULL,
            )
            for rel in TRIM:
                shutil.rmtree(rootfs / rel, ignore_errors=True)
            partial = Path(tmp) / "rootfs.tar"
            subprocess.run(["tar", "--numeric-owner", "-C", str(rootfs), "-cf", str(partial), "."], check=True)
            partial.replace(out)
    print(f"demo base: rootfs {out.stat().st_size >> 20} MiB in {time.monotonic() - started:.0f} s", flush=True)
    return out


def base_ref(registry: str) -> str:
    return f"{registry}/{REPOSITORY}:{BASE_VERSION}"


def already_pushed(registry: str) -> bool:
    """Whether the registry has the tag: one HEAD through rocm-bake's client (https trusting SSL_CERT_FILE unless a
    loopback registry speaks http; the Docker login of $DOCKER_CONFIG when it asks for one). Any failure is "no":
    the push that follows says what is wrong."""
    from rocm_bake.errors import RocmBakeError
    from rocm_bake.registry.client import RegistryClient, parse_ref

    try:
        with RegistryClient(registry, retries=0, budget_s=30, timeout_s=10) as client:
            client.resolve_digest(parse_ref(base_ref(registry)))
        return True
    except RocmBakeError:
        return False


def push_base(registry: str, builder: str, buildx: str) -> str:
    """Build ``FROM scratch`` + the rootfs with BuildKit and push it; skip when the registry has it."""
    ref = base_ref(registry)
    if already_pushed(registry):
        print(f"demo base: {ref} already in the registry")
        return ref
    rootfs = ensure_rootfs()
    with tempfile.TemporaryDirectory() as tmp:
        context = Path(tmp)
        os.link(rootfs, context / "rootfs.tar") if rootfs.stat().st_dev == context.stat().st_dev else shutil.copy(
            rootfs, context / "rootfs.tar")
        (context / "Dockerfile").write_text("FROM scratch\nADD rootfs.tar /\nCMD [\"/bin/bash\"]\n")
        started = time.monotonic()
        subprocess.run(
            [buildx, "build", "--builder", builder, "--platform", "linux/amd64",
             "--output", f"type=image,name={ref},push=true", str(context)],
            check=True,
        )
    print(f"demo base: pushed {ref} in {time.monotonic() - started:.0f} s", flush=True)
    return ref


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--registry", default="127.0.0.1:5000")
    parser.add_argument("--builder", default="rocm-bake")
    parser.add_argument("--buildx", default=shutil.which("buildx") or ".tools/bin/buildx")
    parser.add_argument("--rootfs-only", action="store_true", help="only make the cached rootfs tarball")
    args = parser.parse_args()
    if args.rootfs_only:
        print(ensure_rootfs())
        return
    print(push_base(args.registry, args.builder, args.buildx))


if __name__ == "__main__":
    main()
