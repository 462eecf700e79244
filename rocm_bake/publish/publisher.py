"""One arch set's publish against one repository: read and check locally, plan against GitHub, then apply.

The order makes a partial run safe to repeat: every local refusal happens
before any request; assets are uploaded first, then the pages go in one
gh-pages commit, and assets no longer in the index are deleted last, after
the pages stop pointing at them. A second run with nothing changed uploads
nothing and commits nothing.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel

from rocm_bake.archset import ArchSet
from rocm_bake.errors import RocmBakeError
from rocm_bake.index.versions import DEFAULT_ROCM_VERSION, check_rocm_version
from rocm_bake.publish.apply import commit_pages, ensure_release, upload_verified
from rocm_bake.publish.github import GitHubClient, GitHubEndpoints, Release
from rocm_bake.publish.local import desired_pages, read_local_index
from rocm_bake.publish.naming import pages_prefix, release_tag
from rocm_bake.publish.plan import PublishPlan, plan_assets, plan_pages, remote_pages

if TYPE_CHECKING:
    from rocm_bake.publish.landing import IndexSummary


class PublishedAsset(BaseModel):
    name: str
    size: int
    sha256: str | None


class PublishResult(BaseModel):
    plan: PublishPlan
    dry_run: bool
    release_id: int | None
    uploads: int = 0
    deletes: int = 0
    commits: int = 0
    pages_commit: str | None = None
    #: gh-pages path -> blob sha of this arch's folder after the run.
    pages_files: dict[str, str] = {}
    assets: list[PublishedAsset] = []


class Publisher:
    """One arch set's publish against one repository: plan, then apply (or stop at the plan)."""

    def __init__(self, client: GitHubClient, arch: ArchSet, dist: Path,
                 rocm_version: str = DEFAULT_ROCM_VERSION) -> None:
        check_rocm_version(rocm_version)
        self.client, self.arch, self.dist, self.rocm_version = client, arch, Path(dist), rocm_version
        self.tag = release_tag(arch, rocm_version)
        self.wheel_url = client.endpoints.download_base(client.repo, self.tag)
        self.pages_url = client.endpoints.pages_base(client.repo) + pages_prefix(arch)
        # Every local refusal happens here, before any request.
        self.local = read_local_index(self.dist, arch, self.wheel_url.rstrip("/"))
        self.desired = desired_pages(self.local, self.wheel_url)
        self.desired[pages_prefix(arch) + "index.json"] = self.summary().to_bytes()

    def summary(self) -> "IndexSummary":
        """What the landing page says of this index, kept in its folder as ``index.json``."""
        from rocm_bake.publish.landing import summarize

        release_url = f"{self.client.endpoints.web_url.rstrip('/')}/{self.client.repo}/releases/tag/{self.tag}"
        return summarize(self.arch, self.rocm_version, [Path(f.path) for f in self.local.files], self.tag,
                         release_url, lock=self.local.lock is not None)

    def plan(self, assets: bool = True, pages: bool = True) -> tuple[PublishPlan, Release | None]:
        release = self.client.get_release_by_tag(self.tag) if assets else None
        remote = self.client.list_assets(release.id) if release is not None else []
        change = None
        if pages:
            head, _tree, current = remote_pages(self.client, self.arch)
            change = plan_pages(self.arch, self.desired, current, head is not None)
        plan = PublishPlan(
            arch=self.arch, repo=self.client.repo, tag=self.tag, release_exists=release is not None,
            wheel_url=self.wheel_url, pages_url=self.pages_url,
            assets=plan_assets(self.local, remote) if assets else [], pages=change,
        )
        return plan, release

    def _result(self, plan: PublishPlan, dry_run: bool, release_id: int | None) -> PublishResult:
        c = self.client.counters
        return PublishResult(plan=plan, dry_run=dry_run, release_id=release_id, uploads=c.uploads,
                             deletes=c.deletes, commits=c.commits)

    def apply_assets(self, plan: PublishPlan, release: Release | None, delete_stale: bool = True,
                     create_release: bool = True) -> tuple[Release, list[PublishedAsset]]:
        release = release or ensure_release(self.client, self.arch, self.tag, self.rocm_version, create_release)
        remote = {a.name: a for a in self.client.list_assets(release.id)} if plan.release_exists else {}
        files = {f.name: f for f in self.local.files}
        for action in plan.assets:
            if action.action == "replace" and action.name in remote:
                self.client.delete_asset(remote[action.name].id)
            if action.action in ("upload", "replace"):
                upload_verified(self.client, release.id, files[action.name])
        if delete_stale:
            self.delete_stale(plan)
        published = [PublishedAsset(name=f.name, size=f.size, sha256=f.sha256) for f in self.local.files]
        return release, published

    def delete_stale(self, plan: PublishPlan) -> None:
        stale = {a.name for a in plan.assets if a.action == "delete"}
        if not stale:
            return
        release = self.client.get_release_by_tag(self.tag)
        for asset in self.client.list_assets(release.id) if release else []:
            if asset.name in stale:
                self.client.delete_asset(asset.id)

    def run(self, dry_run: bool = False) -> PublishResult:
        """The whole publish: assets, then one gh-pages commit, then stale assets deleted."""
        plan, release = self.plan()
        if dry_run:
            return self._result(plan, True, release.id if release else None)
        release, published = self.apply_assets(plan, release, delete_stale=False)
        commit, files = commit_pages(self.client, self.arch, self.tag, self.desired)
        self.delete_stale(plan)
        result = self._result(plan, False, release.id)
        result.pages_commit, result.pages_files, result.assets = commit, files, published
        return result


def publish(
    arch: ArchSet,
    dist: Path,
    repo: str,
    token: str | None,
    *,
    rocm_version: str = DEFAULT_ROCM_VERSION,
    endpoints: GitHubEndpoints | None = None,
    dry_run: bool = False,
    client: GitHubClient | None = None,
    timeout: float | None = None,
    repo_source: str = "--repo",
) -> PublishResult:
    """Publish ``DIST/index/<dir_name>/`` to ``repo``; ``dry_run`` reads GitHub but changes nothing."""
    if not token and not dry_run:
        raise RocmBakeError("publishing needs a GitHub token: set GITHUB_TOKEN (contents:write on the repo)")
    own = client is None
    client = client or GitHubClient(repo, token, endpoints, repo_source=repo_source,
                                   **({"timeout": timeout} if timeout else {}))
    try:
        return Publisher(client, arch, dist, rocm_version).run(dry_run=dry_run)
    finally:
        if own:
            client.close()
