"""Where publishing goes when ``rocm-bake:githubRepo`` is unset: the ``origin`` remote, if it is on GitHub.

There is no built-in default target: a fork publishing to the original
author's repository (or pointing its users at the author's Pages site) is the
mistake this prevents. The remote URL may hold credentials: it is parsed
here and never shown.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from rocm_bake.publish.naming import PAGES_ROOT

REPO_ROOT = Path(__file__).resolve().parents[2]

#: ``https://github.com/O/N(.git)``, ``git@github.com:O/N(.git)``, ``ssh://git@github.com/O/N(.git)``.
_GITHUB_REMOTE = re.compile(
    r"^(?:https://(?:[^@/]+@)?github\.com/|ssh://(?:[^@/]+@)?github\.com(?::\d+)?/|git@github\.com:)"
    r"(?P<owner>[\w.-]+)/(?P<name>[\w.-]+?)(?:\.git)?/?$"
)
#: What the outputs say when the repository came from the remote.
FROM_ORIGIN = "taken from the origin remote (set rocm-bake:githubRepo to choose another)"
FROM_CONFIG = "rocm-bake:githubRepo"


def github_repo_of(remote_url: str) -> str | None:
    """``OWNER/NAME`` of a GitHub remote URL; None for any other host or form."""
    match = _GITHUB_REMOTE.match(remote_url.strip())
    return f"{match['owner']}/{match['name']}" if match else None


def origin_github_repo(repo_dir: Path = REPO_ROOT) -> str | None:
    """``OWNER/NAME`` of this checkout's ``origin`` when it is on github.com; None otherwise (or no git)."""
    try:
        result = subprocess.run(["git", "-C", str(repo_dir), "remote", "get-url", "origin"],
                                capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return github_repo_of(result.stdout) if result.returncode == 0 else None


#: GitHub Pages for a project repository (``rocm-bake:githubPagesUrl``'s default).
DEFAULT_PAGES_URL = "https://{owner}.github.io/{repo}"
#: Where publishing puts the indexes on the Pages site.
PAGES_WHEELS = PAGES_ROOT.rstrip("/")


def pages_index_base(repo: str, pages_url: str = DEFAULT_PAGES_URL) -> str:
    """The base every index folder hangs off on ``repo``'s Pages site: ``https://O.github.io/N/data/wheels``."""
    owner, name = repo.split("/", 1)
    return f"{pages_url.format(owner=owner, repo=name).rstrip('/')}/{PAGES_WHEELS}"


def index_base(given: str | None, option: str) -> str:
    """``given``, else the Pages site of the GitHub ``origin`` remote: the one place which-index and the landing
    page take their default from (never a built-in site). None of either is an error naming ``option``."""
    from rocm_bake.errors import RocmBakeError

    if given is not None:  # an empty one is checked (and refused) by the caller, never replaced
        return given
    repo = origin_github_repo()
    if repo is None:
        raise RocmBakeError(
            f"{option}: no default: this checkout's origin remote is not on GitHub, so there is no Pages site to "
            f"assume; give {option} URL (e.g. https://OWNER.github.io/REPO/{PAGES_WHEELS})"
        )
    return pages_index_base(repo)
