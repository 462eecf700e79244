"""The main job on the real engine: both demo stacks through a full stack lifecycle.

Pulumi's own integration tests (ProgramTest) run preview, up, an empty
preview, refresh, an edit, and destroy; this does the same with the real
Pulumi CLI on a file backend, the real docker-build, command and github
providers, the real dynamic providers (pickled into state and run by the
engine), BuildKit building and pushing to a loopback registry that serves TLS from
the test's own CA (as ``make registry`` does: the docker-build provider's
``refresh`` reads registries over https only), and a loopback server that
follows GitHub's REST contract. It runs once per module (the lifecycle is
slow); the tests below are its steps, in order.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import ssl
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.engine_fixtures import (
    ROOT,
    BuildKit,
    PulumiProject,
    copy_project,
    free_port_registry,
    project_env,
    start_buildkit,
    stop_buildkit,
)
from tests.fake_github import FakeGitHub
from rocm_bake.manifests import load_targets
from rocm_bake.registry.tls import RegistryTls, ensure_tls

sys.path.insert(0, str(ROOT / "dockerfiles" / "demo"))
import base as demo_base  # noqa: E402  (dockerfiles/demo/base.py: the demo base image)

STACKS = ("demo-gfx950", "demo-gfx1201")
#: Every preview and up runs the arch rules (policy/), as `make preview` and `make up` do.
POLICY = ("--policy-pack", str(ROOT / "policy"))
#: Images that never depend on torch: an edit of torch.Dockerfile must leave them alone.
UPSTREAM_OF_TORCH = ("pytorch-base", "triton-wheel")
#: Every image a demo stack declares (manifests/targets.yml).
IMAGE_TARGETS = tuple(t.name for t in load_targets().targets)
#: The images whose wheels the stack fetches.
WHEEL_TARGETS = tuple(t.name for t in load_targets().targets if t.wheels)


@dataclass
class LocalRegistry:
    """The module's registry: https on loopback with a certificate from the test's own CA."""

    address: str
    root: Path
    tls: RegistryTls

    def get(self, path: str, method: str = "GET", headers: dict[str, str] | None = None) -> httpx.Response:
        """A request over TLS trusting only the test's CA (never plain http)."""
        trusted = ssl.create_default_context(cafile=str(self.tls.ca_cert))
        return httpx.request(method, f"https://{self.address}{path}", headers=headers, verify=trusted, timeout=30)


@pytest.fixture(scope="module")
def local_registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalRegistry]:
    tls = ensure_tls(tmp_path_factory.mktemp("tls"))
    root = tmp_path_factory.mktemp("registry")
    for address in free_port_registry(root, tls):
        yield LocalRegistry(address, root, tls)


@pytest.fixture(scope="module")
def registry(local_registry: LocalRegistry) -> str:
    return local_registry.address


@pytest.fixture(scope="module")
def buildkit(tmp_path_factory: pytest.TempPathFactory, local_registry: LocalRegistry) -> Iterator[BuildKit]:
    kit = start_buildkit(tmp_path_factory.mktemp("buildkit"), [local_registry.address], ca=local_registry.tls.ca_cert)
    yield kit
    stop_buildkit(kit)


def push_demo_base(local_registry: LocalRegistry, buildkit: BuildKit) -> str:
    """What `make demo-base` does: the debootstrap base built by BuildKit and pushed (skipped when present)."""
    env = os.environ.copy()
    os.environ.update({**buildkit.env(), "SSL_CERT_FILE": str(local_registry.tls.bundle)})
    try:
        return demo_base.push_base(local_registry.address, buildkit.builder, str(ROOT / ".tools" / "bin" / "buildx"))
    finally:
        os.environ.clear()
        os.environ.update(env)


@pytest.fixture(scope="module")
def base_ref(local_registry: LocalRegistry, buildkit: BuildKit) -> str:
    return push_demo_base(local_registry, buildkit)


