#!/usr/bin/env python3
"""Build the engines from pinned Go modules, cache them by version, link them into .tools/bin.

The Pulumi CLI, its Python language host, the docker-build, command and
github plugins, BuildKit and buildx are Go programs; this machine reaches the
Go module proxy and no download site, so they are built here with ``go
build`` (never a downloaded binary):

* from the modules pinned in ``tools/<engine>/go.mod`` + ``go.sum`` when the
  proxy serves the main package's module (CLI, docker-build, BuildKit, buildx);
* from upstream source at a pinned commit when it does not (the language host,
  the command and github providers live in nested modules the proxy does not
  serve). The source is taken from ``$ROCM_BAKE_GIT_MIRRORS/<owner>+<name>/repo``
  (a directory of git mirrors, for machines that cannot reach github.com) or
  fetched from GitHub at that commit; it is unpacked into the cache, never into
  the repository. Its dependencies resolve through the proxy, pinned by the
  go.mod/go.sum its recipe names.

Builds are cached outside the work tree by engine, version and a hash of what
pins them (``$XDG_CACHE_HOME/rocm-bake/engines/<name>-<version>-<hash>/``), so a
fresh clone on the same machine (CI) reuses them and a second setup builds
nothing. Go's own caches are shared under ``$XDG_CACHE_HOME/rocm-bake/go``.

A ``pulumi`` v3 already on PATH is used instead of ours. Plugins are
registered with ``pulumi plugin install resource NAME VERSION --file BIN``:
the engine never downloads one.

Usage: ``python tools/engines.py [--only NAME ...] [--list]`` (``make setup`` runs it).
"""

from __future__ import annotations

import argparse
import filecmp
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TOOLS = ROOT / "tools"
BIN = ROOT / ".tools" / "bin"
PULUMI_VERSION = "3.274.0"
#: The Python SDK the program pins (pyproject.toml): the host runs that SDK's own exec script.
PYTHON_SDK_VERSION = "3.272.0"
HOST_FILES = ("pulumi-language-python", "pulumi-language-python-exec", "pulumi-resource-pulumi-python")


@dataclass(frozen=True)
class Source:
    """Upstream source at a pinned commit, for a main package whose module the Go proxy does not serve."""

    repo: str  #: owner/name on GitHub
    commit: str  #: full commit id (the tag it carries is in the engine's version)
    subdir: str  #: the module's directory in the repository; it becomes the build dir
    only: tuple[str, ...] = ()  #: files of ``subdir`` to take (all but tests when empty)


@dataclass(frozen=True)
class Engine:
    """One engine: what pins it, what to build, what to put beside it and what to register."""

    name: str
    version: str
    packages: tuple[str, ...]
    binaries: tuple[str, ...]
    ldflags: str = ""
    source: Source | None = None
    #: go.mod/go.sum from tools/<name> replace the source's own (when the source's pins do not build here).
    own_go_mod: bool = True
    #: ``go mod edit`` arguments applied to the source's go.mod, and go.sum lines they need.
    go_mod_edits: tuple[str, ...] = ()
    go_sum_lines: tuple[str, ...] = ()
    #: Commands run in the build dir before ``go build`` (argv, working subdir, extra env).
    prepare: tuple[tuple[tuple[str, ...], str, tuple[tuple[str, str], ...]], ...] = ()
    #: Files copied from a proxy module beside the binaries: (module@version, candidate paths, name).
    extras: tuple[tuple[str, tuple[str, ...], str], ...] = ()
    #: Resource plugin to register with the Pulumi CLI: (plugin name, binary).
    plugin: tuple[str, str] | None = None
    env: dict[str, str] = field(default_factory=dict)


SDK_PYTHON = f"github.com/pulumi/pulumi/sdk/v3@v{PYTHON_SDK_VERSION}"

