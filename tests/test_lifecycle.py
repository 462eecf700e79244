"""The main job on the real engine: both demo stacks through a full stack lifecycle.

Pulumi's own integration tests (ProgramTest) run preview, up, an empty
preview, refresh, an edit, and destroy; this does the same with the real
Pulumi CLI on a file backend, the real docker-build provider, and the
program's dynamic providers (pickled into state and run by the engine):
fetching, indexing and publishing are dynamic resources over the same core
the ``rocm-bake`` CLI runs (no ``command`` or ``github`` provider is
involved; the GPU test, a dynamic resource too, is off in the demo stacks).
BuildKit builds and pushes to a loopback registry that serves TLS from the
test's own CA (as ``make registry`` does: the docker-build provider's
``refresh`` reads registries over https only); publishing goes to a loopback
server that follows GitHub's REST contract, with the token given as the
stack's secret config. Each index is also installed by the very pip line
the product prints, into a fresh venv, and judged without rocm-bake's code.
It runs once per module (the lifecycle is slow); the tests below are its
steps, in order.
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import html
import io
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import threading
import zipfile
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.engine_fixtures import (  # noqa: F401 - base_ref, buildkit, registry: fixtures
    MANIFEST_TYPES,
    ROOT,
    BuildKit,
    PulumiProject,
    Registry,
    base_ref,
    buildkit,
    copy_project,
    project_env,
    push_demo_base,
    registry,
)
from tests.fake_github import FakeGitHub
from rocm_bake.manifests import load_targets
from rocm_bake.offload.targets import processor_of_mach


STACKS = ("demo-gfx950", "demo-gfx1201")
STACK_ARCHES = tuple(stack.removeprefix("demo-") for stack in STACKS)
#: Every preview and up runs the arch rules (policy/), as `make preview` and `make up` do.
POLICY = ("--policy-pack", str(ROOT / "policy"))
#: Every image a demo stack declares (manifests/targets.yml).
IMAGE_TARGETS = tuple(t.name for t in load_targets().targets)
#: The images whose wheels the stack fetches.
WHEEL_TARGETS = tuple(t.name for t in load_targets().targets if t.wheels)


def dependants_of(name: str) -> tuple[str, ...]:
    """Every target built on ``name``, directly or through another (manifests/targets.yml ``depends_on``)."""
    found: list[str] = []
    for target in load_targets().build_order():  # a dependency comes before its dependants
        if name in target.depends_on or set(found) & set(target.depends_on):
            found.append(target.name)
    return tuple(found)


DEPENDANTS_OF_TORCH = dependants_of("torch")
#: Images that never depend on torch (pytorch-base, triton-wheel): an edit of torch.Dockerfile must leave them alone.
UPSTREAM_OF_TORCH = tuple(t for t in IMAGE_TARGETS if t != "torch" and t not in DEPENDANTS_OF_TORCH)
#: The images that hold torch's own files (it is installed into them), so a new torch wheel is a new image.
CARRIES_TORCH = ("torch-runtime",)


#: The module's registry serves TLS from the test's own CA, as ``make registry`` does.
REGISTRY_TLS = True


@pytest.fixture(scope="module")
def github() -> Iterator[FakeGitHub]:
    with FakeGitHub(owner="octo", repo="rocm-bake", token="ghp_lifecycle_secret_token_123") as fake:
        yield fake


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory, registry: Registry, buildkit: BuildKit, base_ref: str, github: FakeGitHub) -> Iterator[PulumiProject]:
    work = tmp_path_factory.mktemp("lifecycle")
    state = work / "state"
    state.mkdir()
    env = project_env(state, buildkit, work, ssl_cert_file=registry.tls.bundle)
    proj = PulumiProject(copy_project(work / "project"), state, env)
    for stack in STACKS:
        proj.run("stack", "init", stack, "--secrets-provider", "passphrase")
        for key, value in {
            "rocm-bake:registry": registry.address,
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


def catalog(registry: Registry) -> list[str]:
    return registry.get("/v2/_catalog").json().get("repositories") or []


def outputs(project: PulumiProject, stack: str) -> dict:
    return json.loads(project.run("stack", "output", "--json", "--show-secrets", stack=stack).stdout)


def test_preview_of_a_new_stack_lists_creates_and_builds_nothing(project: PulumiProject,
                                                                registry: Registry) -> None:
    before = catalog(registry)
    preview = project.run("preview", *POLICY, "--json", stack="demo-gfx950").stdout
    ops = {s["op"] for s in steps(preview)}
    assert ops <= {"create", "same"}, ops
    created = [resource_name(s) for s in steps(preview) if s["op"] == "create"]
    for name in ("pytorch-base-gfx950", "triton-wheel-gfx950", "torch-gfx950", "wheels-gfx950", "index-gfx950"):
        assert name in created
    assert catalog(registry) == before, "preview must not build or push anything"


def test_up_builds_pushes_fetches_and_indexes(project: PulumiProject, registry: Registry) -> None:
    for stack in STACKS:
        up = project.run("up", *POLICY, "--yes", "--skip-preview", stack=stack)
        assert "✅ rocm-bake-arch-rules@v0.1.0" in up.stdout, "the arch rules did not judge the up"
    repos = catalog(registry)
    for target in ("pytorch-base", "triton-wheel", "torch", "torchvision", "amd_aiter", "vllm", "torch-runtime",
                   "cache"):
        assert f"rocm-bake/{target}" in repos, repos
    tags = registry.get("/v2/rocm-bake/cache/tags/list").json()["tags"]
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


EM_AMDGPU = 224

#: Runs in the fresh venv (standard library only, ``-I``): imports each installed distribution's top-level
#: modules, dlopens each shared object it ships and reads the clang-offload-bundle in its ``.hip_fatbin``.
PROBE = r'''
import ctypes, importlib, importlib.metadata as md, json, os, struct

def section(path, wanted):
    data = open(path, "rb").read()
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    headers = [struct.unpack_from("<IIQQQQ", data, shoff + i * shentsize) for i in range(shnum)]
    names = headers[shstrndx][4]
    for h in headers:
        name = data[names + h[0]:data.index(b"\0", names + h[0])].decode()
        if name == wanted:
            return data[h[4]:h[4] + h[5]]
    return b""

def bundle(blob):
    magic = b"__CLANG_OFFLOAD_BUNDLE__"
    if not blob.startswith(magic):
        return None
    count, = struct.unpack_from("<Q", blob, len(magic))
    pos, entries = len(magic) + 8, []
    for _ in range(count):
        offset, size, idlen = struct.unpack_from("<QQQ", blob, pos)
        entry = {"id": blob[pos + 24:pos + 24 + idlen].decode(), "size": size}
        pos += 24 + idlen
        obj = blob[offset:offset + size]
        if obj[:4] == b"\x7fELF":
            entry["e_machine"], = struct.unpack_from("<H", obj, 0x12)
            entry["e_flags"], = struct.unpack_from("<I", obj, 0x30)
        entries.append(entry)
    return entries

report = {}
for dist in md.distributions():
    name = dist.metadata["Name"]
    if name in ("pip", "setuptools"):
        continue
    files = list(dist.files or [])
    tops = sorted({f.parts[0].removesuffix(".py") for f in files
                   if not f.parts[0].endswith(".dist-info") and f.parts[0] not in ("..", "__pycache__", "bin")})
    modules = {top: importlib.import_module(top).__file__ for top in tops}
    libs = {}
    for f in files:
        if f.suffix == ".so":
            path = os.path.realpath(f.locate())
            lib = ctypes.CDLL(path)
            entry = getattr(lib, f.stem + "_entry", None)
            libs[str(f)] = {"loaded": path in open("/proc/self/maps").read(),
                            "entry(2)": entry(2) if entry is not None else None,
                            "bundle": bundle(section(path, ".hip_fatbin"))}
    report[name] = {"version": dist.version, "modules": modules, "libs": libs}
print(json.dumps(report))
'''


def normal(name: str) -> str:
    """PEP 503's normal form of a distribution name."""
    return re.sub(r"[-_.]+", "-", name).lower()