@pytest.fixture(scope="module")
def github() -> Iterator[FakeGitHub]:
    with FakeGitHub(owner="octo", repo="rocm-bake", token="ghp_lifecycle_secret_token_123") as fake:
        yield fake


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory, registry: str, local_registry: LocalRegistry,
            buildkit: BuildKit, base_ref: str, github: FakeGitHub) -> Iterator[PulumiProject]:
    work = tmp_path_factory.mktemp("lifecycle")
    state = work / "state"
    state.mkdir()
    env = project_env(state, buildkit, work, ssl_cert_file=local_registry.tls.bundle)
    proj = PulumiProject(copy_project(work / "project"), state, env)
    for stack in STACKS:
        proj.run("stack", "init", stack, "--secrets-provider", "passphrase")
        for key, value in {
            "rocm-bake:registry": registry,
            "rocm-bake:builder": buildkit.builder,
            "rocm-bake:githubRepo": github.full_name,
            "rocm-bake:githubApiUrl": github.api_url,
            "rocm-bake:githubUploadsUrl": github.uploads_url,
            "rocm-bake:githubWebUrl": github.web_url,
            "rocm-bake:githubPagesUrl": f"{github.web_url}/pages/{{owner}}/{{repo}}",
        }.items():
            proj.run("config", "set", key, value, stack=stack)
        for arg in ("ROCM_IMAGE", "PYTHON_IMAGE"):
            proj.run("config", "set", "--path", f"rocm-bake:buildArgs.{arg}", base_ref, stack=stack)
    yield proj
    logs = "\n".join(proj.log)
    (work / "pulumi.log").write_text(logs)


def steps(preview_json: str) -> list[dict]:
    return json.loads(preview_json).get("steps", [])


def resource_name(step: dict) -> str:
    return step["urn"].rsplit("::", 1)[-1]


def changed(preview_json: str) -> dict[str, str]:
    return {resource_name(s): s["op"] for s in steps(preview_json) if s["op"] not in ("same", "read")}


def catalog(local_registry: LocalRegistry) -> list[str]:
    return local_registry.get("/v2/_catalog").json().get("repositories") or []


def outputs(project: PulumiProject, stack: str) -> dict:
    return json.loads(project.run("stack", "output", "--json", "--show-secrets", stack=stack).stdout)


def test_preview_of_a_new_stack_lists_creates_and_builds_nothing(project: PulumiProject,
                                                                local_registry: LocalRegistry) -> None:
    before = catalog(local_registry)
    preview = project.run("preview", *POLICY, "--json", stack="demo-gfx950").stdout
    ops = {s["op"] for s in steps(preview)}
    assert ops <= {"create", "same"}, ops
    created = [resource_name(s) for s in steps(preview) if s["op"] == "create"]
    for name in ("pytorch-base-gfx950", "triton-wheel-gfx950", "torch-gfx950", "wheels-gfx950", "index-gfx950"):
        assert name in created
    assert catalog(local_registry) == before, "preview must not build or push anything"


def test_up_builds_pushes_fetches_and_indexes(project: PulumiProject, local_registry: LocalRegistry) -> None:
    for stack in STACKS:
        up = project.run("up", *POLICY, "--yes", "--skip-preview", stack=stack)
        assert "✅ rocm-bake-arch-rules@v0.1.0" in up.stdout, "the arch rules did not judge the up"
    repos = catalog(local_registry)
    for target in ("pytorch-base", "triton-wheel", "torch", "torchvision", "amd_aiter", "vllm", "torch-runtime",
                   "cache"):
        assert f"rocm-bake/{target}" in repos, repos
    tags = local_registry.get("/v2/rocm-bake/cache/tags/list").json()["tags"]
    # CACHE_ARCH: per-arch cache refs, except triton-wheel's shared one.
    assert "torch-gfx950" in tags and "torch-gfx1201" in tags and "triton-wheel-shared" in tags, tags
    assert not any(t.startswith("triton-wheel-gfx") for t in tags), tags
    out = outputs(project, "demo-gfx950")
    assert out["wheel_count"] >= 6
    assert Path(project.dir, out["index_dir"]).is_dir() or Path(out["index_dir"]).is_dir()


