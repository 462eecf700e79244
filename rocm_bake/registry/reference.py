"""Image references: ``registry/repository[:tag][@sha256:…]``, parsed once at the edge.

The registry host must be explicit (no Docker Hub default), credentials in a
reference are refused without being echoed, and the repository, tag and
digest follow the OCI distribution grammar.
"""

from __future__ import annotations

import re

from pydantic import BaseModel

from rocm_bake.errors import RocmBakeError
from rocm_bake.http_waits import redact
from rocm_bake.registry.credentials import ENV_PASSWORD, ENV_USERNAME

DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")
TAG = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")
REPO = re.compile(r"^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*$")


class ImageRef(BaseModel):
    """``registry/repository[:tag][@sha256:…]``, parsed."""

    registry: str
    repository: str
    tag: str | None = None
    digest: str | None = None

    @property
    def reference(self) -> str:
        """What to ask the registry for: the digest when pinned, else the tag."""
        return self.digest or self.tag or ""

    def __str__(self) -> str:
        tag = f":{self.tag}" if self.tag else ""
        digest = f"@{self.digest}" if self.digest else ""
        return f"{self.registry}/{self.repository}{tag}{digest}"


def parse_ref(ref: str) -> ImageRef:
    """Parse a fully-qualified image ref; the registry host must be explicit."""
    text = ref.strip()
    scheme, has_scheme, rest = text.partition("://")
    if "@" in (rest if has_scheme else text).split("/", 1)[0]:  # user:password@registry/...: never echoed or sent
        raise RocmBakeError(f"image ref {redact(text)!r}: credentials in an image ref are refused; "
                            f"set {ENV_USERNAME}/{ENV_PASSWORD}")
    if has_scheme and "/" not in scheme:
        raise RocmBakeError(f"image ref {text!r}: an image ref has no scheme; drop {scheme}:// "
                            f"(write HOST[:PORT]/REPOSITORY[:TAG][@DIGEST])")
    name, _, digest = text.partition("@")
    if digest and not DIGEST.match(digest):
        raise RocmBakeError(f"image ref {ref!r}: digest {digest!r} is not sha256:<64 hex>")
    registry, slash, rest = name.partition("/")
    if not slash or not ("." in registry or ":" in registry or registry == "localhost"):
        raise RocmBakeError(
            f"image ref {ref!r} names no registry host: expected HOST[:PORT]/REPOSITORY[:TAG][@DIGEST], "
            f"e.g. 127.0.0.1:5000/team/image:v1"
        )
    repository, tag = rest, None
    last = rest.rsplit("/", 1)[-1]
    if ":" in last:
        repository, _, tag = rest.rpartition(":")
        if not TAG.match(tag):
            raise RocmBakeError(f"image ref {ref!r}: tag {tag!r} is not a valid tag")
    if not REPO.match(repository):
        raise RocmBakeError(f"image ref {ref!r}: repository {repository!r} is not a valid name")
    return ImageRef(registry=registry, repository=repository, tag=tag, digest=digest or None)
