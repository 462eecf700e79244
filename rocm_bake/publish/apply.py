"""Making GitHub hold the planned index: verified asset uploads, the release, and one gh-pages commit.

* An upload is verified against GitHub's answer (name, size, sha256); a 422
  ``already_exists`` (a concurrent upload) is compared, not fatal.
* The pages go in ONE commit on the current gh-pages head through the Git
  Data API (blobs, tree, commit, ref), so readers never see half an index;
  other arches' folders are untouched and an identical tree commits nothing.
"""

from __future__ import annotations

from pathlib import Path

from rocm_bake import progress
from rocm_bake.archset import ArchSet
from rocm_bake.errors import RocmBakeError
from rocm_bake.publish.github import Asset, GitHubClient, GitHubHTTPError, Release
from rocm_bake.publish.hashing import git_blob_sha
from rocm_bake.publish.local import LocalFile
from rocm_bake.publish.naming import PAGES_BRANCH, PAGES_ROOT, pages_prefix, release_text
from rocm_bake.publish.plan import plan_pages, remote_tree, replace_reason
from rocm_bake.retry import Retryable

BLOB_MODE = "100644"


def upload_verified(client: GitHubClient, release_id: int, f: LocalFile) -> Asset:
    """Upload ``f`` until GitHub holds exactly it; a duplicate name is compared, not fatal.

    Retried under the client's one retry policy. A 5xx may leave an empty
    asset in state ``starter``: it is deleted before the next attempt, and
    the next run finishes whatever this one could not.
    """

    def once() -> Asset:
        try:
            asset = client.upload_asset(release_id, f.name, Path(f.path))
        except GitHubHTTPError as exc:
            if exc.status == 422 and "already_exists" in exc.codes:
                existing = next((a for a in client.list_assets(release_id) if a.name == f.name), None)
                if existing is not None and replace_reason(existing, f) is None:
                    return existing  # a concurrent publisher put the very same file there
                if existing is not None:
                    client.delete_asset(existing.id)
                raise Retryable("another asset of that name appeared meanwhile (deleted it)", wait_s=0.0) from None
            if exc.status == 0 or exc.status >= 500:
                _delete_starters(client, release_id, f.name)
                reason = str(exc).split(": ", 1)[-1]  # what follows "GitHub POST <url>: "
                raise Retryable(reason, timed_out=exc.timed_out) from None
            raise
        problem = None if asset.name == f.name else f"GitHub stored it as {asset.name!r}"
        problem = problem or replace_reason(asset, f)
        if problem:
            raise RocmBakeError(f"upload of {f.name} did not verify: {problem}")
        return asset

    return client.retry.call(f"upload of {f.name}", once, hint="run publish again to finish")


def _delete_starters(client: GitHubClient, release_id: int, name: str) -> None:
    """Delete the empty ``starter`` asset a failed upload may leave, so the name is free again."""
    for stale in client.list_assets(release_id):
        if stale.name == name and stale.state != "uploaded":
            client.delete_asset(stale.id)


def ensure_release(client: GitHubClient, arch: ArchSet, tag: str, rocm_version: str, create: bool) -> Release:
    release = client.get_release_by_tag(tag)
    if release is not None:
        return release
    if not create:
        raise RocmBakeError(f"release {tag} does not exist in {client.repo}")
    return client.create_release(tag, *release_text(arch, rocm_version))


def landing_page(client: GitHubClient, arch: ArchSet, desired: dict[str, bytes], files: dict[str, str],
                 changed: bool) -> dict[str, bytes]:
    """The site files (``data/wheels/index.html`` and ``index.json``) for the branch as this commit leaves it.

    Every other index is read back from its folder on the branch; this one
    from ``desired`` (absent when its folder is being removed). So the page
    lists exactly the indexes that are there (see ``rocm_bake.publish.landing``).
    """
    from rocm_bake.publish.landing import site_pages

    own = pages_prefix(arch)
    after: dict[str, bytes | None] = {path: None for path in files if not path.startswith(own)}
    after.update(desired)
    folder = {arch.dir_name} if changed and desired else set()
    return site_pages(after, lambda path: client.get_blob(files[path]),
                      client.endpoints.pages_base(client.repo) + PAGES_ROOT.rstrip("/"), folder)


def commit_pages(client: GitHubClient, arch: ArchSet, tag: str,
                 desired: dict[str, bytes]) -> tuple[str | None, dict[str, str]]:
    """One commit replacing ``data/wheels/<dir_name>/`` on gh-pages; None when nothing changed.

    The ref moves without force, so a concurrent writer makes this retry on
    the new head instead of being overwritten.
    """
    for _ in range(3):
        head, tree, every = remote_tree(client)
        prefix = pages_prefix(arch)
        current = {path: sha for path, sha in every.items() if path.startswith(prefix)}
        change = plan_pages(arch, desired, current, head is not None)
        want = {path: git_blob_sha(data) for path, data in desired.items()}
        site = landing_page(client, arch, desired, every, change.needed)
        site_changed = {path: data for path, data in site.items() if every.get(path) != git_blob_sha(data)}
        if not change.needed and not site_changed:
            return None, want
        blobs = {**site_changed, **{path: desired[path] for path in change.added + change.changed}}
        label = (f"gh-pages commit: {len(change.added)} added, {len(change.changed)} changed, "
                 f"{len(change.removed)} removed under {prefix}" + (" + landing page" if site_changed else ""))
        with progress.track(label, sum(len(data) for data in blobs.values())) as advance:
            entries = _upload_blobs(client, blobs, advance)
        entries += [{"path": path, "mode": BLOB_MODE, "type": "blob", "sha": None} for path in change.removed]
        new_tree = client.create_tree(tree, entries)
        if new_tree == tree:
            return None, want
        commit = client.create_commit(f"Publish {arch} index ({tag})", new_tree, [head] if head else [])
        try:
            client.set_branch(PAGES_BRANCH, commit, exists=head is not None)
        except GitHubHTTPError as exc:
            if exc.status == 422:  # not a fast-forward: someone else committed; redo on their head
                continue
            raise
        return commit, want
    raise RocmBakeError(f"{PAGES_BRANCH} kept moving while publishing {arch}; run publish again")


def _upload_blobs(client: GitHubClient, blobs: dict[str, bytes],
                  advance: progress.Advance) -> list[dict[str, object]]:
    """One git blob per changed file, each checked against the id git gives its bytes; tree entries for them."""
    entries: list[dict[str, object]] = []
    for path, data in blobs.items():
        sha = client.create_blob(data)
        if sha != git_blob_sha(data):
            raise RocmBakeError(f"GitHub stored {path} as blob {sha}, expected {git_blob_sha(data)}")
        entries.append({"path": path, "mode": BLOB_MODE, "type": "blob", "sha": sha})
        advance(len(data))
    return entries
