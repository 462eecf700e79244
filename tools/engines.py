#!/usr/bin/env python3
"""Build the engines from the pinned Go modules under tools/, cache them by version, link them into .tools/bin.

The Pulumi CLI, its Python language host, the docker-build plugin, BuildKit
and buildx are Go programs; this machine reaches the Go module proxy and no
download site, so they are built here with ``go build`` from the modules
pinned in ``tools/<engine>/go.mod`` + ``go.sum`` (never a downloaded binary).

* What the team already has comes first (``find_installed``): ``pulumi`` on
  PATH with its Python language host beside it, the docker-build plugin in
  ``$PULUMI_HOME/plugins``, ``buildx`` on PATH or ``docker buildx``'s plugin,
  ``buildkitd``/``buildctl``, ``versitygw`` and ``actionlint`` on PATH. One is
  used when it is compatible with the pin in tools/ (``compatible``: the same
  major version and not older; a plugin: exactly the pinned version, the only
  one the engine loads for the SDK package that asks for it). Only what is
  missing or too old is built; ``--engines build`` (``make setup
  ENGINES=build``) builds every one. Setup prints one line per engine: which,
  from where, which version.
* Built engines are cached outside the work tree by engine, version and the
  hash of its go.sum (``$XDG_CACHE_HOME/rocm-bake/engines/<name>-<version>-<hash>/``),
  so a fresh clone on the same machine (CI) reuses them and a second setup
  builds nothing.
* ``.tools/cli/`` holds this checkout's own hard link (else copy) of the CLI
  with this checkout's language host beside it; ``.tools/bin/pulumi`` execs it.
* Plugins are registered with ``pulumi plugin install resource NAME VERSION
  --file BIN``: the engine never tries to download one.

Usage: ``python tools/engines.py [--only NAME ...] [--engines installed|build]`` (``make setup`` runs it);
``python tools/engines.py --go-test pulumi-language-python`` runs the host's Go tests (``make test-host``).
"""

from __future__ import annotations

import argparse
import fcntl
import filecmp
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TOOLS = ROOT / "tools"
BIN = ROOT / ".tools" / "bin"
CLI = ROOT / ".tools" / "cli"
#: What setup took for each engine: {name: {"version", "source": "installed" | "built", "files": {name: path}}}.
RECORD = ROOT / ".tools" / "engines.json"
#: Run in front of every plugin we install (``Engine.watched``): ends the plugin when the engine's pipe closes.
WATCHDOG = TOOLS / "plugin-watchdog"
PULUMI_VERSION = "3.274.0"


@dataclass(frozen=True)
class Engine:
    """One Go module under tools/ and the commands built from it."""

    name: str
    version: str
    packages: tuple[str, ...]
    binaries: tuple[str, ...]
    ldflags: str = ""
    #: Files copied beside the binaries: (module@version, path in module, name); module "." is tools/<name>.
    extras: tuple[tuple[str, str, str], ...] = ()
    #: Resource plugin to register with the Pulumi CLI: its name (the folder of this build is installed).
    plugin: str | None = None
    #: Plugins (binaries or extras) installed behind tools/plugin-watchdog: the file NAME is the watchdog and
    #: NAME.watched the plugin it runs, so the plugin ends with the engine, a `kill -9` of `pulumi up` included.
    watched: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    #: The arguments that make each binary print its version (an installed one is judged by it).
    version_args: tuple[str, ...] = ("--version",)


