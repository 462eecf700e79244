"""``ArchIndex``: one arch set's wheels fetched out of its images, then served as its own pip index.

The two steps are one concern: the index is built from exactly the wheels the
fetch wrote, and a fat build (``gfx950;gfx1201``) gets its own index like a
single arch. Both dynamic resources are children of this component; each keeps
its name (``wheels-<dir>``, ``index-<dir>``) and an alias at the stack's
root, so a stack whose state holds them there (declared without this
component) adopts what it recorded instead of fetching or indexing again.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pulumi

from components.images import TargetImage
from components.index_provider import IndexInputs, WheelIndex
from components.wheels_provider import FetchedWheels, FetchInputs
from rocm_bake.archset import ArchSet

#: The children's place in a stack declared without this component: at the stack's root.
AT_THE_ROOT = [pulumi.Alias(parent=pulumi.ROOT_STACK_RESOURCE)]


@dataclass(frozen=True)
class ArchIndexArgs:
    """The arch set, the images whose wheels it serves (fetched by digest), ``DIST`` and the ROCm version.

    ``index_base``: where the indexes are published (the stack's Pages site when it publishes), recorded in
    the metapackage so that its ``python -m rocm_torch`` prints install lines that work; None when not publishing.
    """

    arch: ArchSet
    images: Sequence[TargetImage]
    dist: str
    rocm_version: str
    index_base: str | None = None


class ArchIndex(pulumi.ComponentResource):
    """``DIST/wheels/<dir>/`` fetched from ``images``, and ``DIST/index/<dir>/`` built from it.

    Outputs: ``wheels_dir``, ``wheel_count``, ``index_dir``, ``index_sha256``.
    """

    wheels_dir: pulumi.Output[str]
    wheel_count: pulumi.Output[int]
    index_dir: pulumi.Output[str]
    index_sha256: pulumi.Output[str]

    def __init__(self, name: str, args: ArchIndexArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("rocm-bake:index:ArchIndex", name, None, opts)
        dir_name = args.arch.dir_name
        self.fetched = FetchedWheels(
            f"wheels-{dir_name}",
            FetchInputs(arch=args.arch, image_refs=[image.ref for image in args.images],  # type: ignore[misc]
                        dist=str(args.dist)),
            pulumi.ResourceOptions(parent=self, depends_on=list(args.images), aliases=AT_THE_ROOT),
        )
        self.index = WheelIndex(
            f"index-{dir_name}",
            IndexInputs(arch=args.arch, wheels_dir=self.fetched.wheels_dir,  # type: ignore[arg-type]
                        dist=str(args.dist), rocm_version=args.rocm_version, index_base=args.index_base),
            pulumi.ResourceOptions(parent=self, depends_on=[self.fetched], aliases=AT_THE_ROOT),
        )
        self.wheels_dir = self.fetched.wheels_dir
        self.wheel_count = self.fetched.wheel_count
        self.index_dir = self.index.index_dir
        self.index_sha256 = self.index.index_sha256
        self.register_outputs({"wheels_dir": self.wheels_dir, "wheel_count": self.wheel_count,
                               "index_dir": self.index_dir, "index_sha256": self.index_sha256})