ENGINES = (
    Engine(
        "pulumi", PULUMI_VERSION, ("github.com/pulumi/pulumi/pkg/v3/cmd/pulumi",), ("pulumi",),
        ldflags=f"-X github.com/pulumi/pulumi/sdk/v3/go/common/version.Version=v{PULUMI_VERSION}",
    ),
    # Upstream's host (module .../sdk/python/cmd/pulumi-language-python/v3 is not on the proxy): its
    # main.go at the pinned commit, built against the CLI's pkg/sdk (tools/pulumi-language-python/go.mod).
    # The two scripts it runs come from the Python SDK's version of the sdk module.
    Engine(
        "pulumi-language-python", PULUMI_VERSION, (".",), ("pulumi-language-python",),
        ldflags=f"-X github.com/pulumi/pulumi/sdk/v3/go/common/version.Version=v{PULUMI_VERSION}",
        source=Source("pulumi/pulumi", "1b5949891b3cefcb9974752b24a5ecef0acc86c8",
                      "sdk/python/cmd/pulumi-language-python", only=("main.go",)),
        extras=(
            (SDK_PYTHON, ("python/cmd/pulumi-language-python-exec",), "pulumi-language-python-exec"),
            (SDK_PYTHON, ("python/cmd/pulumi-resource-pulumi-python", "python/dist/pulumi-resource-pulumi-python"),
             "pulumi-resource-pulumi-python"),
        ),
    ),
    Engine(
        "docker-build", "0.0.22", ("github.com/pulumi/pulumi-docker-build/provider/cmd/pulumi-resource-docker-build",),
        ("pulumi-resource-docker-build",),
        ldflags="-X github.com/pulumi/pulumi-docker-build/provider.Version=0.0.22",
        plugin=("docker-build", "pulumi-resource-docker-build"),
    ),
    # Tag v1.2.1 of pulumi-command; its provider/ module is not on the proxy. Upstream's go.mod/go.sum.
    Engine(
        "command", "1.2.1", ("./cmd/pulumi-resource-command",), ("pulumi-resource-command",),
        ldflags="-X github.com/pulumi/pulumi-command/provider/pkg/version.Version=1.2.1",
        source=Source("pulumi/pulumi-command", "7f3eb6f3b77cd0fa3895ba437a695dd393f7dd25", "provider"),
        own_go_mod=False,
        plugin=("command", "pulumi-resource-command"),
    ),
    # Tag v6.15.0 of pulumi-github (a Terraform bridge). Upstream builds against a git submodule
    # (../upstream) at terraform-provider-github 20728bb30c11 = its tag v6.13.0, which the proxy serves;
    # the embedded schema is generated from the committed schema.json by upstream's generate.go.
    Engine(
        "github", "6.15.0", ("./cmd/pulumi-resource-github",), ("pulumi-resource-github",),
        ldflags="-X github.com/pulumi/pulumi-github/provider/v6/pkg/version.Version=6.15.0",
        source=Source("pulumi/pulumi-github", "e46c2bbdc297d05a418b40af162f1da43547819a", "provider"),
        own_go_mod=False,
        go_mod_edits=("-dropreplace=github.com/integrations/terraform-provider-github/v6",
                      "-require=github.com/integrations/terraform-provider-github/v6@v6.13.0"),
        go_sum_lines=(
            "github.com/integrations/terraform-provider-github/v6 v6.13.0 "
            "h1:reTE5vE9TdOeSrvf2Y1ef+ntuwNvbFf/4bi5oSlZYxg=",
            "github.com/integrations/terraform-provider-github/v6 v6.13.0/go.mod "
            "h1:oF1X9QOsB685Hh9Q6SzDPPcxaedPuS/4qOujN0Tk0mo=",
        ),
        prepare=((("go", "run", "generate.go"), "cmd/pulumi-resource-github", (("VERSION", "6.15.0"),)),),
        plugin=("github", "pulumi-resource-github"),
    ),
    Engine("buildkit", "0.34.2", ("github.com/moby/buildkit/cmd/buildkitd", "github.com/moby/buildkit/cmd/buildctl"),
           ("buildkitd", "buildctl")),
    Engine("buildx", "0.38.2", ("github.com/docker/buildx/cmd/buildx",), ("buildx",)),
)


class EngineError(Exception):
    """An engine cannot be built or installed; the message says which and what to do."""


def say(message: str) -> None:
    print(f"engines: {message}", flush=True)


def cache_root() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "rocm-bake"


def go_env() -> dict[str, str]:
    """The public proxy only (github.com itself is out of reach here); Go's caches shared under ours."""
    go = cache_root() / "go"
    return {
        **os.environ,
        "GOPROXY": os.environ.get("ROCM_BAKE_GOPROXY", "https://proxy.golang.org"),
        "GOFLAGS": "-mod=mod",
        "GOTOOLCHAIN": "local",
        "GOCACHE": os.environ.get("ROCM_BAKE_GOCACHE", str(go / "build")),
        "GOMODCACHE": os.environ.get("ROCM_BAKE_GOMODCACHE", str(go / "mod")),
    }


