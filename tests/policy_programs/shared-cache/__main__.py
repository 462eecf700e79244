"""Breaks per-arch-cache-refs: the gfx1201 stack's torch image caches on a ref every arch shares."""

import pulumi_docker_build as docker_build

shared = "127.0.0.1:5000/rocm-bake/cache:torch-shared"
docker_build.Image(
    "torch-gfx1201",
    context=docker_build.BuildContextArgs(location="."),
    dockerfile=docker_build.DockerfileArgs(location="torch.Dockerfile"),
    target="wheels",
    tags=["127.0.0.1:5000/rocm-bake/torch:gfx1201-rocm10.1.0"],
    push=True,
    cache_from=[docker_build.CacheFromArgs(registry=docker_build.CacheFromRegistryArgs(ref=shared))],
    cache_to=[docker_build.CacheToArgs(registry=docker_build.CacheToRegistryArgs(ref=shared))],
    build_on_preview=False,
)
