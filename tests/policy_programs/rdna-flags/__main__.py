"""Breaks arch-build-args: the gfx1201 stack's torch built as if gfx1201 were no RDNA4 part (CK SDPA off)."""

import pulumi_docker_build as docker_build

docker_build.Image(
    "torch-gfx1201",
    context=docker_build.BuildContextArgs(location="."),
    dockerfile=docker_build.DockerfileArgs(location="torch.Dockerfile"),
    target="wheels",
    tags=["127.0.0.1:5000/rocm-bake/torch:gfx1201-rocm10.1.0"],
    push=True,
    build_args={"PYTORCH_ROCM_ARCH": "gfx1201", "USE_ROCM_CK_SDPA_GFX12": "0"},
    build_on_preview=False,
)