def pin_hash(engine: Engine) -> str:
    """What pins the build: tools/<name>'s Go files, plus the source commit and recipe for a source build."""
    digest = hashlib.sha256()
    module = TOOLS / engine.name
    if module.is_dir() and (engine.source is None or engine.own_go_mod):
        for path in sorted(module.rglob("*")):
            if path.is_file() and path.suffix in (".go", ".mod", ".sum"):
                digest.update(str(path.relative_to(module)).encode() + b"\0" + path.read_bytes())
    if engine.source is not None:
        recipe = (engine.source, engine.packages, engine.ldflags, engine.go_mod_edits, engine.go_sum_lines,
                  engine.prepare, engine.extras)
        digest.update(repr(recipe).encode())
    return digest.hexdigest()[:12]


def cache_dir(engine: Engine) -> Path:
    return cache_root() / "engines" / f"{engine.name}-{engine.version}-{pin_hash(engine)}"


def is_built(engine: Engine) -> bool:
    out = cache_dir(engine)
    return all((out / name).exists() for name in (*engine.binaries, *(extra[2] for extra in engine.extras)))


def run(argv: list[str], cwd: Path, env: dict[str, str], what: str) -> None:
    result = subprocess.run(argv, cwd=cwd, env=env)
    if result.returncode != 0:
        raise EngineError(f"{what} failed: `{' '.join(argv)}` exited {result.returncode} in {cwd} (see above)")


def git_archive(repo: Path, source: Source, dest: Path) -> None:
    """Unpack ``source.subdir`` (or its ``only`` files) at the pinned commit into ``dest``, without tests."""
    paths = [f"{source.subdir}/{name}" for name in source.only] or [source.subdir]
    with tempfile.TemporaryFile() as tar:
        result = subprocess.run(["git", f"--git-dir={repo}", "archive", "--format=tar", source.commit, *paths],
                                stdout=tar, stderr=subprocess.PIPE)
        if result.returncode != 0:
            raise EngineError(f"git archive {source.commit[:12]} of {source.repo} failed: {result.stderr.decode()}")
        tar.seek(0)
        with tarfile.open(fileobj=tar) as archive:
            for member in archive.getmembers():
                if member.isdir() or not member.name.startswith(source.subdir + "/"):
                    continue
                rel = Path(member.name).relative_to(source.subdir)
                if rel.name.endswith("_test.go") or rel.parts[0] in ("tests", "testdata"):
                    continue
                member.name = str(rel)
                archive.extract(member, dest, filter="data")


def source_repo(source: Source, scratch: Path) -> Path:
    """A git dir holding ``source.commit``: a local mirror when one is configured, else a shallow fetch."""
    owner, name = source.repo.split("/")
    for mirrors in filter(None, os.environ.get("ROCM_BAKE_GIT_MIRRORS", "").split(os.pathsep)):
        for candidate in (Path(mirrors) / f"{owner}+{name}" / "repo", Path(mirrors) / f"{owner}+{name}.git",
                          Path(mirrors) / owner / f"{name}.git"):
            if not candidate.exists():
                continue
            has = subprocess.run(["git", f"--git-dir={candidate}", "cat-file", "-e", f"{source.commit}^{{commit}}"],
                                 capture_output=True)
            if has.returncode == 0:
                return candidate
    repo = scratch / "git"
    url = f"https://github.com/{source.repo}"
    steps = (["git", "init", "-q", "--bare", str(repo)],
             ["git", f"--git-dir={repo}", "fetch", "-q", "--depth=1", "--filter=blob:none", url, source.commit])
    for argv in steps:
        result = subprocess.run(argv, capture_output=True, text=True, timeout=600)
        if result.returncode != 0:
            raise EngineError(
                f"cannot get {source.repo} at {source.commit[:12]}: `{' '.join(argv)}` failed: {result.stderr.strip()}."
                f" Its Go module is not on the module proxy; point ROCM_BAKE_GIT_MIRRORS at a directory holding"
                f" a git mirror {owner}+{name}/repo (or {owner}+{name}.git) that has this commit")
    return repo


def prepare_source(engine: Engine, work: Path, env: dict[str, str]) -> Path:
    """The source build dir: upstream files at the pin, our go.mod/go.sum or edits, generated files."""
    assert engine.source is not None
    src = work / "src"
    src.mkdir()
    git_archive(source_repo(engine.source, work), engine.source, src)
    if engine.own_go_mod:
        for name in ("go.mod", "go.sum"):
            shutil.copy(TOOLS / engine.name / name, src / name)
    if engine.go_mod_edits:
        run(["go", "mod", "edit", *engine.go_mod_edits], src, env, f"{engine.name}: go mod edit")
    if engine.go_sum_lines:
        with (src / "go.sum").open("a") as sums:
            sums.write("".join(line + "\n" for line in engine.go_sum_lines))
    for argv, subdir, extra_env in engine.prepare:
        run(list(argv), src / subdir, {**env, **dict(extra_env)}, f"{engine.name}: {' '.join(argv)}")
    return src


