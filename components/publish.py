"""Publishing one arch's index as Pulumi resources (only when ``rocm-bake:publish`` is true).

Publishing is a separate decision from building, so it is in no group and
no push-all: here a stack config flag, default false. ``pulumi preview`` is
the dry run (``wheels-publish-dry``): the providers' ``diff``
compares what the local index would publish with what was recorded (or
what ``refresh`` read back from GitHub), so drift made by hand shows up and
the next ``up`` repairs it.

* ``GitHubRelease`` (dynamic) per index, tag ``wheels-<arch>-rocm<version>``:
  "One release per architecture", because the wheel filenames are
  architecture-independent and would collide inside one release.
* ``ReleaseAssets`` (dynamic): the release's assets, via ``rocm_bake.publish``.
* ``PagesIndex`` (dynamic): ``data/wheels/<arch>/`` on gh-pages, one commit.

All work is ``rocm_bake.publish``. The GitHub token is never a resource
input nor part of a provider object (providers are pickled into state): the
providers read it at run time (``GITHUB_TOKEN`` or the secret config
``rocm-bake:githubToken``, as ``GitHubProvider.token`` orders them), so a
rotated token is what ``refresh``, ``destroy`` and a replace use.

What users install from is never deleted before its replacement is whole:
a release moved to another repository, GitHub or tag is replaced
create-first (the old one goes only after the new release, its assets and
its pages exist), and settings that merely name the same release another
way (another URL of the same GitHub, a renamed repository's new name) update it in place. ``ReleaseAssets`` takes the release's id as an
input, so the assets follow their release whenever it is made again.

One path owns a release: ``GitHubRelease`` creates it through the same core
function as ``rocm-bake publish`` (``ensure_release``), so whichever runs
first makes it and the other adopts it, instead of failing with 422
``already_exists``. (pulumi-github's ``Release`` would be the other owner,
and its plugin cannot be built from the Go modules this machine reaches.)
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pulumi
from pulumi.dynamic import ConfigureRequest, CreateResult, DiffResult, ReadResult, ResourceProvider, UpdateResult

from components.dynamic import ProviderInputs, TypedResource, unknown_or_replace
from rocm_bake.archset import ArchSet
from rocm_bake.config import StackConfig
from rocm_bake.errors import RocmBakeError
from rocm_bake.publish.apply import commit_pages, ensure_release
from rocm_bake.publish.github import GitHubClient, GitHubEndpoints, github_endpoints
from rocm_bake.publish.hashing import git_blob_sha
from rocm_bake.publish.naming import pages_prefix, release_tag, release_text
from rocm_bake.publish.plan import remote_pages
from rocm_bake.publish.publisher import Publisher
from rocm_bake.resource_types import GITHUB_RELEASE, PAGES_INDEX, RELEASE_ASSETS

#: A different arch, repo, version or GitHub is a different release: replace.
REPLACE_KEYS = ("arch", "repo", "rocm_version", "api_url")
TOKEN_KEY = "rocm-bake:githubToken"


@dataclass(frozen=True)
class ReleaseInputs(ProviderInputs):
    """Which index goes where: the arch set, its ``DIST``, the repository and GitHub's endpoints, and the
    release ``tag`` (named once, at declaration, so plan and preview show it)."""

    arch: ArchSet
    dist: str
    repo: str
    rocm_version: str
    tag: str
    api_url: str
    uploads_url: str
    web_url: str
    pages_url: str

    EDGE_PARSERS = {"arch": ArchSet}

    def endpoints(self) -> GitHubEndpoints:
        return github_endpoints(api_url=self.api_url or None, uploads_url=self.uploads_url or None,
                                web_url=self.web_url or None, pages_url=self.pages_url or None)

    def publisher(self, client: GitHubClient) -> Publisher:
        return Publisher(client, self.arch, Path(self.dist), self.rocm_version)


@dataclass(frozen=True)
class IndexPublishInputs(ReleaseInputs):
    """The release's inputs and the ``index_sha256`` of the index this program built: publishing waits for
    it and is diffed again whenever it changes."""

    index_sha256: str | None = None


@dataclass(frozen=True)
class AssetsInputs(IndexPublishInputs):
    """The index's inputs and the ``release_id`` of the release resource: a release made again (replaced, or
    deleted by hand and recreated) is a new id, so its assets are uploaded into it."""

    release_id: int | None = None


def _pulumi_cli() -> str | None:
    """The engine that started this provider (its parent), else ``pulumi`` on PATH."""
    try:
        parent = os.readlink(f"/proc/{os.getppid()}/exe")
        if Path(parent).name == "pulumi":
            return parent
    except OSError:
        pass
    return shutil.which("pulumi")


def current_config_token(stack: str | None) -> str | None:
    """The stack's ``rocm-bake:githubToken`` as its config holds it NOW, or None when it cannot be read.

    ``refresh`` and ``destroy`` configure a dynamic provider from state, that
    is with the token of the last ``up``: after a rotation that token is dead.
    So the provider asks the engine for the stack's current config (the
    provider runs in the project directory, with the engine's backend and
    passphrase in its environment). The value is never logged.
    """
    cli = _pulumi_cli()
    if not stack or cli is None:
        return None
    try:
        result = subprocess.run([cli, "config", "get", TOKEN_KEY, "--stack", stack, "--non-interactive"],
                                capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return (result.stdout.strip() or None) if result.returncode == 0 else None


class GitHubProvider(ResourceProvider):
    """Reads the token at run time, never from resource inputs or the pickled provider (only the stack name is)."""

    _token: str | None = None
    _current: str | None = None
    _looked: bool = False

    def __init__(self, stack: str | None = None) -> None:
        self.stack = stack

    def configure(self, req: ConfigureRequest) -> None:
        self._token = req.config.get(TOKEN_KEY)

    def token(self) -> tuple[str | None, str]:
        """``GITHUB_TOKEN`` when set, else the stack's current config secret, else what the engine configured;
        with where it came from (a rejected token is named by its source, never by any part of it)."""
        if os.environ.get("GITHUB_TOKEN"):
            return os.environ["GITHUB_TOKEN"], (f"GITHUB_TOKEN from the environment, which wins over {TOKEN_KEY}; "
                                                "unset it to use the stack's")
        if not self._looked:
            self._current, self._looked = current_config_token(getattr(self, "stack", None)), True
        if self._current:
            return self._current, f"{TOKEN_KEY} (the stack's config)"
        return self._token, TOKEN_KEY

    def client(self, inputs: ReleaseInputs) -> GitHubClient:
        token, source = self.token()
        if not token:
            raise RocmBakeError(
                f"publishing {inputs.arch}: no GitHub token; set the secret {TOKEN_KEY} or GITHUB_TOKEN"
            )
        return GitHubClient(inputs.repo, token, inputs.endpoints(), token_source=source)

    def same_release(self, olds: dict[str, Any], news: dict[str, Any]) -> bool:
        """Whether the old and the new settings reach one and the same release (the same GitHub under another
        URL, or a renamed repository, whose old name GitHub redirects to the new): then a replace would delete,
        at its end, the very release it had just adopted. Unreachable or absent on either side: not the same."""
        try:
            with self.client(ReleaseInputs.from_props(olds)) as old, \
                    self.client(ReleaseInputs.from_props(news)) as new:
                was, now = old.get_release_by_tag(olds["tag"]), new.get_release_by_tag(news["tag"])
        except RocmBakeError:
            return False
        return was is not None and now is not None and (was.id, was.upload_url) == (now.id, now.upload_url)

    def replace_create_first(self, olds: dict[str, Any], news: dict[str, Any], input_keys: tuple[str, ...],
                             replace_keys: tuple[str, ...]) -> DiffResult | None:
        """``unknown_or_replace`` for what users install from: create-first, and an update in place when the
        moved settings still reach the same release."""
        early = unknown_or_replace(olds, news, input_keys, replace_keys, delete_first=False)
        if early is not None and early.replaces and olds.get("tag") == news.get("tag") \
                and self.same_release(olds, news):
            return DiffResult(changes=True)
        return early


def _asset_key(assets: list[dict[str, Any]] | None) -> dict[str, tuple[int, str | None]]:
    return {a["name"]: (a["size"], a.get("sha256")) for a in assets or []}


def _assets_differ(want: list[dict[str, Any]], have: list[dict[str, Any]] | None) -> bool:
    """Name and size must match; sha256 too wherever GitHub reported one."""
    w, h = _asset_key(want), _asset_key(have)
    if set(w) != set(h):
        return True
    return any(w[n][0] != h[n][0] or (h[n][1] is not None and h[n][1] != w[n][1]) for n in w)


class GitHubReleaseProvider(GitHubProvider):
    """The index's release: created (or adopted) through the core, so the CLI and Pulumi share one owner."""

    def create(self, props: dict[str, Any]) -> CreateResult:
        inputs = ReleaseInputs.from_props(props)
        with self.client(inputs) as client:
            release = ensure_release(client, inputs.arch, inputs.tag, inputs.rocm_version, True)
        name, body = release_text(inputs.arch, inputs.rocm_version)
        return CreateResult(id_=f"{inputs.repo}/{inputs.tag}",
                            outs=inputs.outputs(release_id=release.id, name=name, body=body))

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        early = self.replace_create_first(olds, news, ReleaseInputs.keys(), REPLACE_KEYS)
        if early is not None:
            return early
        return DiffResult(changes=olds.get("release_id") is None)

    def update(self, _id: str, _olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        return UpdateResult(outs=self.create(news).outs)

    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        """Refresh: a release deleted by hand reads back with no id, and the next up makes it again."""
        inputs = ReleaseInputs.from_props(props)
        with self.client(inputs) as client:
            release = client.get_release_by_tag(inputs.tag)
        return ReadResult(id_=id_, outs={**props, "release_id": release.id if release else None})

    def delete(self, _id: str, props: dict[str, Any]) -> None:
        inputs = ReleaseInputs.from_props(props)
        with self.client(inputs) as client:
            release = client.get_release_by_tag(inputs.tag)
            if release is not None:
                client.delete_release(release.id)


class ReleaseAssetsProvider(GitHubProvider):
    """The release's assets = every file of ``DIST/index/<arch>/files/``."""

    def _apply(self, inputs: AssetsInputs) -> dict[str, Any]:
        with self.client(inputs) as client:
            publisher = inputs.publisher(client)
            plan, release = publisher.plan(pages=False)
            release, published = publisher.apply_assets(plan, release)
            return inputs.outputs(release_id=release.id, assets=[a.model_dump() for a in published],
                                  asset_count=len(published), wheel_url=publisher.wheel_url)

    def create(self, props: dict[str, Any]) -> CreateResult:
        inputs = AssetsInputs.from_props(props)
        return CreateResult(id_=f"{inputs.repo}/{inputs.tag}", outs=self._apply(inputs))

    def update(self, _id: str, _olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        return UpdateResult(outs=self._apply(AssetsInputs.from_props(news)))

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        early = self.replace_create_first(olds, news, AssetsInputs.keys(), REPLACE_KEYS)
        if early is not None:
            return early
        if news.get("release_id") is not None and news.get("release_id") != olds.get("release_id"):
            return DiffResult(changes=True)  # the release was made again: its assets go into it
        inputs = AssetsInputs.from_props(news)
        with self.client(inputs) as client:
            local = inputs.publisher(client).local
        want = [{"name": f.name, "size": f.size, "sha256": f.sha256} for f in local.files]
        return DiffResult(changes=_assets_differ(want, olds.get("assets")))

    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        """Refresh: what the release really holds (a hand-deleted or replaced asset shows as drift)."""
        inputs = AssetsInputs.from_props(props)
        with self.client(inputs) as client:
            release = client.get_release_by_tag(inputs.tag)
            assets = client.list_assets(release.id) if release else []
        listed = [{"name": a.name, "size": a.size if a.state == "uploaded" else -1, "sha256": a.sha256}
                  for a in assets]
        return ReadResult(id_=id_, outs={**props, "assets": listed, "asset_count": len(listed),
                                         "release_id": release.id if release else None})

    def delete(self, _id: str, props: dict[str, Any]) -> None:
        """Remove the assets this resource published (the Release resource removes the release)."""
        names = {a["name"] for a in props.get("assets") or []}
        inputs = AssetsInputs.from_props(props)
        with self.client(inputs) as client:
            release = client.get_release_by_tag(inputs.tag)
            for asset in client.list_assets(release.id) if release else []:
                if asset.name in names:
                    client.delete_asset(asset.id)


class PagesIndexProvider(GitHubProvider):
    """``data/wheels/<arch>/`` on gh-pages: the index HTML with hrefs at the release downloads."""

    def _apply(self, inputs: IndexPublishInputs) -> dict[str, Any]:
        with self.client(inputs) as client:
            publisher = inputs.publisher(client)
            commit, files = commit_pages(client, inputs.arch, inputs.tag, publisher.desired)
            return inputs.outputs(files=files, commit=commit, index_url=publisher.pages_url)

    def create(self, props: dict[str, Any]) -> CreateResult:
        inputs = IndexPublishInputs.from_props(props)
        return CreateResult(id_=f"{inputs.repo}/gh-pages/{pages_prefix(inputs.arch)}", outs=self._apply(inputs))

    def update(self, _id: str, _olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        return UpdateResult(outs=self._apply(IndexPublishInputs.from_props(news)))

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        early = self.replace_create_first(olds, news, IndexPublishInputs.keys(), ("arch", "repo", "api_url"))
        if early is not None:
            return early
        inputs = IndexPublishInputs.from_props(news)
        with self.client(inputs) as client:
            desired = inputs.publisher(client).desired
        want = {path: git_blob_sha(data) for path, data in desired.items()}
        return DiffResult(changes=want != (olds.get("files") or {}))

    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        """Refresh: the arch's folder as gh-pages holds it now (an edited page shows as drift)."""
        inputs = IndexPublishInputs.from_props(props)
        with self.client(inputs) as client:
            _head, _tree, files = remote_pages(client, inputs.arch)
        return ReadResult(id_=id_, outs={**props, "files": files})

    def delete(self, _id: str, props: dict[str, Any]) -> None:
        """One commit removing this arch's folder; other arches' folders stay."""
        inputs = IndexPublishInputs.from_props(props)
        with self.client(inputs) as client:
            # state recorded without a tag input holds none: the commit names no release
            commit_pages(client, inputs.arch, inputs.tag or "no release", {})


class GitHubRelease(TypedResource, module=GITHUB_RELEASE.module, name=GITHUB_RELEASE.name):
    tag: pulumi.Output[str]
    release_id: pulumi.Output[int]

    def __init__(self, name: str, inputs: ReleaseInputs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(GitHubReleaseProvider(pulumi.get_stack()), name,
                         {**inputs.declared(), "release_id": None, "name": None, "body": None}, opts)


class ReleaseAssets(TypedResource, module=RELEASE_ASSETS.module, name=RELEASE_ASSETS.name):
    tag: pulumi.Output[str]
    release_id: pulumi.Output[int]
    assets: pulumi.Output[list[dict[str, Any]]]
    asset_count: pulumi.Output[int]
    wheel_url: pulumi.Output[str]

    def __init__(self, name: str, inputs: AssetsInputs, opts: pulumi.ResourceOptions | None = None) -> None:
        outs = {"assets": None, "asset_count": None, "wheel_url": None}
        super().__init__(ReleaseAssetsProvider(pulumi.get_stack()), name, {**inputs.declared(), **outs}, opts)


class PagesIndex(TypedResource, module=PAGES_INDEX.module, name=PAGES_INDEX.name):
    """``pages_url`` is the input (``rocm-bake:githubPagesUrl``, ``{owner}``/``{repo}`` unfilled);
    ``index_url`` the output: this index's folder on that site."""

    files: pulumi.Output[dict[str, str]]
    commit: pulumi.Output[str | None]
    index_url: pulumi.Output[str]

    def __init__(self, name: str, inputs: IndexPublishInputs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(PagesIndexProvider(pulumi.get_stack()), name,
                         {**inputs.declared(), "files": None, "commit": None, "index_url": None}, opts)


@dataclass(frozen=True)
class PublishedIndexArgs:
    """One index to publish: which arch set, where its ``DIST`` is, to which repository and GitHub, and the
    ``index_sha256`` of the index this program built (publishing waits for it and re-diffs on it)."""

    arch: ArchSet
    dist: str
    repo: str
    rocm_version: str
    endpoints: GitHubEndpoints
    index_sha256: "pulumi.Input[str] | None" = None


class PublishedIndex(pulumi.ComponentResource):
    """One index published: ``GitHubRelease`` + ``ReleaseAssets`` + ``PagesIndex``.

    The release tag is named once, here, and every child takes it as an input.
    Outputs: ``release_tag``, ``asset_count``, ``pages_url``.
    """

    release_tag: pulumi.Output[str]
    asset_count: pulumi.Output[int]
    pages_url: pulumi.Output[str]

    def __init__(self, name: str, args: PublishedIndexArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("rocm-bake:publish:PublishedIndex", name, None, opts)
        ends = args.endpoints
        release_inputs = ReleaseInputs(arch=args.arch, dist=str(args.dist), repo=args.repo,
                                       rocm_version=args.rocm_version, tag=release_tag(args.arch, args.rocm_version),
                                       api_url=ends.api_url, uploads_url=ends.uploads_url, web_url=ends.web_url,
                                       pages_url=ends.pages_url)
        publish_inputs = IndexPublishInputs(**release_inputs.to_props(),
                                            index_sha256=args.index_sha256)  # type: ignore[arg-type]
        self.release = GitHubRelease(f"{name}-release", release_inputs, pulumi.ResourceOptions(parent=self))
        assets_inputs = AssetsInputs(**publish_inputs.to_props(), release_id=self.release.release_id)
        self.assets = ReleaseAssets(f"{name}-assets", assets_inputs,
                                    pulumi.ResourceOptions(parent=self, depends_on=[self.release]))
        self.pages = PagesIndex(f"{name}-pages", publish_inputs,
                                pulumi.ResourceOptions(parent=self, depends_on=[self.assets]))
        self.release_tag = self.release.tag
        self.asset_count = self.assets.asset_count
        self.pages_url = self.pages.index_url
        self.register_outputs({"release_tag": self.release_tag, "asset_count": self.asset_count,
                               "pages_url": self.pages_url})


def declare_publish(config: StackConfig, token: "pulumi.Output[str] | None",
                    index_sha256: "pulumi.Input[str] | None" = None) -> dict[str, Any]:
    """Declare publishing when ``rocm-bake:publish`` is true; nothing otherwise.

    ``token`` is ``rocm-bake:githubToken`` read with ``get_secret`` (or None:
    ``GITHUB_TOKEN`` then): only its presence is checked here, so neither
    present is a clear error at declaration, before anything is created. The
    providers read the value itself at run time.
    """
    if not config.publish:
        return {"publish": "not declared: rocm-bake:publish is false (publishing is a separate decision)"}
    if token is None and not os.environ.get("GITHUB_TOKEN"):
        raise RocmBakeError(
            f"stack {config.stack}: rocm-bake:publish is true but there is no GitHub token; run "
            f"`pulumi config set --secret {TOKEN_KEY} …` or set GITHUB_TOKEN"
        )
    endpoints = GitHubEndpoints(api_url=config.github_api_url, uploads_url=config.github_uploads_url,
                                web_url=config.github_web_url, pages_url=config.github_pages_url)
    published = PublishedIndex(f"publish-{config.index_name}", PublishedIndexArgs(
        arch=config.pytorch_rocm_arch, dist=config.dist, repo=config.github_repo, rocm_version=config.rocm_version,
        endpoints=endpoints, index_sha256=index_sha256))
    return {"release_tag": published.release_tag, "asset_count": published.asset_count,
            "pages_url": published.pages_url,
            "github_repo": f"{config.github_repo} ({config.github_repo_source or 'rocm-bake:githubRepo'})"}
