"""The type token of every resource kind rocm-bake declares, Pulumi-free (the policy pack matches on these).

Each dynamic resource class names its own module and type through the SDK
(``class FetchedWheels(pulumi.dynamic.Resource, module="wheels", name="FetchedWheels")``
gives ``pulumi-python:dynamic/wheels:FetchedWheels``), so ``pulumi stack`` and
the policy pack tell a wheel fetch from a release upload by its type rather
than by guessing from its inputs. State written before that holds every one of
them as ``UNTYPED``; the classes alias it, so such a stack upgrades in place.
"""

from __future__ import annotations

from dataclasses import dataclass

#: The docker-build provider's image.
IMAGE = "docker-build:index:Image"
#: The one type every dynamic resource had before each class named its own.
UNTYPED = "pulumi-python:dynamic:Resource"


@dataclass(frozen=True)
class DynamicType:
    """A dynamic resource's module and name, and the type token the engine records for them."""

    module: str
    name: str

    @property
    def token(self) -> str:
        return f"pulumi-python:dynamic/{self.module}:{self.name}"


FETCHED_WHEELS = DynamicType("wheels", "FetchedWheels")
WHEEL_INDEX = DynamicType("index", "WheelIndex")
GPU_TEST = DynamicType("gpu", "GpuTest")
GITHUB_RELEASE = DynamicType("publish", "GitHubRelease")
RELEASE_ASSETS = DynamicType("publish", "ReleaseAssets")
PAGES_INDEX = DynamicType("publish", "PagesIndex")
#: Where a stack's images live and whose checkout chose it (never recorded untyped: it came with its type).
IMAGE_HOME = DynamicType("images", "ImageHome")

#: The resources that write to a GitHub repository (a release, its assets, gh-pages).
PUBLISHING = frozenset({GITHUB_RELEASE.token, RELEASE_ASSETS.token, PAGES_INDEX.token})
#: Every dynamic type, by token.
DYNAMIC = frozenset({FETCHED_WHEELS.token, WHEEL_INDEX.token, GPU_TEST.token, IMAGE_HOME.token} | PUBLISHING)
