"""One ``docker_build.Image`` per build target, on the stack's buildx builder.

Scale-out is BuildKit's: the builder named in stack config may be a
docker-container, kubernetes or remote driver, so pointing a stack at a
build farm is a config change, not code of ours.
"""

from __future__ import annotations

from collections.abc import Sequence

import pulumi
import pulumi_docker_build as docker_build

from rocm_bake.image_plan import ImageSpec


class TargetImage(pulumi.ComponentResource):
    """A build target's image, tagged by arch and cached per CACHE_ARCH.

    Dependencies arrive as BuildKit named contexts pinned to the dependency's
    pushed ``ref`` (tag@digest), so a rebuilt base changes its dependants'
    inputs and Pulumi rebuilds exactly those. ``after``: resources the build waits for (the stack's
    ``ImageHome``, whose check may refuse the run before anything is built).
    """

    ref: pulumi.Output[str]
    digest: pulumi.Output[str]

    def __init__(
        self,
        name: str,
        spec: ImageSpec,
        deps: dict[str, "TargetImage"],
        opts: pulumi.ResourceOptions | None = None,
        after: Sequence[pulumi.Resource] = (),
    ) -> None:
        super().__init__("rocm-bake:images:TargetImage", name, {"target": spec.target}, opts)
        named = {
            dep: docker_build.ContextArgs(location=deps[dep].ref.apply(lambda r: f"docker-image://{r}"))
            for dep in spec.depends_on
        }
        self.image = docker_build.Image(
            name,
            context=docker_build.BuildContextArgs(location=spec.context, named=named or None),
            dockerfile=docker_build.DockerfileArgs(location=spec.dockerfile),
            target=spec.stage,
            build_args=spec.build_args,
            tags=[spec.tag],
            push=spec.push,
            platforms=[docker_build.Platform.LINUX_AMD64],
            builder=docker_build.BuilderConfigArgs(name=spec.builder),
            cache_from=[
                docker_build.CacheFromArgs(
                    registry=docker_build.CacheFromRegistryArgs(ref=spec.cache_ref)
                )
            ],
            cache_to=[
                docker_build.CacheToArgs(
                    registry=docker_build.CacheToRegistryArgs(
                        ref=spec.cache_ref,
                        mode=docker_build.CacheMode.MAX,
                        image_manifest=True,
                        oci_media_types=True,
                    )
                )
            ],
            build_on_preview=False,
            opts=pulumi.ResourceOptions(
                parent=self, depends_on=[*after, *(deps[d] for d in spec.depends_on)]
            ),
        )
        self.ref = self.image.ref
        self.digest = self.image.digest
        self.tag = spec.tag
        self.register_outputs({"ref": self.ref, "digest": self.digest, "tag": spec.tag})