def module_dir(module: str, env: dict[str, str]) -> Path:
    result = subprocess.run(["go", "mod", "download", "-json", module], cwd=TOOLS / "pulumi", env=env,
                            capture_output=True, text=True)
    if result.returncode != 0:
        raise EngineError(f"go mod download {module} failed: {result.stdout}{result.stderr}")
    return Path(json.loads(result.stdout)["Dir"])


def build(engine: Engine) -> tuple[Path, float | None]:
    """Build ``engine`` into its cache dir unless it is there; return the dir and the seconds it took."""
    out = cache_dir(engine)
    if is_built(engine):
        return out, None
    env = {**go_env(), **engine.env}
    started = time.monotonic()
    origin = f"{engine.source.repo}@{engine.source.commit[:12]}" if engine.source else f"tools/{engine.name}"
    say(f"building {engine.name} {engine.version} from {origin} (first time only; cached in {out})")
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f"{engine.name}-", dir=out.parent) as scratch:
        work = Path(scratch)
        partial = work / "out"
        partial.mkdir()
        cwd = prepare_source(engine, work, env) if engine.source else TOOLS / engine.name
        argv = ["go", "build", "-p", os.environ.get("ROCM_BAKE_GO_JOBS", "2"), "-trimpath", "-o", f"{partial}/"]
        if engine.ldflags:
            argv += ["-ldflags", engine.ldflags]
        run([*argv, *engine.packages], cwd, env, f"building {engine.name}")
        if engine.packages == (".",):  # the module's own main package: name the binary
            built = [p for p in partial.iterdir() if p.is_file()]
            built[0].rename(partial / engine.binaries[0])
        for module, candidates, name in engine.extras:
            base = module_dir(module, env)
            found = next((base / rel for rel in candidates if (base / rel).is_file()), None)
            if found is None:
                raise EngineError(f"{engine.name}: none of {candidates} in {module}")
            shutil.copy(found, partial / name)
            (partial / name).chmod(0o755)
        shutil.rmtree(out, ignore_errors=True)
        partial.rename(out)
    took = time.monotonic() - started
    say(f"built {engine.name} {engine.version} in {took:.0f} s")
    return out, took


def link(target: Path, name: str) -> None:
    dest = BIN / name
    if dest.is_symlink() and os.readlink(dest) == str(target):
        return
    dest.unlink(missing_ok=True)
    dest.symlink_to(target)


def pulumi_env() -> dict[str, str]:
    return {**os.environ, "PULUMI_SKIP_UPDATE_CHECK": "true", "PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION": "true"}


def register(pulumi: Path, engine: Engine, built: Path) -> None:
    """Install the plugin from our binary unless that very binary is installed already."""
    assert engine.plugin is not None
    name, binary = engine.plugin
    home = Path(os.environ.get("PULUMI_HOME") or Path.home() / ".pulumi")
    installed = home / "plugins" / f"resource-{name}-v{engine.version}" / binary
    if installed.is_file() and filecmp.cmp(installed, built / binary, shallow=False):
        return
    argv = [str(pulumi), "plugin", "install", "resource", name, engine.version, "--file", str(built / binary)]
    if installed.exists():
        argv.append("--reinstall")
    result = subprocess.run(argv, env=pulumi_env(), capture_output=True, text=True)
    if result.returncode != 0:
        raise EngineError(f"registering plugin {name} {engine.version} failed: {result.stderr.strip()}")
    say(f"registered plugin {name} {engine.version} ({built / binary})")


