"""Publish one arch's index: wheels to a GitHub release, index HTML to gh-pages.

The spec: "The binaries and the index go to different places, and the split
is forced rather than chosen. A wheel here is 300–500 MB ... and GitHub
refuses any file over 100 MB in git. So gh-pages carries the index, which is
28 KB of HTML, and the wheels go to a release, where an asset may be 2 GB".
And "One release per architecture. Assets within a release share a
namespace, and these wheel filenames are architecture-independent", so the
tag carries the arch: ``wheels-<arch>-rocm<version>``.

It publishes what ``rocm-bake index build`` wrote (``DIST/index/<arch>/``)
"rather than fetching again": the release gets every file of ``files/``
(wheels, their PEP 658 ``.metadata``, the rocm-torch metapackage) and
gh-pages gets the same pages re-rendered with ``--wheel-url`` at the
release's download URL — "every link already carries a #sha256= fragment,
so an offsite asset is still verified by pip at install time".

Order and idempotence:

1. Everything local is checked first (index present and consistent with its
   files, no asset over 2 GiB, no two names GitHub would treat as one, at
   most 1000 assets, no page over 100 MB) — a refusal uploads nothing.
2. Assets are compared by name, size and GitHub's ``digest`` (sha256): the
   same → left alone; different or an interrupted ``starter`` upload →
   deleted and re-uploaded; missing → uploaded and verified against the
   API's answer. A 422 ``already_exists`` (a concurrent upload) is compared,
   not fatal.
3. The pages go in ONE commit on the current gh-pages head through the Git
   Data API (blobs, tree, commit, ref), "so readers never see half an
   index"; other arches' folders are untouched; an identical tree commits
   nothing.
4. Assets no longer in the index are deleted last, after the pages stop
   pointing at them.
"""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from packaging.utils import canonicalize_name
from pydantic import BaseModel

from rocm_bake.index.target import IndexTarget
from rocm_bake import progress
from rocm_bake.errors import RocmBakeError
from rocm_bake.retry import Retryable

if TYPE_CHECKING:
    from rocm_bake.publish.landing import IndexSummary
from rocm_bake.publish.github import (
    MAX_ASSET_BYTES,
    MAX_GIT_BLOB_BYTES,
    MAX_RELEASE_ASSETS,
    Asset,
    GitHubClient,
    GitHubEndpoints,
    GitHubHTTPError,
    Release,
    TreeEntry,
)
from rocm_bake.index.hashcache import CacheEntry, FileKey, HashCache, sha256_file
from rocm_bake.index.build import FILES_DIR, PlannedWheel, index_dir, is_rocm_bake_index, render_pages
from rocm_bake.index.versions import DEFAULT_ROCM_VERSION, check_rocm_version

PAGES_BRANCH = "gh-pages"
BLOB_MODE = "100644"
#: Characters GitHub keeps in an asset name; anything else it renames, which would break the hrefs.
SAFE_ASSET_NAME = re.compile(r"^[A-Za-z0-9_+-][A-Za-z0-9._+-]*[A-Za-z0-9_+-]$")


def release_tag(arch: "str | IndexTarget", rocm_version: str = DEFAULT_ROCM_VERSION) -> str:
    """One release per index: the tag names its arches (``gfx950-gfx1201`` for a fat build) and the ROCm version."""
    return f"wheels-{IndexTarget.parse(arch).dir_name}-rocm{rocm_version}"


def pages_prefix(arch: "str | IndexTarget") -> str:
    """The index's gh-pages folder: the same name as its ``DIST/index/`` directory."""
    return f"data/wheels/{IndexTarget.parse(arch).dir_name}/"