ENGINES = (
    Engine(
        "pulumi", PULUMI_VERSION, ("github.com/pulumi/pulumi/pkg/v3/cmd/pulumi",), ("pulumi",),
        ldflags=f"-X github.com/pulumi/pulumi/sdk/v3/go/common/version.Version=v{PULUMI_VERSION}",
        version_args=("version",),
    ),
    # Our own host (tools/pulumi-language-python/main.go): upstream's module is not served here.
    # The exec script it runs ships in the SDK module's python folder. The dynamic-provider plugin is ours
    # (tools/pulumi-language-python/pulumi-resource-pulumi-python): the SDK's, behind the watchdog.
    Engine(
        "pulumi-language-python", PULUMI_VERSION, (".",), ("pulumi-language-python",),
        ldflags=f"-X main.version={PULUMI_VERSION}",
        extras=(
            (f"github.com/pulumi/pulumi/sdk/v3@v{PULUMI_VERSION}", "python/cmd/pulumi-language-python-exec",
             "pulumi-language-python-exec"),
            (".", "pulumi-resource-pulumi-python", "pulumi-resource-pulumi-python"),
        ),
        watched=("pulumi-resource-pulumi-python",),
        version_args=("-version",),
    ),
    Engine(
        "docker-build", "0.0.22", ("github.com/pulumi/pulumi-docker-build/provider/cmd/pulumi-resource-docker-build",),
        ("pulumi-resource-docker-build",),
        ldflags="-X github.com/pulumi/pulumi-docker-build/provider.Version=0.0.22",
        plugin="docker-build",
        # upstream's provider.Main never checks that the engine lives: without the watchdog a killed `pulumi up`
        # left it running for good
        watched=("pulumi-resource-docker-build",),
    ),
    # Their version packages default to v0.0.0+unknown: buildx and `buildx ls` read the daemon's version.
    Engine("buildkit", "0.34.2", ("github.com/moby/buildkit/cmd/buildkitd", "github.com/moby/buildkit/cmd/buildctl"),
           ("buildkitd", "buildctl"), ldflags="-X github.com/moby/buildkit/version.Version=v0.34.2"),
    Engine("buildx", "0.38.2", ("github.com/docker/buildx/cmd/buildx",), ("buildx",),
           ldflags="-X github.com/docker/buildx/version.Version=v0.38.2", version_args=("version",)),
    # The S3-compatible server behind `make state-server` (rocm_bake/local/state_server.py): team state in a bucket.
    Engine("versitygw", "1.8.0", ("github.com/versity/versitygw/cmd/versitygw",), ("versitygw",),
           ldflags="-X main.Version=v1.8.0"),
    # The workflow linter the tests run (tests/test_workflows.py): the Go module, so setup needs no npm.
    Engine("actionlint", "1.7.12", ("github.com/rhysd/actionlint/cmd/actionlint",), ("actionlint",),
           ldflags="-X github.com/rhysd/actionlint.version=1.7.12", version_args=("-version",)),
)


#: Plugins of a pinned Pulumi SDK (pyproject.toml) that no Go module on the proxy provides ("NAME VERSION": why),
#: checked by hand with `go list -m`; a stack that declares their resources needs the plugin installed by other
#: means. None today: the program's SDKs are pulumi and pulumi-docker-build (tests/test_engines.py keeps this true).
NOT_BUILDABLE: dict[str, str] = {}


def say(message: str) -> None:
    print(f"engines: {message}", flush=True)


def cache_root() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "rocm-bake"


def go_env() -> dict[str, str]:
    """The public proxy only (github.com itself is out of reach); Go's build and module caches shared under ours.

    One GOCACHE/GOMODCACHE for every engine: the CLI, the plugins and the
    host share most of pulumi/sdk, so each later build compiles only its own.
    """
    go = cache_root() / "go"
    return {
        **os.environ,
        "GOPROXY": os.environ.get("GOPROXY", "https://proxy.golang.org"),
        "GOFLAGS": "-mod=mod",
        "GOTOOLCHAIN": "local",
        "GOCACHE": str(go / "build"),
        "GOMODCACHE": str(go / "mod"),
    }


