"""Breaks prebuild-kernels: AITER's PREBUILD_KERNELS=2 for gfx1201, where level 2 produces no wheel."""

import pulumi_docker_build as docker_build

docker_build.Image(
    "amd_aiter-gfx1201",
    context=docker_build.BuildContextArgs(location="."),
    dockerfile=docker_build.DockerfileArgs(location="amd_aiter.Dockerfile"),
    target="wheels",
    tags=["127.0.0.1:5000/rocm-bake/amd_aiter:gfx1201-rocm10.1.0"],
    push=True,
    build_args={"PYTORCH_ROCM_ARCH": "gfx1201", "PREBUILD_KERNELS": "2"},
    build_on_preview=False,
)