def git_blob_sha(data: bytes) -> str:
    """The object id git (and so GitHub) gives these bytes as a blob."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


# --------------------------------------------------------------- models


class LocalFile(BaseModel):
    name: str
    path: str
    size: int
    sha256: str


class LocalIndex(BaseModel):
    """The published-to-be content of ``DIST/index/<arch>/``, checked and hashed."""

    arch: str
    index_dir: str
    files: list[LocalFile]
    wheels: list[PlannedWheel]


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
    arch: str
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

    @property
    def asset_count(self) -> int:
        return len(self.assets)


# ---------------------------------------------------------- local index


def _check_names(names: list[str], arch: str) -> None:
    """Refuse names GitHub would rename, and names it would treat as the same asset."""
    problems = [f"{n}: GitHub renames asset names with other characters than A-Z a-z 0-9 . _ + - "
                f"(or a leading/trailing period), which would break the index hrefs"
                for n in names if not SAFE_ASSET_NAME.match(n)]
    seen: dict[str, str] = {}
    for n in names:
        other = seen.setdefault(n.lower(), n)
        if other != n:
            problems.append(f"{other} and {n}: two assets with the same name (GitHub compares case-insensitively)")
    if len(names) > MAX_RELEASE_ASSETS:
        problems.append(f"{len(names)} assets: a GitHub release holds at most {MAX_RELEASE_ASSETS}")
    if problems:
        raise RocmBakeError(f"refusing to publish {arch} (nothing uploaded):\n  " + "\n  ".join(problems))


def _check_sizes(paths: list[Path], arch: str) -> None:
    """stat only: a 2 GiB file is refused before anything is read or uploaded."""
    big = [p for p in paths if p.stat().st_size >= MAX_ASSET_BYTES]
    if big:
        listed = ", ".join(f"{p.name} ({p.stat().st_size} bytes)" for p in big)
        raise RocmBakeError(
            f"refusing to publish {arch} (nothing uploaded): {listed}: a GitHub release asset must be "
            f"under 2 GiB ({MAX_ASSET_BYTES} bytes)"
        )


def publish_cache_path(dist: Path, arch: str) -> Path:
    return Path(dist) / ".cache" / "rocm-bake" / f"publish-{arch}.json"


def _hash_all(paths: list[Path], cache: HashCache) -> dict[str, str]:
    out = {}
    for path in paths:
        key = FileKey.of(path)
        hit = cache.lookup(key)
        sha = hit.sha256 if hit is not None else sha256_file(path)
        cache.record(CacheEntry(key=key, sha256=sha))
        out[path.name] = sha
    cache.keep_only({os.path.abspath(p) for p in paths})
    try:
        cache.save()
    except OSError as exc:  # publishing only reads DIST: a read-only one still publishes, just unremembered
        progress.note(f"{cache.path}: hash cache not saved ({exc.strerror or exc}); the next publish hashes again")
    return out


def _planned_wheel(path: Path, sha: str, metadata: bytes) -> PlannedWheel:
    """The published ``.metadata`` validated as the index build validates METADATA (what pip and uv
    would reject fails here, naming the file and field), so a broken file never reaches a resolver."""
    from rocm_bake.index import parse_core_metadata

    meta = parse_core_metadata(metadata, f"{path.name}.metadata")
    return PlannedWheel(
        filename=path.name, project=canonicalize_name(meta.name), version=str(meta.version), sha256=sha,
        size=path.stat().st_size, metadata=metadata, requires_python=meta.requires_python,
        source=str(path),
    )


def _disk_pages(root: Path) -> dict[str, bytes]:
    pages = {}
    for dirpath, _dirs, names in os.walk(root):
        rel = Path(dirpath).relative_to(root)
        if rel.parts[:1] == (FILES_DIR,):
            continue
        for name in names:
            pages[(rel / name).as_posix()] = (Path(dirpath) / name).read_bytes()
    return pages


def read_local_index(dist: Path, arch: str, wheel_url: str | None = None) -> LocalIndex:
    """``DIST/index/<arch>/`` checked for publishing: present, consistent, within GitHub's limits.

    The pages on disk must be exactly what ``rocm_bake.index.build`` renders for
    the files beside them (relative hrefs, or ``wheel_url`` ones), so a stale
    or hand-edited index is refused rather than published.
    """
    IndexTarget.parse(arch)  # one arch, or a fat build's ;-list
    if Path(dist).exists() and not Path(dist).is_dir():
        raise RocmBakeError(f"--dist {dist}: is not a directory (expected the DIST that `rocm-bake index build` "
                            f"wrote index/<arch>/ into)")
    root = index_dir(Path(dist), arch)
    if not is_rocm_bake_index(root):
        raise RocmBakeError(f"{root}: no rocm-bake index for {arch}; run `rocm-bake index build --arch {arch}` first")
    files_dir = root / FILES_DIR
    paths = sorted(p for p in files_dir.iterdir()) if files_dir.is_dir() else []
    if not paths:
        raise RocmBakeError(f"{files_dir}: no files to publish for {arch}")
    odd = [p.name for p in paths if not p.is_file() or not (p.name.endswith(".whl") or p.name.endswith(".whl.metadata"))]
    if odd:
        raise RocmBakeError(f"{files_dir}: not a wheel or .metadata file: {', '.join(odd)}")
    _check_names([p.name for p in paths], arch)
    _check_sizes(paths, arch)
    wheel_paths = [p for p in paths if p.name.endswith(".whl")]
    missing = [p.name for p in wheel_paths if not (files_dir / f"{p.name}.metadata").is_file()]
    orphans = [p.name for p in paths if p.name.endswith(".metadata") and not (files_dir / p.name[: -len(".metadata")]).is_file()]
    if missing or orphans:
        raise RocmBakeError(f"{root}: index incomplete (wheel without .metadata: {missing}; .metadata without wheel: "
                            f"{orphans}); rebuild it with `rocm-bake index build`")
    shas = _hash_all(paths, HashCache(publish_cache_path(Path(dist), arch)))
    wheels = [_planned_wheel(p, shas[p.name], (files_dir / f"{p.name}.metadata").read_bytes()) for p in wheel_paths]
    on_disk = _disk_pages(root)
    if on_disk not in (render_pages(arch, wheels, None), render_pages(arch, wheels, wheel_url)):
        raise RocmBakeError(f"{root}: the pages do not match the files beside them (stale or edited index); "
                            f"rebuild it with `rocm-bake index build --arch {arch}` before publishing")
    files = [LocalFile(name=p.name, path=str(p), size=p.stat().st_size, sha256=shas[p.name]) for p in paths]
    return LocalIndex(arch=arch, index_dir=str(root), files=files, wheels=wheels)


def desired_pages(local: LocalIndex, wheel_url: str) -> dict[str, bytes]:
    """gh-pages path -> bytes: the index pages with hrefs at the release download URL."""
    pages = render_pages(local.arch, local.wheels, wheel_url.rstrip("/"))
    out = {pages_prefix(local.arch) + rel: data for rel, data in sorted(pages.items())}
    big = [p for p, d in out.items() if len(d) > MAX_GIT_BLOB_BYTES]
    if big:
        raise RocmBakeError(f"refusing {', '.join(big)}: GitHub refuses any file over 100 MB in git")
    return out


# ------------------------------------------------------------- planning


def _same(remote: Asset, local: LocalFile) -> str | None:
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
        why = _same(asset, f)
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


def remote_pages(client: GitHubClient, arch: str) -> tuple[str | None, str | None, dict[str, str]]:
    """(head commit, its tree, {path: blob sha} under this arch's prefix) of gh-pages."""
    head, tree, files = remote_tree(client)
    prefix = pages_prefix(arch)
    return head, tree, {path: sha for path, sha in files.items() if path.startswith(prefix)}


def landing_page(client: GitHubClient, arch: str, desired: dict[str, bytes], files: dict[str, str],
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
    folder = {own[len("data/wheels/"):].rstrip("/")} if changed and desired else set()
    return site_pages(after, lambda path: client.get_blob(files[path]),
                      client.endpoints.pages_base(client.repo) + "data/wheels", folder)


def plan_pages(arch: str, desired: dict[str, bytes], current: dict[str, str], branch_exists: bool) -> PagesChange:
    want = {path: git_blob_sha(data) for path, data in desired.items()}
    return PagesChange(
        prefix=pages_prefix(arch), branch_exists=branch_exists,
        added=sorted(p for p in want if p not in current),
        changed=sorted(p for p in want if p in current and current[p] != want[p]),
        removed=sorted(p for p in current if p not in want),
        unchanged=sum(1 for p in want if current.get(p) == want[p]),
    )


# -------------------------------------------------------------- applying


def upload_verified(client: GitHubClient, release_id: int, f: LocalFile) -> Asset:
    """Upload ``f`` until GitHub holds exactly it; a duplicate name is compared, not fatal.

    Retried under the client's one retry policy. A 5xx "may leave an empty
    asset with a state of starter" — it is deleted before the next attempt,
    and the next run finishes whatever this one could not.
    """

    def once() -> Asset:
        try:
            asset = client.upload_asset(release_id, f.name, Path(f.path))
        except GitHubHTTPError as exc:
            if exc.status == 422 and "already_exists" in exc.codes:
                existing = next((a for a in client.list_assets(release_id) if a.name == f.name), None)
                if existing is not None and _same(existing, f) is None:
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
        problem = problem or _same(asset, f)
        if problem:
            raise RocmBakeError(f"upload of {f.name} did not verify: {problem}")
        return asset

    return client.retry.call(f"upload of {f.name}", once, hint="run publish again to finish")


def _delete_starters(client: GitHubClient, release_id: int, name: str) -> None:
    """Delete the empty ``starter`` asset a failed upload may leave, so the name is free again."""
    for stale in client.list_assets(release_id):
        if stale.name == name and stale.state != "uploaded":
            client.delete_asset(stale.id)


def commit_pages(client: GitHubClient, arch: str, tag: str, desired: dict[str, bytes]) -> tuple[str | None, dict[str, str]]:
    """One commit replacing ``data/wheels/<arch>/`` on gh-pages; None when nothing changed.

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


def ensure_release(client: GitHubClient, arch: str, tag: str, rocm_version: str, create: bool) -> Release:
    release = client.get_release_by_tag(tag)
    if release is not None:
        return release
    if not create:
        raise RocmBakeError(f"release {tag} does not exist in {client.repo}")
    return client.create_release(tag, *release_text(arch, rocm_version))


def release_text(arch: str, rocm_version: str) -> tuple[str, str]:
    """The release's (name, body): one source for the CLI and the Pulumi Release, so either adopts the other's."""
    return (
        f"Wheels for {arch} (ROCm {rocm_version})",
        f"Wheels for {arch} only. Install through the index, which carries the architecture; "
        f"a downloaded asset does not say which GPU it is for.",
    )


class Publisher:
    """One arch's publish against one repository: plan, then apply (or stop at the plan)."""

    def __init__(self, client: GitHubClient, arch: str, dist: Path, rocm_version: str = DEFAULT_ROCM_VERSION) -> None:
        self.target = IndexTarget.parse(arch)  # one arch, or a fat build's ;-list: parsed once here
        check_rocm_version(rocm_version)
        self.client, self.arch, self.dist, self.rocm_version = client, arch, Path(dist), rocm_version
        self.tag = release_tag(self.target, rocm_version)
        self.wheel_url = client.endpoints.download_base(client.repo, self.tag)
        self.pages_url = client.endpoints.pages_base(client.repo) + pages_prefix(self.target)
        # Every local refusal happens here, before any request.
        self.local = read_local_index(self.dist, arch, self.wheel_url.rstrip("/"))
        self.desired = desired_pages(self.local, self.wheel_url)
        self.desired[pages_prefix(self.target) + "index.json"] = self.summary().to_bytes()

    def summary(self) -> "IndexSummary":
        """What the landing page says of this index, kept in its folder as ``index.json``."""
        from rocm_bake.publish.landing import summarize

        target = self.target
        release_url = f"{self.client.endpoints.web_url.rstrip('/')}/{self.client.repo}/releases/tag/{self.tag}"
        return summarize(target.dir_name, list(target.arches), self.rocm_version,
                         [Path(f.path) for f in self.local.files], self.tag, release_url)

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
    arch: str,
    dist: Path,
    repo: str,
    token: str | None,
    *,
    rocm_version: str = DEFAULT_ROCM_VERSION,
    endpoints: GitHubEndpoints | None = None,
    dry_run: bool = False,
    client: GitHubClient | None = None,
    timeout: float | None = None,
) -> PublishResult:
    """Publish ``DIST/index/<arch>/`` to ``repo``; ``dry_run`` reads GitHub but changes nothing."""
    if not token and not dry_run:
        raise RocmBakeError("publishing needs a GitHub token: set GITHUB_TOKEN (contents:write on the repo)")
    own = client is None
    client = client or GitHubClient(repo, token, endpoints, **({"timeout": timeout} if timeout else {}))
    try:
        return Publisher(client, arch, dist, rocm_version).run(dry_run=dry_run)
    finally:
        if own:
            client.close()
