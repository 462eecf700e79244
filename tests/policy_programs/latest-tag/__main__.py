"""Breaks arch-scoped-tags: the gfx1201 stack's torch image pushed as :latest."""

import pulumi_docker_build as docker_build

docker_build.Image(
    "torch-gfx1201",
    context=docker_build.BuildContextArgs(location="."),
    dockerfile=docker_build.DockerfileArgs(location="torch.Dockerfile"),
    target="wheels",
    tags=["127.0.0.1:5000/rocm-bake/torch:latest"],
    push=True,
    build_on_preview=False,
)