def test_second_preview_and_refresh_change_nothing(project: PulumiProject) -> None:
    for stack in STACKS:
        project.run("preview", *POLICY, "--expect-no-changes", stack=stack)
        project.run("refresh", "--yes", "--expect-no-changes", stack=stack)


def test_each_index_installs_its_own_arch_only(project: PulumiProject) -> None:
    dist = project.dir / "dist"
    result = subprocess.run(
        [str(ROOT / ".venv" / "bin" / "rocm-bake"), "index", "check", str(dist), "--arch", "gfx950",
         "--arch", "gfx1201"],
        env=project.env, capture_output=True, text=True, timeout=900,
    )
    assert result.returncode == 0, result.stdout + result.stderr


#: What the CLI prints for an image ``refresh`` found gone, and for one ``up`` built and pushed.
VANISHED = re.compile(r"^ -  docker-build:index:Image (\S+) deleted", re.MULTILINE)
CREATED = re.compile(r"^ \+  docker-build:index:Image (\S+) created", re.MULTILINE)
UPDATED = re.compile(r"^ ~  pulumi-python:dynamic:Resource (\S+) updated", re.MULTILINE)
MANIFEST_TYPES = ", ".join([
    "application/vnd.oci.image.index.v1+json", "application/vnd.oci.image.manifest.v1+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
    "application/vnd.docker.distribution.manifest.v2+json",
])


def manifest_status(local_registry: LocalRegistry, ref: str) -> int:
    """HEAD of the manifest ``repo:tag@digest`` names, by digest, over TLS."""
    name, _, digest = ref.split("/", 1)[1].partition("@")
    repository = name.rsplit(":", 1)[0]
    assert digest.startswith("sha256:"), ref
    return local_registry.get(f"/v2/{repository}/manifests/{digest}", "HEAD", {"Accept": MANIFEST_TYPES}).status_code


