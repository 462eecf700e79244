"""What a publish would change, worked out from what GitHub holds now; nothing here writes.

Assets are compared by name, size and GitHub's ``digest`` (sha256): the
same are left alone, a different one or an interrupted ``starter`` upload
is replaced, a missing one uploaded, and one no longer in the index
deleted. Pages are compared by git blob id under the index's own gh-pages
folder, so other arches' folders never show up as changes.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel

from rocm_bake.archset import ArchSet
from rocm_bake.publish.github import Asset, GitHubClient, TreeEntry
from rocm_bake.publish.hashing import git_blob_sha
from rocm_bake.publish.local import LocalFile, LocalIndex
from rocm_bake.publish.naming import PAGES_BRANCH, pages_prefix


class AssetAction(BaseModel):
    name: str
    action: Literal["upload", "replace", "delete", "keep"]
    size: int
    sha256: str | None
    reason: str


class PagesChange(BaseModel):
    branch: str = PAGES_BRANCH
    prefix: str
    branch_exists: bool
    added: list[str] = []
    changed: list[str] = []
    removed: list[str] = []
    unchanged: int = 0

    @property
    def needed(self) -> bool:
        return bool(self.added or self.changed or self.removed)


class PublishPlan(BaseModel):
    arch: ArchSet
    repo: str
    tag: str
    release_exists: bool
    wheel_url: str
    pages_url: str
    assets: list[AssetAction]
    pages: PagesChange | None = None

    def count(self, action: str) -> int:
        return sum(1 for a in self.assets if a.action == action)

    def text(self) -> str:
        lines = [f"publish {self.arch} -> {self.repo} release {self.tag}"
                 + ("" if self.release_exists else " (release will be created)")]
        for a in self.assets:
            if a.action != "keep":
                lines.append(f"  {a.action:8} {a.name} ({a.size} bytes): {a.reason}")
        lines.append(f"  assets: {self.count('upload')} upload, {self.count('replace')} replace, "
                     f"{self.count('delete')} delete, {self.count('keep')} unchanged")
        if self.pages is not None:
            p = self.pages
            what = "one commit" if p.needed else "no commit (tree unchanged)"
            if p.needed and not p.branch_exists:
                what += f" creating branch {p.branch}"
            lines.append(f"  {p.branch}:{p.prefix}: {what}; {len(p.added)} added, {len(p.changed)} changed, "
                         f"{len(p.removed)} removed, {p.unchanged} unchanged")
            lines += [f"    {kind} {path}" for kind, paths in
                      (("+", p.added), ("~", p.changed), ("-", p.removed)) for path in paths]
        lines.append(f"  index: {self.pages_url}")
        return "\n".join(lines)


def replace_reason(remote: Asset, local: LocalFile) -> str | None:
    """Why ``remote`` must be replaced, or None when it already is ``local``."""
    if remote.state != "uploaded":
        return f"incomplete upload on GitHub (state {remote.state})"
    if remote.size != local.size:
        return f"size differs (GitHub {remote.size}, local {local.size})"
    if remote.sha256 is not None and remote.sha256 != local.sha256:
        return f"sha256 differs (GitHub {remote.sha256[:12]}…, local {local.sha256[:12]}…)"
    return None


def plan_assets(local: LocalIndex, remote: list[Asset]) -> list[AssetAction]:
    by_name = {a.name: a for a in remote}
    actions = []
    for f in local.files:
        asset = by_name.get(f.name)
        if asset is None:
            actions.append(AssetAction(name=f.name, action="upload", size=f.size, sha256=f.sha256, reason="not in the release"))
            continue
        why = replace_reason(asset, f)
        if why is None:
            how = "same size and sha256" if asset.sha256 else "same size (GitHub gave no digest)"
            actions.append(AssetAction(name=f.name, action="keep", size=f.size, sha256=f.sha256, reason=how))
        else:
            actions.append(AssetAction(name=f.name, action="replace", size=f.size, sha256=f.sha256, reason=why))
    names = {f.name for f in local.files}
    for asset in remote:
        if asset.name not in names:
            actions.append(AssetAction(name=asset.name, action="delete", size=asset.size, sha256=asset.sha256,
                                       reason="no longer in the index"))
    return actions


def remote_tree(client: GitHubClient) -> tuple[str | None, str | None, dict[str, str]]:
    """(head commit, its tree, {path: blob sha} of every file) of gh-pages."""
    head = client.get_branch_head(PAGES_BRANCH)
    if head is None:
        return None, None, {}
    tree = client.get_commit_tree(head)
    entries: list[TreeEntry] = client.get_tree(tree)
    return head, tree, {e.path: e.sha for e in entries if e.type == "blob"}


def remote_pages(client: GitHubClient, arch: ArchSet) -> tuple[str | None, str | None, dict[str, str]]:
    """(head commit, its tree, {path: blob sha} under this arch's prefix) of gh-pages."""
    head, tree, files = remote_tree(client)
    prefix = pages_prefix(arch)
    return head, tree, {path: sha for path, sha in files.items() if path.startswith(prefix)}


def plan_pages(arch: ArchSet, desired: dict[str, bytes], current: dict[str, str], branch_exists: bool) -> PagesChange:
    want = {path: git_blob_sha(data) for path, data in desired.items()}
    return PagesChange(
        prefix=pages_prefix(arch), branch_exists=branch_exists,
        added=sorted(p for p in want if p not in current),
        changed=sorted(p for p in want if p in current and current[p] != want[p]),
        removed=sorted(p for p in current if p not in want),
        unchanged=sum(1 for p in want if current.get(p) == want[p]),
    )
