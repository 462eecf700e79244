"""OCI and Docker manifests: the media types, blob descriptors, and the one platform every image is built for.

An index (OCI image index or Docker manifest list) resolves to its
linux/amd64 image manifest; attestation manifests in it are ignored.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from rocm_bake.errors import RocmBakeError

OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_INDEX = "application/vnd.oci.image.index.v1+json"
DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"
DOCKER_LIST = "application/vnd.docker.distribution.manifest.list.v2+json"
IMAGE_MANIFESTS = frozenset({OCI_MANIFEST, DOCKER_MANIFEST})
INDEX_MANIFESTS = frozenset({OCI_INDEX, DOCKER_LIST})
ACCEPT = ", ".join([OCI_INDEX, DOCKER_LIST, OCI_MANIFEST, DOCKER_MANIFEST])

#: The platform every image here is built for (components/images.py).
PLATFORM_OS = "linux"
PLATFORM_ARCH = "amd64"


class Descriptor(BaseModel):
    mediaType: str = ""
    digest: str
    size: int
    annotations: dict[str, str] | None = None
    platform: dict[str, Any] | None = None


class ResolvedImage(BaseModel):
    """A ref resolved to one linux/amd64 image manifest."""

    ref: str
    #: Digest of what the ref names (the index, when it is one).
    manifest_digest: str
    #: Digest of the linux/amd64 image manifest actually used.
    image_digest: str
    media_type: str
    config: Descriptor
    layers: list[Descriptor]


def pick_platform(index: dict[str, Any], what: str) -> Descriptor:
    """The linux/amd64 entry of an index (attestation manifests are ignored)."""
    seen: list[str] = []
    for raw in index.get("manifests", []):
        desc = Descriptor.model_validate(raw)
        platform = desc.platform or {}
        seen.append(f"{platform.get('os', '?')}/{platform.get('architecture', '?')}")
        if (desc.annotations or {}).get("vnd.docker.reference.type") == "attestation-manifest":
            continue
        if platform.get("os") == PLATFORM_OS and platform.get("architecture") == PLATFORM_ARCH:
            return desc
    raise RocmBakeError(
        f"{what}: index has no {PLATFORM_OS}/{PLATFORM_ARCH} image (platforms: {', '.join(seen) or 'none'})"
    )