def module_hash(engine: Engine) -> str:
    """What pins a build: tools/<name>'s Go files, the ldflags (a version stamped at link time), the watchdog."""
    digest = hashlib.sha256(engine.ldflags.encode())
    if engine.watched:
        digest.update(b"plugin-watchdog\0" + WATCHDOG.read_bytes())
    module = TOOLS / engine.name
    ours = {rel for source, rel, _name in engine.extras if source == "."}
    for path in sorted(module.rglob("*")):
        if path.is_file() and (path.suffix in (".go", ".mod", ".sum") or path.name in ("go.mod", "go.sum")
                               or str(path.relative_to(module)) in ours):
            digest.update(str(path.relative_to(module)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:12]


def cache_dir(engine: Engine) -> Path:
    return cache_root() / "engines" / f"{engine.name}-{engine.version}-{module_hash(engine)}"


# ------------------------------------------------------------ what the team already has


@dataclass(frozen=True)
class Installed:
    """An engine found installed: the file behind each name setup places, its version, and where it was found."""

    version: str
    files: dict[str, Path]
    where: str


def parse_version(text: str) -> tuple[int, int, int] | None:
    """The first ``X.Y.Z`` (an optional leading ``v``) in a version line: ``buildx v0.38.2 abc`` -> (0, 38, 2)."""
    match = re.search(r"(?<![\w.])v?(\d+)\.(\d+)\.(\d+)", text)
    return (int(match[1]), int(match[2]), int(match[3])) if match else None


def compatible(found: str, pin: str) -> bool:
    """The rule for a binary: the pin's major version and not older than the pin (a later release of the same
    line keeps the interfaces the project uses; an older one may lack what the pin added)."""
    have, want = parse_version(found), parse_version(pin)
    return have is not None and want is not None and have[0] == want[0] and have >= want


def version_of(path: Path, args: tuple[str, ...]) -> str | None:
    """What ``path ARGS`` says its version is (X.Y.Z), or None when it says none or does not run."""
    try:
        done = subprocess.run([str(path), *args], capture_output=True, text=True, timeout=30,
                              env={**os.environ, "PULUMI_SKIP_UPDATE_CHECK": "true"})
    except (OSError, subprocess.TimeoutExpired):
        return None
    found = parse_version(done.stdout + "\n" + done.stderr) if done.returncode == 0 else None
    return ".".join(map(str, found)) if found else None


def path_candidates(name: str) -> list[Path]:
    """Every executable ``name`` on PATH, in PATH order, outside this checkout's own .tools and not one of our
    cached builds (another checkout's .tools/bin links to them: those are taken as built, from the cache)."""
    ours = {BIN.resolve(), CLI.resolve()}
    built = (cache_root() / "engines").resolve()
    found = []
    for entry in os.environ.get("PATH", "").split(os.pathsep):
        if not entry or Path(entry).resolve() in ours:
            continue
        candidate = Path(entry) / name
        if (candidate.is_file() and os.access(candidate, os.X_OK) and candidate not in found
                and not candidate.resolve().is_relative_to(built)):
            found.append(candidate)
    return found


def is_script(path: Path) -> bool:
    """A ``#!`` script (another checkout's .tools/bin/pulumi, a version manager's shim), not a program itself."""
    try:
        with path.open("rb") as handle:
            return handle.read(2) == b"#!"
    except OSError:
        return True


#: Where the docker CLI looks for its plugins (``docker buildx`` is ``docker-buildx`` in one of them).
def docker_plugin_dirs() -> list[Path]:
    config = Path(os.environ.get("DOCKER_CONFIG") or Path.home() / ".docker")
    return [config / "cli-plugins", *(Path(d) for d in ("/usr/local/lib/docker/cli-plugins",
                                                        "/usr/local/libexec/docker/cli-plugins",
                                                        "/usr/lib/docker/cli-plugins",
                                                        "/usr/libexec/docker/cli-plugins"))]


def first_compatible(engine: Engine, candidates: list[tuple[Path, str]]) -> tuple[Installed | None, str | None]:
    """The first candidate (path, how to name it) whose version is compatible; else why none was used."""
    seen = []
    for path, where in candidates:
        version = version_of(path, engine.version_args)
        if version is not None and compatible(version, engine.version):
            return Installed(version, {engine.binaries[0]: path}, where), None
        seen.append(f"{where} is {version or 'of no known version'}")
    return None, "; ".join(seen) or None


def find_installed(engine: Engine, cli: Installed | None) -> tuple[Installed | None, str | None]:
    """``engine`` as the team has it, when compatible with the pin; else (None, what was found and not used)."""
    if engine.name == "pulumi":
        return first_compatible(engine, [(p, str(p)) for p in path_candidates("pulumi") if not is_script(p)])
    if engine.name == "pulumi-language-python":
        return installed_host(engine, cli)
    if engine.plugin is not None:
        return installed_plugin(engine)
    if engine.name == "buildx":
        plugins = [(d / "docker-buildx", f"docker buildx ({d / 'docker-buildx'})") for d in docker_plugin_dirs()]
        return first_compatible(engine, [(p, str(p)) for p in path_candidates("buildx")] +
                                [(p, w) for p, w in plugins if p.is_file() and os.access(p, os.X_OK)])
    found: dict[str, Path] = {}
    versions = []
    for name in engine.binaries:  # buildkitd and buildctl: both, from one directory, of one compatible version
        hit, why = first_compatible(replace(engine, binaries=(name,)), [(p, str(p)) for p in path_candidates(name)])
        if hit is None:
            return None, why
        found[name] = hit.files[name]
        versions.append(hit.version)
    if len(set(versions)) != 1 or len({p.parent for p in found.values()}) != 1:
        return None, " and ".join(f"{p} is {v}" for p, v in zip(found.values(), versions)) + " (not one install)"
    return Installed(versions[0], found, ", ".join(str(p) for p in found.values())), None


def installed_host(engine: Engine, cli: Installed | None) -> tuple[Installed | None, str | None]:
    """The Python language host the installed CLI ships beside itself (where the CLI takes it from), with the
    exec script and the dynamic-provider plugin it runs; judged like a binary by ``-version``."""
    if cli is None:
        return None, None
    beside = cli.files["pulumi"].resolve().parent
    names = (*engine.binaries, *(extra[2] for extra in engine.extras))
    missing = [name for name in names if not (beside / name).is_file()]
    if missing:
        return None, f"{beside} has no {', '.join(missing)}"
    version = version_of(beside / engine.binaries[0], engine.version_args)
    if version is None or not compatible(version, engine.version):
        return None, f"{beside / engine.binaries[0]} is {version or 'of no known version'}"
    files = {name: beside / name for name in installed_files(engine) if (beside / name).is_file()}
    for name in engine.watched:  # a host laid out as ours (a copy of our build): its plugin behind the watchdog
        if is_ours(files[name]) and f"{name}.watched" not in files:
            return None, f"{files[name]} is rocm-bake's watchdog without {name}.watched beside it"
    return Installed(version, files, str(beside)), None


def is_ours(path: Path) -> bool:
    """A plugin as rocm-bake installs it: tools/plugin-watchdog (any version of it) in front of the plugin."""
    try:
        return WATCHDOG.read_bytes().split(b"\n")[1] in path.read_bytes()[:4096]
    except OSError:
        return False


def installed_plugin(engine: Engine) -> tuple[Installed | None, str | None]:
    """The plugin at exactly the pinned version in the plugin cache, installed by other means than ours (ours is
    kept in step with this checkout's build by ``register``). The engine loads no other version for the SDK."""
    where = plugin_dir(engine)
    binary = where / engine.binaries[0]
    if not (binary.is_file() and os.access(binary, os.X_OK)) or where.with_name(where.name + ".partial").exists():
        return None, None
    if is_ours(binary):
        return None, None
    return Installed(engine.version, {engine.binaries[0]: binary}, str(where)), None


# ------------------------------------------------------------ built from Go


def build(engine: Engine) -> Path:
    """Build ``engine`` into its cache dir unless it is there already; return the dir."""
    out = cache_dir(engine)
    if all((out / b).exists() for b in engine.binaries):
        return out
    if shutil.which("go") is None:
        sys.exit(f"engines: {engine.name} {engine.version} is not installed and Go is not on PATH: install Go "
                 f"(the engines are built from the Go modules in tools/) or {engine.name} {engine.version}")
    partial = out.with_name(out.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    env = {**go_env(), **engine.env}
    started = time.monotonic()
    say(f"building {engine.name} {engine.version} from tools/{engine.name} (first time only; cached in {out})")
    # 2 cores here, shared with everything else: two compile jobs at a time.
    argv = ["go", "build", "-p", os.environ.get("ROCM_BAKE_GO_JOBS", "2"), "-o", str(partial) + "/"]
    if engine.ldflags:
        argv += ["-ldflags", engine.ldflags]
    result = subprocess.run([*argv, *engine.packages], cwd=TOOLS / engine.name, env=env)
    if result.returncode != 0:
        sys.exit(f"engines: building {engine.name} failed (go build exited {result.returncode}); see above")
    if engine.packages == (".",):  # a main package in the module itself: name the binary
        built = partial / Path(engine.packages[0]).resolve().name
        if not built.exists():
            candidates = [p for p in partial.iterdir() if p.is_file()]
            built = candidates[0]
        built.rename(partial / engine.binaries[0])
    for module, rel, name in engine.extras:
        src = (TOOLS / engine.name if module == "." else module_dir(module, env)) / rel
        shutil.copy(src, partial / name)
        (partial / name).chmod(0o755)
    for name in engine.watched:
        (partial / name).rename(partial / f"{name}.watched")
        shutil.copy(WATCHDOG, partial / name)
        (partial / name).chmod(0o755)
    shutil.rmtree(out, ignore_errors=True)
    partial.rename(out)
    say(f"built {engine.name} in {time.monotonic() - started:.0f} s")
    return out


def go_test(name: str) -> int:
    """``go test`` of tools/<name> (our own Go code), sharing the engines' module and build caches."""
    argv = ["go", "test", "-p", os.environ.get("ROCM_BAKE_GO_JOBS", "2"), "-count=1", "./..."]
    say(f"$ (cd tools/{name} && {' '.join(argv)})")
    return subprocess.run(argv, cwd=TOOLS / name, env=go_env()).returncode


def module_dir(module: str, env: dict[str, str]) -> Path:
    result = subprocess.run(["go", "mod", "download", "-json", module], cwd=TOOLS / "pulumi", env=env,
                            capture_output=True, text=True, check=True)
    return Path(json.loads(result.stdout)["Dir"])


def link(target: Path, name: str, into: Path = BIN) -> None:
    dest = into / name
    if dest.is_symlink() and dest.resolve() == target.resolve():
        return
    dest.unlink(missing_ok=True)
    dest.symlink_to(target)


def registered_plugins(pulumi: Path) -> set[tuple[str, str]]:
    result = subprocess.run([str(pulumi), "plugin", "ls", "--json"], capture_output=True, text=True,
                            env={**os.environ, "PULUMI_SKIP_UPDATE_CHECK": "true"})
    if result.returncode != 0:
        return set()
    return {(p["name"], p["version"]) for p in json.loads(result.stdout or "[]") if p.get("kind") == "resource"}


def installed_files(engine: Engine) -> tuple[str, ...]:
    """The files of ``engine`` that setup places: its binaries and extras, and what each watchdog runs."""
    return (*engine.binaries, *(extra[2] for extra in engine.extras), *(f"{name}.watched" for name in engine.watched))


def plugin_dir(engine: Engine) -> Path:
    """Where the engine finds the plugin ``engine`` provides (the plugin cache under ``PULUMI_HOME``)."""
    assert engine.plugin is not None
    home = Path(os.environ.get("PULUMI_HOME") or Path.home() / ".pulumi")
    return home / "plugins" / f"resource-{engine.plugin}-v{engine.version}"


def register(pulumi: Path, engine: Engine, built: Path) -> None:
    """Install the plugin's folder from our build unless those very files are installed (a rebuild replaces them).

    The folder, not the binary: a watched plugin is two files, the watchdog
    under the plugin's name and the binary it runs beside it.
    """
    assert engine.plugin is not None
    name = engine.plugin
    installed = plugin_dir(engine)
    if all((installed / file).is_file() and filecmp.cmp(installed / file, built / file, shallow=False)
           for file in installed_files(engine)):
        return
    argv = [str(pulumi), "plugin", "install", "resource", name, engine.version, "--file", str(built)]
    if (name, engine.version) in registered_plugins(pulumi):
        argv.append("--reinstall")
    subprocess.run(argv, check=True, env={**os.environ, "PULUMI_SKIP_UPDATE_CHECK": "true"})
    say(f"registered plugin {name} {engine.version}")


WRAPPER = """#!/bin/sh
# rocm-bake's pulumi (written by tools/engines.py): this checkout's CLI at {cli}
# (a link to, or copy of, {real}, with this checkout's language host beside it),
# run against this project's file backend and passphrase unless you set your
# own, never acquiring a plugin from the network, with the engines and the
# program's venv on PATH and this checkout's buildx config (where `make
# builder` registered this checkout's builder, so the docker-build plugin
# finds it). It does not touch your global `pulumi login` or ~/.docker/buildx.
# The stacks' secrets provider comes from the state, not from a salt in the
# tracked stack files, which stay as committed; `stack rm` keeps them.
# `plugin rm` says first that the plugin cache is every checkout's.
# The local registry serves TLS from this checkout's CA (make registry), so
# SSL_CERT_FILE names a bundle in .rocm-bake/tls: the roots your own
# SSL_CERT_FILE (or the system) names, plus that CA. The docker-build plugin's
# refresh (https only) and the wheel fetch then read the registry.
root='{root}'
tls="$root/.rocm-bake/tls"
if [ -f "$tls/ca.pem" ] && bundle=$("$root/.venv/bin/python" -m rocm_bake.registry.tls --trust "$tls"); then
  SSL_CERT_FILE="$bundle"; export SSL_CERT_FILE
fi
if [ -z "${{PULUMI_BACKEND_URL:-}}" ]; then
  PULUMI_BACKEND_URL="file://$root/.rocm-bake/state"; mkdir -p "$root/.rocm-bake/state"
fi
if [ -z "${{PULUMI_CONFIG_PASSPHRASE+x}}${{PULUMI_CONFIG_PASSPHRASE_FILE+x}}" ] && [ -f "$root/.rocm-bake/passphrase" ]; then
  PULUMI_CONFIG_PASSPHRASE_FILE="$root/.rocm-bake/passphrase"; export PULUMI_CONFIG_PASSPHRASE_FILE
fi
: "${{PULUMI_SKIP_UPDATE_CHECK:=true}}"
: "${{PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION:=true}}"
: "${{PULUMI_FALLBACK_TO_STATE_SECRETS_MANAGER:=true}}"
: "${{BUILDX_CONFIG:=$root/.rocm-bake/buildx}}"
export PULUMI_BACKEND_URL PULUMI_SKIP_UPDATE_CHECK PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION
export PULUMI_FALLBACK_TO_STATE_SECRETS_MANAGER BUILDX_CONFIG
PATH="$root/.tools/bin:$root/.venv/bin:$PATH"; export PATH
prev=
for arg in "$@"; do
  case "$prev $arg" in
    "stack rm"|"stack remove"|"stack delete") set -- "$@" --preserve-config; break ;;
    "plugin rm"|"plugin remove")
      echo "pulumi plugin rm: ${{PULUMI_HOME:-$HOME/.pulumi}}/plugins is shared: every checkout on this host (and your other Pulumi projects) uses what you remove there, and fails without it until its make setup registers it again" >&2 ;;
  esac
  prev=$arg
done
# The salt the CLI writes into a tracked stack file is the program's to take
# out (rocm_bake/run_env.py), as for a plain `pulumi` run. The CLI keeps this
# process's pid (exec).
exec '{cli}' "$@"
"""

def place_cli(real: Path) -> Path:
    """``.tools/cli/pulumi``: a hard link to (else a copy of) the real CLI, private to this checkout.

    The CLI takes the language host beside its own binary (found anywhere else
    on PATH it warns on every run). Beside the shared cached binary, the last
    checkout to run setup would choose the host for every checkout on the
    machine; beside a link of our own, each checkout runs its own host.
    """
    CLI.mkdir(parents=True, exist_ok=True)
    dest = CLI / "pulumi"
    if dest.is_file() and not dest.is_symlink() and (os.path.samefile(dest, real) or
                                                     filecmp.cmp(dest, real, shallow=True)):
        return dest
    partial = CLI / ".pulumi.partial"
    partial.unlink(missing_ok=True)
    try:
        os.link(real, partial)
    except OSError:  # another filesystem, or links not allowed: a copy (mtime kept, so the next check is cheap)
        shutil.copy2(real, partial)
    partial.replace(dest)
    return dest


def write_wrapper(real: Path) -> None:
    """``.tools/bin/pulumi``: this checkout's CLI (a link of ours or of the system's) with the project's defaults."""
    dest = BIN / "pulumi"
    text = WRAPPER.format(cli=place_cli(real), real=real, root=ROOT)
    if dest.is_symlink() or not dest.exists() or dest.read_text() != text:
        dest.unlink(missing_ok=True)
        dest.write_text(text)
        dest.chmod(0o755)


def place_host(files: dict[str, Path]) -> None:
    """Link the host and its scripts into ``.tools/cli``, beside this checkout's CLI; drop any old PATH copy and
    any file of another layout (a watched plugin's ``.watched`` when the host is now an installed one)."""
    CLI.mkdir(parents=True, exist_ok=True)
    for name, target in files.items():
        link(target, name, into=CLI)
        old = BIN / name  # the layout before .tools/cli: the host on PATH
        if old.is_symlink() or old.exists():
            old.unlink()
    for stale in CLI.iterdir():
        if stale.name != "pulumi" and stale.name not in files and stale.is_symlink():
            stale.unlink()


#: How often a wait on another setup's lock prints a line when stderr is not a terminal (CI logs).
LOCK_REPORT_SECONDS = float(os.environ.get("ROCM_BAKE_LOCK_REPORT_SECONDS", "30"))


def holder_text() -> str:
    """Who we are, written into the lock file for a setup that has to wait: pid, checkout, command, since when."""
    try:
        parent = Path(f"/proc/{os.getppid()}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        parent = ""
    command = " ".join(sys.argv) + (f" (under {parent.strip()})" if parent.strip() else "")
    # `make test GITHUB_TOKEN=…` puts a secret on a command line: no NAME=value or --opt=value reaches another's log
    command = " ".join(word.split("=", 1)[0] + "=…" if "=" in word else word for word in command.split())
    return json.dumps({"pid": os.getpid(), "checkout": str(ROOT), "command": command, "since": time.time()})


def describe_holder(text: str) -> str:
    """The lock file's holder as one phrase (it may be empty or half-written: the holder writes after locking)."""
    try:
        holder = json.loads(text)
        held = time.time() - float(holder["since"])
        return (f"held by pid {holder['pid']} in {holder['checkout']} ({holder['command']}) "
                f"for {minutes(held)}")
    except (ValueError, KeyError, TypeError):
        return "held by another setup"


def minutes(seconds: float) -> str:
    seconds = max(0, int(seconds))
    return f"{seconds // 60} min {seconds % 60:02d} s" if seconds >= 60 else f"{seconds} s"


def hold_lock() -> None:
    """One setup at a time per cache (two clones' `make setup` would build into the same dirs); held until exit.

    A setup that has to wait says who holds the lock (pid, checkout, command)
    and for how long, refreshed while it waits: in place on a terminal, a line
    every LOCK_REPORT_SECONDS otherwise.
    """
    path = cache_root() / "engines.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    handle = path.open("a+")
    started = time.monotonic()
    last = -LOCK_REPORT_SECONDS
    tty = sys.stderr.isatty()
    while True:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except BlockingIOError:
            waited = time.monotonic() - started
            if tty or waited - last >= LOCK_REPORT_SECONDS:
                last = waited
                line = (f"engines: waiting for the engine cache lock {path}, "
                        f"{describe_holder(path.read_text())}; waited {minutes(waited)}")
                print(f"\r\033[K{line}" if tty else line, end="" if tty else "\n", file=sys.stderr, flush=True)
            time.sleep(1)
    if tty and time.monotonic() - started >= 1:
        print(file=sys.stderr)
    handle.seek(0)
    handle.truncate()
    handle.write(holder_text())
    handle.flush()
    globals()["_LOCK"] = handle


def place(engine: Engine, files: dict[str, Path]) -> None:
    """Put ``engine``'s files where the wrapper and the make targets take them, whichever way they came."""
    if engine.name == "pulumi":
        write_wrapper(files["pulumi"])
    elif engine.name == "pulumi-language-python":
        place_host(files)
    elif engine.plugin is None:  # plugins are found in the plugin cache, not on PATH
        for name, target in files.items():
            link(target, name)


def setup_engine(engine: Engine, build_all: bool, cli: Installed | None) -> Installed | None:
    """Take ``engine`` as installed when compatible, else build it (or take our cached build); say which, once."""
    found, unused = (None, None) if build_all else find_installed(engine, cli)
    if found is not None:
        place(engine, found.files)
        say(f"{engine.name} {found.version}: installed, {found.where}")
        record(engine.name, found.version, "installed", found.files)
        return found
    built = build(engine)
    files = {name: built / name for name in installed_files(engine)}
    if engine.plugin is not None:
        register(BIN / "pulumi", engine, built)
    else:
        place(engine, files)
    why = " (ENGINES=build)" if build_all else f" ({unused}; the pin is {engine.version})" if unused else ""
    say(f"{engine.name} {engine.version}: built from tools/{engine.name}, {built}{why}")
    record(engine.name, engine.version, "built", files)
    return None


def record(name: str, version: str, source: str, files: dict[str, Path]) -> None:
    """Note in .tools/engines.json which engine setup took (the tests read it to judge the right files)."""
    try:
        taken = json.loads(RECORD.read_text())
    except (OSError, ValueError):
        taken = {}
    taken[name] = {"version": version, "source": source, "files": {k: str(v) for k, v in files.items()}}
    partial = RECORD.with_name(RECORD.name + ".partial")
    partial.write_text(json.dumps(taken, indent=1, sort_keys=True) + "\n")
    partial.replace(RECORD)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", action="append", help="set up only these engines")
    parser.add_argument("--engines", choices=("installed", "build"), default="installed",
                        help="installed (default): use a compatible installed engine, build the rest; "
                             "build: build every engine from tools/ (make setup ENGINES=build)")
    parser.add_argument("--go-test", metavar="NAME", choices=[e.name for e in ENGINES if e.packages == (".",)],
                        help="run `go test` of our own engine module tools/NAME (with the shared Go caches) and exit")
    args = parser.parse_args()
    if args.go_test:
        if shutil.which("go") is None:
            sys.exit("engines: no Go toolchain on PATH: install Go (the host's tests are Go tests)")
        sys.exit(go_test(args.go_test))
    BIN.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    hold_lock()
    cli = None
    for engine in ENGINES:
        if args.only and engine.name not in args.only:
            continue
        found = setup_engine(engine, args.engines == "build", cli)
        if engine.name == "pulumi":
            cli = found
    say(f"all engines ready in .tools/bin ({time.monotonic() - started:.0f} s)")


if __name__ == "__main__":
    main()
