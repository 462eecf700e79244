"""Breaks own-release-only: the gfx1201 stack publishes gfx950's release (our GitHubRelease)."""

from components.publish import GitHubRelease

GitHubRelease("publish-gfx950-release", {"arch": "gfx950", "dist": "dist", "repo": "sbates130272/rocm-bake",
                                         "rocm_version": "10.1.0", "api_url": "https://api.github.com"})