WRAPPER = """#!/bin/sh
# rocm-bake's pulumi (written by tools/engines.py): the real CLI at {real},
# run against this project's file backend and passphrase unless you set your
# own, never acquiring a plugin from the network, with the engines and the
# program's venv on PATH. It does not touch your global `pulumi login`.
root='{root}'
if [ -z "${{PULUMI_BACKEND_URL:-}}" ]; then
  PULUMI_BACKEND_URL="file://$root/.rocm-bake/state"; mkdir -p "$root/.rocm-bake/state"
fi
if [ -z "${{PULUMI_CONFIG_PASSPHRASE+x}}${{PULUMI_CONFIG_PASSPHRASE_FILE+x}}" ] && [ -f "$root/.rocm-bake/passphrase" ]; then
  PULUMI_CONFIG_PASSPHRASE_FILE="$root/.rocm-bake/passphrase"; export PULUMI_CONFIG_PASSPHRASE_FILE
fi
: "${{PULUMI_SKIP_UPDATE_CHECK:=true}}"
: "${{PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION:=true}}"
export PULUMI_BACKEND_URL PULUMI_SKIP_UPDATE_CHECK PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION
PATH="$root/.tools/bin:$root/.venv/bin:$PATH"; export PATH
exec '{real}' "$@"
"""


def write_wrapper(real: Path) -> None:
    """``.tools/bin/pulumi``: the real CLI (ours or the system's) with the project's defaults."""
    dest = BIN / "pulumi"
    text = WRAPPER.format(real=real, root=ROOT)
    if dest.is_symlink() or not dest.exists() or dest.read_text() != text:
        dest.unlink(missing_ok=True)
        dest.write_text(text)
        dest.chmod(0o755)


def system_pulumi() -> Path | None:
    """A pulumi v3 on PATH (not our own wrapper) is used instead of building one."""
    path = os.pathsep.join(p for p in os.environ.get("PATH", "").split(os.pathsep)
                           if p and Path(p).resolve() != BIN.resolve())
    found = shutil.which("pulumi", path=path)
    if not found:
        return None
    try:
        out = subprocess.run([found, "version"], capture_output=True, text=True, timeout=30, env=pulumi_env())
    except (OSError, subprocess.TimeoutExpired):
        return None
    return Path(found) if out.stdout.strip().startswith("v3.") else None


def assemble_cli(cli: Path, host: Path) -> Path:
    """Our CLI with the language host beside it, in a dir of its own: ``.../pulumi-cli-<cli>-<host>/pulumi``.

    The CLI runs the language host that sits next to its own (resolved)
    executable; found elsewhere on PATH it warns on every run. Hard links
    (copies across file systems) keep both cached builds untouched.
    """
    dest = cache_root() / "engines" / f"pulumi-cli-{cli.name}-{host.name}"
    if all((dest / name).exists() for name in ("pulumi", *HOST_FILES)):
        return dest / "pulumi"
    partial = dest.with_name(dest.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    for src in (cli / "pulumi", *(host / name for name in HOST_FILES)):
        try:
            os.link(src, partial / src.name)
        except OSError:
            shutil.copy2(src, partial / src.name)
    shutil.rmtree(dest, ignore_errors=True)
    partial.rename(dest)
    return dest / "pulumi"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", action="append", help="build only these engines (no linking or registering)")
    parser.add_argument("--list", action="store_true", help="print each engine, version and cache dir")
    args = parser.parse_args()
    if args.list:
        for engine in ENGINES:
            print(f"{engine.name}\t{engine.version}\t{'built' if is_built(engine) else 'not built'}\t{cache_dir(engine)}")
        return 0
    if shutil.which("go") is None:
        print("engines: no Go toolchain on PATH: install Go (the engines are built from Go modules)", file=sys.stderr)
        return 1
    BIN.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    timings: list[str] = []
    try:
        if args.only:
            for engine in ENGINES:
                if engine.name in args.only:
                    build(engine)
            return 0
        built: dict[str, Path] = {}
        system = system_pulumi()
        for engine in ENGINES:
            if engine.name == "pulumi" and system is not None:
                say(f"using the pulumi on PATH: {system}")
                continue
            built[engine.name], took = build(engine)
            if took is not None:
                timings.append(f"{engine.name} {took:.0f} s")
        host = built["pulumi-language-python"]
        write_wrapper(system if system is not None else assemble_cli(built["pulumi"], host))
        for name in HOST_FILES:  # beside our CLI already; on PATH for a system CLI
            link(host / name, name)
        for name in ("buildkit", "buildx"):
            engine = next(e for e in ENGINES if e.name == name)
            for binary in engine.binaries:
                link(built[name] / binary, binary)
        for engine in ENGINES:
            if engine.plugin:
                register(BIN / "pulumi", engine, built[engine.name])
    except EngineError as exc:
        print(f"engines: error: {exc}", file=sys.stderr)
        return 1
    summary = f" (built: {', '.join(timings)})" if timings else " (all cached)"
    say(f"all engines ready in .tools/bin in {time.monotonic() - started:.0f} s{summary}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
