"""Breaks own-release-only: the gfx1201 stack publishes gfx950's release (our GitHubRelease)."""

from components.publish import GitHubRelease, ReleaseInputs
from rocm_bake.archset import ArchSet

GitHubRelease("publish-gfx950-release", ReleaseInputs(
    arch=ArchSet("gfx950"), dist="dist", repo="sbates130272/rocm-bake", rocm_version="10.1.0",
    tag="wheels-gfx950-rocm10.1.0", api_url="https://api.github.com", uploads_url="https://uploads.github.com",
    web_url="https://github.com", pages_url="https://{owner}.github.io/{repo}"))