def test_a_wiped_registry_shows_in_refresh_and_up_repairs_it(project: PulumiProject, local_registry: LocalRegistry,
                                                             buildkit: BuildKit, tmp_path: Path) -> None:
    """The registry loses every image; refresh and preview say so, up rebuilds, every output digest resolves.

    The demo base went with the registry too: the test re-pushes it as
    `make demo-base` does (``make demo`` runs it before every ``up``), since
    the base stands in for a public image that a stack never builds.
    """
    before = {stack: outputs(project, stack)["images"] for stack in STACKS}
    shutil.rmtree(local_registry.root / "storage")
    assert catalog(local_registry) == [], "the wipe must leave the registry empty"
    for stack in STACKS:
        arch = stack.removeprefix("demo-")
        images = {f"{target}-{arch}" for target in IMAGE_TARGETS}
        refreshed = project.run("refresh", "--yes", "--expect-no-changes", stack=stack, check=False)
        text = refreshed.stdout + refreshed.stderr
        assert "server gave HTTP response to HTTPS client" not in text, "the plugin must read the registry over TLS"
        assert refreshed.returncode != 0, f"refresh of {stack} passed although the registry lost its images"
        assert set(VANISHED.findall(text)) == images, f"refresh must name every vanished image:\n{text[-6000:]}"
        if stack == "demo-gfx950":  # the other stack's preview would say the same: spare the time
            previewed = project.run("preview", *POLICY, "--json", "--expect-no-changes", stack=stack, check=False)
            assert previewed.returncode != 0, f"preview --expect-no-changes of {stack} passed after the wipe"
            ops = changed(previewed.stdout)
            assert {name for name, op in ops.items() if op == "create"} == images, ops

    push_demo_base(local_registry, buildkit)
    for stack in STACKS:
        arch = stack.removeprefix("demo-")
        up = project.run("up", *POLICY, "--yes", "--skip-preview", stack=stack)
        assert set(CREATED.findall(up.stdout)) == {f"{target}-{arch}" for target in IMAGE_TARGETS}, up.stdout[-6000:]
        after = outputs(project, stack)["images"]
        assert set(after) == set(IMAGE_TARGETS)
        missing = {name: ref for name, ref in after.items() if manifest_status(local_registry, ref) != 200}
        assert not missing, f"{stack} outputs name digests the registry does not have: {missing}"
        # The wheels are re-fetched exactly when a wheel image's digest changed; either way the
        # registry now serves the very wheels the index holds (fetched again below).
        wheel_digests_changed = any(after[t] != before[stack][t] for t in WHEEL_TARGETS)
        assert (f"wheels-{arch}" in UPDATED.findall(up.stdout)) == wheel_digests_changed, up.stdout[-6000:]
        project.run("preview", *POLICY, "--expect-no-changes", stack=stack)
    project.run("refresh", "--yes", "--expect-no-changes", stack="demo-gfx950")

    out = tmp_path / "refetch"
    refs = [arg for t in WHEEL_TARGETS for arg in ("--image", outputs(project, "demo-gfx950")["images"][t])]
    fetched = subprocess.run([str(ROOT / ".venv" / "bin" / "rocm-bake"), "wheels", "fetch", "--arch", "gfx950",
                              *refs, "--out", str(out)], env=project.env, capture_output=True, text=True, timeout=300)
    assert fetched.returncode == 0, fetched.stdout + fetched.stderr
    indexed = project.dir / "dist" / "wheels" / "gfx950"
    assert {p.name: p.read_bytes() for p in (out / "wheels" / "gfx950").iterdir()} == \
        {p.name: p.read_bytes() for p in indexed.iterdir()}, "the repaired registry must serve the indexed wheels"


def test_editing_the_torch_dockerfile_rebuilds_torch_and_its_dependants_only(project: PulumiProject,
                                                                            local_registry: LocalRegistry) -> None:
    other_index = project.dir / "dist" / "index" / "gfx1201"
    before = {p: p.read_bytes() for p in sorted(other_index.rglob("*")) if p.is_file()}
    other_outputs = outputs(project, "demo-gfx1201")
    dockerfile = project.dir / "dockerfiles" / "demo" / "torch.Dockerfile"
    dockerfile.write_text(dockerfile.read_text().replace(
        "RUN python3 /usr/local/bin/demo_build.py install /deps/triton-*.whl",
        "RUN python3 /usr/local/bin/demo_build.py install /deps/triton-*.whl && echo edited > /opt/rocm/edited",
    ))
    preview = project.run("preview", *POLICY, "--json", "--diff", stack="demo-gfx950").stdout
    ops = changed(preview)
    assert "torch-gfx950" in ops, ops
    for name in UPSTREAM_OF_TORCH:
        assert f"{name}-gfx950" not in ops, f"{name} must not rebuild for a torch edit: {ops}"
    assert set(ops) <= {"torch-gfx950", "torchvision-gfx950", "amd_aiter-gfx950", "vllm-gfx950",
                        "torch-runtime-gfx950", "wheels-gfx950", "index-gfx950"}, ops
    # preview shows the rebuilt image's bare tag: the fetch and the index must still say "will change"
    assert "wheels-gfx950" in ops and "index-gfx950" in ops, ops
    project.run("up", *POLICY, "--yes", "--skip-preview", stack="demo-gfx950")
    project.run("preview", *POLICY, "--expect-no-changes", stack="demo-gfx950")
    images = outputs(project, "demo-gfx950")["images"]
    # after a wipe and repair (the step before), the next up's outputs name only digests the registry has
    assert {name: manifest_status(local_registry, ref) for name, ref in images.items()} == \
        {name: 200 for name in images}
    after = {p: p.read_bytes() for p in sorted(other_index.rglob("*")) if p.is_file()}
    assert after == before, "the gfx1201 stack's index must be untouched by a gfx950 up"
    assert outputs(project, "demo-gfx1201") == other_outputs


