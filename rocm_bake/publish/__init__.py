"""Publishing one index: the GitHub REST client, the release and the gh-pages commit.

The package face (see ``rocm_bake.lazy_face``): the CLI and the components import from here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rocm_bake.lazy_face import lazy_getattr

_EXPORTS: dict[str, str] = {
    "GitHubClient": "github",
    "GitHubEndpoints": "github",
    "github_endpoints": "github",
    "Publisher": "release",
    "commit_pages": "release",
    "ensure_release": "release",
    "git_blob_sha": "release",
    "pages_prefix": "release",
    "publish": "release",
    "release_tag": "release",
    "release_text": "release",
    "remote_pages": "release",
}

__all__ = sorted(_EXPORTS)

if TYPE_CHECKING:
    from rocm_bake.publish.github import GitHubClient, GitHubEndpoints, github_endpoints
    from rocm_bake.publish.release import Publisher, commit_pages, ensure_release, git_blob_sha, pages_prefix, publish, release_tag, release_text, remote_pages


__getattr__ = lazy_getattr(__name__, _EXPORTS, globals())