@contextlib.contextmanager
def served(directory: Path) -> Iterator[str]:
    """``python3 -m http.server --directory DIR`` in a thread, on a free loopback port: its base URL."""

    class Quiet(SimpleHTTPRequestHandler):
        def log_message(self, *_args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), partial(Quiet, directory=str(directory)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def printed_pip_lines(dist: Path, base_url: str, out: Path) -> dict[str, str]:
    """The pip line the product prints for each local index: ``rocm-bake index page`` given where DIST is served."""
    page = subprocess.run([str(ROOT / ".venv" / "bin" / "rocm-bake"), "index", "page", str(dist), "--out", str(out),
                           "--base-url", f"{base_url}/index"], capture_output=True, text=True, timeout=120)
    assert page.returncode == 0, page.stdout + page.stderr
    lines = [html.unescape(code) for code in re.findall(r"<code>(pip install [^<]*)</code>",
                                                          (out / "index.html").read_text())]
    return {arch: line for line in lines for arch in STACK_ARCHES if f"/index/{arch}/ " in line}


def pip_env() -> dict[str, str]:
    """No pip or uv configuration of this machine (its find-links would offer other wheels); the CA bundle stays."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PIP_", "UV_", "PYTHON")) or k == "PIP_CERT"}
    return {**env, "PIP_CONFIG_FILE": os.devnull, "PIP_NO_CACHE_DIR": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}


def install_and_probe(line: str, venv: Path) -> tuple[subprocess.CompletedProcess, dict]:
    """A fresh venv (``python -m venv``, with its own pip), ``line`` run by that pip, then PROBE in the venv."""
    made = subprocess.run([sys.executable, "-m", "venv", str(venv)], env=pip_env(), capture_output=True, text=True,
                          timeout=300)
    assert made.returncode == 0, made.stdout + made.stderr
    argv = shlex.split(line)
    assert argv[:2] == ["pip", "install"], line
    python = str(venv / "bin" / "python")
    installed = subprocess.run([python, "-m", *argv], env=pip_env(), capture_output=True, text=True, timeout=600,
                               cwd=venv)
    if installed.returncode != 0:
        return installed, {}
    probe = subprocess.run([python, "-I", "-c", PROBE], env=pip_env(), capture_output=True, text=True, timeout=120,
                           cwd=venv)
    assert probe.returncode == 0, f"importing what `{line}` installed failed:\n{probe.stderr[-4000:]}"
    return installed, json.loads(probe.stdout)


def test_each_index_installs_by_the_printed_pip_line_and_loads_its_arch(project: PulumiProject,
                                                                       tmp_path: Path) -> None:
    """Independent of ``rocm-bake index check``: the user's pip line into a fresh venv, then what loaded.

    Expected: the metapackage plus every wheel manifests/targets.yml names, each top-level module importing
    from the venv; every device-code package's shared object dlopens, and its ``.hip_fatbin`` holds code
    objects for the index's arch and no other (EM_AMDGPU, and the EF_AMDGPU_MACH the product reads as that arch).
    """
    targets = load_targets().targets
    expected = {"rocm-torch"} | {normal(w) for t in targets for w in t.wheels}
    with_device_code = {normal(w) for t in targets if t.device_code for w in t.wheels}
    with served(project.dir / "dist") as base_url:
        lines = printed_pip_lines(project.dir / "dist", base_url, tmp_path / "page")
        assert set(lines) == set(STACK_ARCHES), lines
        with ThreadPoolExecutor(len(lines)) as pool:
            runs = dict(zip(lines, pool.map(lambda arch: install_and_probe(lines[arch], tmp_path / f"venv-{arch}"),
                                            lines)))
    for arch, (installed, report) in runs.items():
        venv = tmp_path / f"venv-{arch}"
        assert installed.returncode == 0, \
            f"{arch}: `{lines[arch]}` failed:\n{installed.stdout[-3000:]}\n{installed.stderr[-3000:]}"
        assert {normal(n) for n in report} == expected, f"{arch}: `{lines[arch]}` installed {sorted(report)}"
        for name, dist in report.items():
            for module, path in dist["modules"].items():
                assert Path(path).is_relative_to(venv), f"{arch}: {name}: {module} imported from {path}"
            if normal(name) not in with_device_code:
                assert dist["libs"] == {}, f"{arch}: {name} ships no device code, yet has {sorted(dist['libs'])}"
                continue
            assert len(dist["libs"]) == 1, f"{arch}: {name} must ship one shared object: {sorted(dist['libs'])}"
            (lib_name, lib), = dist["libs"].items()
            assert lib["loaded"] and lib["entry(2)"] == 7, f"{arch}: {name}: {lib_name} did not load: {lib}"
            device = [e for e in lib["bundle"] or [] if e["id"].startswith("hip")]
            assert [e["id"].rsplit("--", 1)[-1].split(":")[0] for e in device] == [arch], \
                f"{arch}: {name}: {lib_name} holds code objects for {[e['id'] for e in device]}"
            (code,) = device
            assert code["e_machine"] == EM_AMDGPU and processor_of_mach(code["e_flags"]) == arch, \
                f"{arch}: {name}: {lib_name}'s code object is not {arch}'s: {code}"


#: What the CLI prints for an image ``refresh`` found gone, and for one ``up`` built and pushed.
VANISHED = re.compile(r"^ -  docker-build:index:Image (\S+) deleted", re.MULTILINE)
CREATED = re.compile(r"^ \+  docker-build:index:Image (\S+) created", re.MULTILINE)
UPDATED = re.compile(r"^ ~  pulumi-python:dynamic/\w+:\w+ (\S+) updated", re.MULTILINE)


def manifest_status(registry: Registry, ref: str) -> int:
    """HEAD of the manifest ``repo:tag@digest`` names, by digest, over TLS."""
    name, _, digest = ref.split("/", 1)[1].partition("@")
    repository = name.rsplit(":", 1)[0]
    assert digest.startswith("sha256:"), ref
    return registry.get(f"/v2/{repository}/manifests/{digest}", "HEAD", {"Accept": MANIFEST_TYPES}).status_code


def test_a_wiped_registry_shows_in_refresh_and_up_repairs_it(project: PulumiProject, registry: Registry,
                                                             buildkit: BuildKit, tmp_path: Path) -> None:
    """The registry loses every image; refresh and preview say so, up rebuilds, every output digest resolves.

    The demo base went with the registry too: the test re-pushes it as
    `make demo-base` does (``make demo`` runs it before every ``up``), since
    the base stands in for a public image that a stack never builds.
    """
    before = {stack: outputs(project, stack)["images"] for stack in STACKS}
    shutil.rmtree(registry.root / "storage")
    assert catalog(registry) == [], "the wipe must leave the registry empty"
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

    push_demo_base(registry, buildkit)
    for stack in STACKS:
        arch = stack.removeprefix("demo-")
        up = project.run("up", *POLICY, "--yes", "--skip-preview", stack=stack)
        assert set(CREATED.findall(up.stdout)) == {f"{target}-{arch}" for target in IMAGE_TARGETS}, up.stdout[-6000:]
        after = outputs(project, stack)["images"]
        assert set(after) == set(IMAGE_TARGETS)
        missing = {name: ref for name, ref in after.items() if manifest_status(registry, ref) != 200}
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


#: An image ``up`` rebuilt: ``~  docker-build:index:Image torch-gfx950 updated (0.87s) [diff: ~contextHash]``.
IMAGE_UPDATED = re.compile(r"^ ~  docker-build:index:Image (\S+) updated\b", re.MULTILINE)
#: The torch edit: a dependency added to torch's wheel, so its bytes (and torch's image) really change; an edit
#: that only touches the build stage leaves the wheel, and so the image BuildKit pushes, byte for byte the same.
TORCH_LINE = '--requires "triton==3.6.0+git1a2b3c4.rocm${ROCM_VERSION}"'
TORCH_EDIT = TORCH_LINE + ' --requires "triton_kernels==1.0.0"'


def digest(ref: str) -> str:
    return ref.rpartition("@")[2]


def test_editing_the_torch_dockerfile_rebuilds_torch_and_its_dependants_only(project: PulumiProject,
                                                                            registry: Registry) -> None:
    other_index = project.dir / "dist" / "index" / "gfx1201"
    before = {p: p.read_bytes() for p in sorted(other_index.rglob("*")) if p.is_file()}
    other_outputs = outputs(project, "demo-gfx1201")
    own_before = outputs(project, "demo-gfx950")
    dockerfile = project.dir / "dockerfiles" / "demo" / "torch.Dockerfile"
    text = dockerfile.read_text()
    assert TORCH_LINE in text, f"{dockerfile} no longer builds torch as this edit expects"
    dockerfile.write_text(text.replace(TORCH_LINE, TORCH_EDIT))
    preview = project.run("preview", *POLICY, "--json", "--diff", stack="demo-gfx950").stdout
    ops = changed(preview)
    assert "torch-gfx950" in ops, ops
    for name in UPSTREAM_OF_TORCH:
        assert f"{name}-gfx950" not in ops, f"{name} must not rebuild for a torch edit: {ops}"
    assert set(ops) <= {f"{t}-gfx950" for t in ("torch", *DEPENDANTS_OF_TORCH, "wheels", "index")}, ops
    # preview shows the rebuilt image's bare tag: the fetch and the index must still say "will change"
    assert "wheels-gfx950" in ops and "index-gfx950" in ops, ops
    up = project.run("up", *POLICY, "--yes", "--skip-preview", stack="demo-gfx950")
    project.run("preview", *POLICY, "--expect-no-changes", stack="demo-gfx950")
    own_after = outputs(project, "demo-gfx950")
    images = own_after["images"]
    # after a wipe and repair (the step before), the next up's outputs name only digests the registry has
    assert {name: manifest_status(registry, ref) for name, ref in images.items()} == \
        {name: 200 for name in images}
    # What up really did, by digest: the untouched images are the very same images; torch is a new one.
    assert own_after["image_tags"] == own_before["image_tags"]
    rebuilt = set(IMAGE_UPDATED.findall(up.stdout))
    for name in UPSTREAM_OF_TORCH:
        assert digest(images[name]) == digest(own_before["images"][name]), \
            f"{name}-gfx950 changed after the torch edit's up: {own_before['images'][name]} -> {images[name]}"
        assert f"{name}-gfx950" not in rebuilt, f"up rebuilt {name}-gfx950 for a torch edit"
    for name in ("torch", *CARRIES_TORCH):
        assert digest(images[name]) != digest(own_before["images"][name]), \
            f"{name}-gfx950 kept its digest {digest(images[name])} although torch's wheel changed"
    # Every dependant is rebuilt against the new torch (its context pins torch by digest). Those that only
    # build against it (torchvision, amd_aiter, vllm) make the same wheel again, so BuildKit may push the very
    # same image: their digest is not asserted either way.
    assert rebuilt == {f"{t}-gfx950" for t in ("torch", *DEPENDANTS_OF_TORCH)}, \
        f"up must rebuild torch and its dependants, exactly: {sorted(rebuilt)}"
    after = {p: p.read_bytes() for p in sorted(other_index.rglob("*")) if p.is_file()}
    assert after == before, "the gfx1201 stack's index must be untouched by a gfx950 up"
    assert outputs(project, "demo-gfx1201") == other_outputs


WRITES = ("POST", "PATCH", "PUT", "DELETE")
TOKEN_KEY = "rocm-bake:githubToken"
RELEASE_TAG = "wheels-gfx950-rocm10.1.0"
PAGES_DIR = "data/wheels/gfx950/"
#: The publishing resources of demo-gfx950, by the name the CLI prints, with the class that declares each.
PUBLISHED = {"publish-gfx950-release": "GitHubRelease", "publish-gfx950-assets": "ReleaseAssets",
             "publish-gfx950-pages": "PagesIndex"}
DRIFTABLE = {name: kind for name, kind in PUBLISHED.items() if kind in ("ReleaseAssets", "PagesIndex")}
#: A resource line with an operation, as the CLI prints it in a preview (``update``) or a run (``updated (0.4s)``):
#: `` ~  pulumi-python:dynamic/publish:ReleaseAssets publish-gfx950-assets update``; ``refreshing`` lines are no operation.
STEP = re.compile(r"^ (?:[~+\-]|\+-|-\+)\s+\S+ (\S+) (?:update|updated|delete|deleted|create|created|replace|replaced)\b",
                  re.MULTILINE)


def stepped(text: str) -> set[str]:
    """The resources the CLI output shows an operation on."""
    return set(STEP.findall(text))


def named(names: set[str]) -> str:
    return ", ".join(f"{PUBLISHED.get(n, '?')} ({n})" for n in sorted(names)) or "none"


def api_writes(github: FakeGitHub) -> list[tuple[str, str, int]]:
    return [r for r in github.state.log if r[0] in WRITES]


@dataclass
class Tampered:
    """What was changed behind Pulumi's back."""

    deleted_asset: str
    shrunk_asset: str
    deleted_page: str
    edited_page: str


def tamper_behind_pulumis_back(github: FakeGitHub) -> Tampered:
    """Delete one release asset, shrink another, delete one gh-pages file and rewrite another, as a person with
    repo access might."""
    st = github.state
    with st.lock:
        assets = st.release_assets(RELEASE_TAG)
        deleted, shrunk = sorted(assets)[:2]
        del st.assets[assets[deleted]["id"]]
        asset = assets[shrunk]
        asset["data"] = asset["data"][: len(asset["data"]) // 2]
        asset["size"] = len(asset["data"])
        asset.pop("digest", None)
        head = st.refs["refs/heads/gh-pages"]
        files = st.flatten(st.commit_info(head)["tree"])
        edited = f"{PAGES_DIR}index.html"
        removed = sorted(p for p in files if p.startswith(PAGES_DIR) and p != edited)[0]
        del files[removed]
        files[edited] = ("100644", st.put("blob", b"<html>edited by hand</html>\n"))
        st.refs["refs/heads/gh-pages"] = st.make_commit(st.write_tree(files), [head], "hand edit")
    return Tampered(deleted, shrunk, removed, edited)


def test_publish_through_the_real_providers_and_repair_drift(project: PulumiProject, github: FakeGitHub) -> None:
    # The token goes in as the stack's secret config, read from stdin (never on a command line); no GITHUB_TOKEN.
    assert not any(k.startswith("GITHUB_") for k in project.env)
    project.run("config", "set", "--secret", TOKEN_KEY, stack="demo-gfx950", stdin=github.state.token)
    project.run("config", "set", "rocm-bake:publish", "true", stack="demo-gfx950")
    first = project.run("up", *POLICY, "--yes", "--skip-preview", stack="demo-gfx950")
    assert stepped(first.stdout) >= set(PUBLISHED), f"up must create {named(set(PUBLISHED))}:\n{first.stdout[-4000:]}"
    local = {p.name: p.read_bytes() for p in (project.dir / "dist" / "index" / "gfx950" / "files").iterdir()}
    published = {name: a["data"] for name, a in github.state.release_assets(RELEASE_TAG).items()}
    assert published == local
    pages = github.state.branch_files()
    assert f"{PAGES_DIR}index.html" in pages
    (metapackage,) = (name for name in local if name.startswith("rocm_torch-") and name.endswith(".whl"))
    with zipfile.ZipFile(io.BytesIO(local[metapackage])) as zf:
        recorded = json.loads(zf.read("rocm_torch/index.json"))["index_base"]
    assert recorded == f"{github.web_url}/pages/{github.full_name}/{PAGES_DIR.rsplit('/', 2)[0]}", \
        f"the published metapackage's checker must name the Pages index it is served from, not {recorded!r}"

    writes = len(api_writes(github))
    project.run("up", *POLICY, "--yes", "--skip-preview", stack="demo-gfx950")
    assert api_writes(github)[writes:] == [], "a second up must make no API writes"

    tampered = tamper_behind_pulumis_back(github)
    refreshed = project.run("refresh", "--yes", "--expect-no-changes", stack="demo-gfx950", check=False)
    text = refreshed.stdout + refreshed.stderr
    assert refreshed.returncode != 0 and "no changes were expected for refresh but changes were proposed" in text, \
        f"refresh must fail for the drift, not for another reason:\n{text[-6000:]}"
    drifted = stepped(refreshed.stdout)
    assert drifted == set(DRIFTABLE), \
        f"refresh must show drift in {named(set(DRIFTABLE))} and nothing else; it showed {named(drifted)}:\n" \
        f"{refreshed.stdout[-6000:]}"

    repaired = project.run("up", *POLICY, "--yes", "--skip-preview", stack="demo-gfx950")
    assert stepped(repaired.stdout) == set(DRIFTABLE), \
        f"up must repair {named(set(DRIFTABLE))} only; it touched {named(stepped(repaired.stdout))}"
    assets = github.state.release_assets(RELEASE_TAG)
    for name in (tampered.deleted_asset, tampered.shrunk_asset):
        want = f"sha256:{hashlib.sha256(local[name]).hexdigest()}"
        got = assets.get(name, {})
        assert got.get("state") == "uploaded" and got.get("digest") == want and got.get("data") == local[name], \
            f"ReleaseAssets (publish-gfx950-assets): {name} is not back after up (digest {got.get('digest')}, " \
            f"want {want})"
    assert {name: a["data"] for name, a in assets.items()} == local, "ReleaseAssets: the release must hold the index's files"
    files = github.state.branch_files()
    for page in (tampered.deleted_page, tampered.edited_page):
        assert files.get(page) == pages[page], f"PagesIndex (publish-gfx950-pages): {page} is not back after up"
    project.run("refresh", "--yes", "--expect-no-changes", stack="demo-gfx950")
    project.run("preview", *POLICY, "--expect-no-changes", stack="demo-gfx950")


def state_text(path: Path) -> bytes:
    data = path.read_bytes()
    return gzip.decompress(data) if path.suffix == ".gz" else data


def test_the_token_is_never_in_stack_files_state_or_output(project: PulumiProject, github: FakeGitHub) -> None:
    token = github.state.token
    fragments = {token, token[:12], token[-12:]}
    stack_file = project.dir / "stacks" / "Pulumi.demo-gfx950.yaml"
    assert re.search(rf"^  {re.escape(TOKEN_KEY)}:\n    secure: v1:", stack_file.read_text(), re.MULTILINE), \
        f"{stack_file} must hold {TOKEN_KEY} as a secret:\n{stack_file.read_text()}"
    files = [*(project.dir / "stacks").glob("Pulumi.*.yaml"), *(p for p in project.state.rglob("*") if p.is_file())]
    assert any("demo-gfx950" in p.name for p in project.state.rglob("*")), "no state file found to check"
    leaked = [str(p) for p in files for f in fragments if f.encode() in state_text(p)]
    assert not leaked, f"the token is in plain text in {leaked}"
    exported = project.run("stack", "export", stack="demo-gfx950").stdout
    assert not any(f in exported for f in fragments)
    assert not [entry.splitlines()[0] for entry in project.log if any(f in entry for f in fragments)], \
        "the token is in the output of a pulumi command"


def test_destroy_and_stack_rm_leave_nothing(project: PulumiProject, github: FakeGitHub) -> None:
    for stack in STACKS:  # demo-gfx950's publishing resources reach GitHub with the stack's secret config
        project.run("destroy", "--yes", "--skip-preview", stack=stack)
        again = project.run("destroy", "--yes", "--skip-preview", stack=stack)
        assert again.returncode == 0
        project.run("stack", "rm", "--yes", stack=stack)
    listed = json.loads(project.run("stack", "ls", "--json").stdout)
    assert listed == []
    assert not (project.dir / "dist" / "index" / "gfx950").exists()
    assert github.state.release_by_tag(RELEASE_TAG) is None
    assert not any(p.startswith(PAGES_DIR) for p in github.state.branch_files())