WRITES = ("POST", "PATCH", "PUT", "DELETE")


def api_writes(github: FakeGitHub) -> list[tuple[str, str, int]]:
    return [r for r in github.state.log if r[0] in WRITES]


def tamper_behind_pulumis_back(github: FakeGitHub, tag: str, page: str) -> None:
    """Shrink one release asset and rewrite one gh-pages file, as a person with repo access might."""
    st = github.state
    with st.lock:
        asset = next(iter(st.release_assets(tag).values()))
        asset["data"] = asset["data"][: len(asset["data"]) // 2]
        asset["size"] = len(asset["data"])
        asset.pop("digest", None)
        head = st.refs["refs/heads/gh-pages"]
        files = st.flatten(st.commit_info(head)["tree"])
        files[page] = ("100644", st.put("blob", b"<html>edited by hand</html>\n"))
        st.refs["refs/heads/gh-pages"] = st.make_commit(st.write_tree(files), [head], "hand edit")


def test_publish_through_the_real_providers_and_repair_drift(project: PulumiProject, github: FakeGitHub) -> None:
    token = {"GITHUB_TOKEN": github.state.token}
    tag, page = "wheels-gfx950-rocm10.1.0", "data/wheels/gfx950/index.html"
    project.run("config", "set", "rocm-bake:publish", "true", stack="demo-gfx950")
    project.run("up", *POLICY, "--yes", "--skip-preview", stack="demo-gfx950", extra_env=token)
    local = {p.name: p.read_bytes() for p in (project.dir / "dist" / "index" / "gfx950" / "files").iterdir()}
    published = {name: a["data"] for name, a in github.state.release_assets(tag).items()}
    assert published == local
    pages = github.state.branch_files()
    assert page in pages

    writes = len(api_writes(github))
    project.run("up", *POLICY, "--yes", "--skip-preview", stack="demo-gfx950", extra_env=token)
    assert api_writes(github)[writes:] == [], "a second up must make no API writes"

    tamper_behind_pulumis_back(github, tag, page)
    refreshed = project.run("refresh", "--yes", "--expect-no-changes", stack="demo-gfx950", extra_env=token,
                            check=False)
    assert refreshed.returncode != 0, "refresh must report the drift made behind Pulumi's back"
    project.run("up", *POLICY, "--yes", "--skip-preview", stack="demo-gfx950", extra_env=token)
    project.run("preview", *POLICY, "--expect-no-changes", stack="demo-gfx950", extra_env=token)
    assert {name: a["data"] for name, a in github.state.release_assets(tag).items()} == local
    assert github.state.branch_files()[page] == pages[page]


def test_the_token_is_never_in_state_or_logs(project: PulumiProject, github: FakeGitHub) -> None:
    exported = project.run("stack", "export", stack="demo-gfx950").stdout
    assert github.state.token not in exported
    assert all(github.state.token not in entry for entry in project.log)


def test_destroy_and_stack_rm_leave_nothing(project: PulumiProject, github: FakeGitHub) -> None:
    token = {"GITHUB_TOKEN": github.state.token}
    for stack in STACKS:
        project.run("destroy", "--yes", "--skip-preview", stack=stack, extra_env=token)
        again = project.run("destroy", "--yes", "--skip-preview", stack=stack, extra_env=token)
        assert again.returncode == 0
        project.run("stack", "rm", "--yes", stack=stack)
    listed = json.loads(project.run("stack", "ls", "--json").stdout)
    assert listed == []
    assert not (project.dir / "dist" / "index" / "gfx950").exists()
    assert github.state.release_by_tag("wheels-gfx950-rocm10.1.0") is None
    assert not any(p.startswith("data/wheels/gfx950/") for p in github.state.branch_files())
