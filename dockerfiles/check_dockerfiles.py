#!/usr/bin/env python3
"""``buildx build --check`` of every ``dockerfiles/*.Dockerfile`` on a private BuildKit, offline.

Each Dockerfile is checked the way the stack builds it: the target's stage
(``--target``), the target's build args (``rocm_bake.image_plan.build_args``
for a real stack's config), its dependencies as BuildKit named contexts
(``depends_on`` in ``manifests/targets.yml``, as ``components/images.py``
wires them) and the base images as build args (``ROCM_IMAGE``,
``PYTHON_IMAGE``). Here the contexts and bases are stand-ins: empty local
directories given as named contexts, so BuildKit resolves nothing anywhere.

Offline is enforced, not assumed: the private buildkitd runs with its HTTP(S)
proxy pointed at a loopback port this process holds bound and never listens
on, so a Dockerfile that reaches for any image not supplied (a ``# syntax=``
frontend, a base not given as a build arg, a ``COPY --from`` of an undefined
stage, which BuildKit reads as a Docker Hub image) fails with BuildKit's own
complaint instead of quietly pulling it on a machine that could.

Usage: ``python dockerfiles/check_dockerfiles.py [--stack gfx950] [--builder NAME] [FILE ...]``
(``make check-dockerfiles``). Exit 0 when every file passes, 1 otherwise.
"""

from __future__ import annotations

import argparse
import os
import re
import secrets
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from rocm_bake.local import builder as builder_tool  # noqa: E402  (make builder's own code)
from rocm_bake.errors import RocmBakeError  # noqa: E402

if TYPE_CHECKING:
    from rocm_bake.config import StackConfig

DOCKERFILE_DIR = ROOT / "dockerfiles"
#: The base-image build args the Dockerfiles take (docs/configuration.md: rocm-bake:buildArgs), each given a stand-in.
BASE_ARGS = ("ROCM_IMAGE", "PYTHON_IMAGE")
#: BuildKit's lines worth repeating: its errors, its lint warnings and the rule text under them.
_COMPLAINT = re.compile(r"^(ERROR|WARNING|[A-Za-z]+ argument|.*\.Dockerfile:\d+$)|Check complete")
_UNRESOLVED = re.compile(r"failed to resolve source metadata for (\S+?):")


@dataclass(frozen=True)
class CheckResult:
    """One Dockerfile's verdict and BuildKit's own words for it."""

    dockerfile: Path
    ok: bool
    complaint: str
    output: str

    def line(self) -> str:
        if self.ok:
            return f"ok: {self.dockerfile.name}"
        return f"FAILED: {self.dockerfile.name}: {self.complaint}"


@dataclass
class OfflineBuilder:
    """A private buildkitd that can reach no registry, registered in a private BUILDX_CONFIG."""

    name: str
    state: Path
    env: dict[str, str]
    held: socket.socket

    def stop(self) -> None:
        builder_tool.stop(self.name, self.state, env=self.env)
        self.held.close()


def start_offline_builder(work: Path) -> OfflineBuilder:
    """Start buildkitd under ``work`` with every registry request sent to a dead loopback proxy.

    The port is bound by this process and never listened on, so nothing else
    can take it and every connection to it is refused at once.
    """
    held = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    held.bind(("127.0.0.1", 0))
    proxy = f"http://127.0.0.1:{held.getsockname()[1]}"
    env = {"BUILDX_CONFIG": str(work / "buildx")}
    dead_proxy = {key: proxy for key in ("HTTPS_PROXY", "HTTP_PROXY", "https_proxy", "http_proxy")}
    dead_proxy.update({"NO_PROXY": "", "no_proxy": ""})
    saved = {key: os.environ.get(key) for key in dead_proxy}
    os.environ.update(dead_proxy)  # buildkitd inherits this process's environment
    try:
        name = f"rocm-bake-check-{secrets.token_hex(3)}"
        builder_tool.start(name, work / "buildkit", [], env=env)
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    return OfflineBuilder(name, work / "buildkit", env, held)


@contextmanager
def offline_builder() -> Iterator[OfflineBuilder]:
    with tempfile.TemporaryDirectory(prefix="rocm-bake-check-") as work:
        kit = start_offline_builder(Path(work))
        try:
            yield kit
        finally:
            kit.stop()


def complaint_of(output: str) -> str:
    """BuildKit's complaint, one line: what it refused and where, plus what an unresolved name means here."""
    lines = [line.strip() for line in output.splitlines()]
    picked = [line for line in lines if line and _COMPLAINT.search(line) and not line.startswith("#")]
    text = "; ".join(dict.fromkeys(picked)) or (lines[-1] if lines else "buildx gave no output")
    unresolved = _UNRESOLVED.search(output)
    if unresolved and unresolved.group(1).startswith("docker.io/docker/dockerfile"):
        text += " (a `# syntax=` line: the frontend image needs Docker Hub; drop it; a farm that reaches Docker Hub may pass BUILDKIT_SYNTAX as a build arg)"
    elif unresolved:
        text += (f" ({unresolved.group(1)} is neither a stage of this Dockerfile, a named context its target's "
                 "depends_on supplies, nor a base given as a build arg: offline it cannot be pulled)")
    return text


def check_args(dockerfile: Path, config: "StackConfig", stand_in: Path) -> list[str]:
    """``buildx build --check`` arguments for one Dockerfile, as the stack would build it."""
    from rocm_bake.image_plan import build_args, context_dir
    from rocm_bake.manifests import load_targets

    targets = {Path(t.dockerfile).name: t for t in load_targets().targets}
    target = targets.get(dockerfile.name)
    args = ["--file", str(dockerfile)]
    stand_ins = {arg: f"stand-in-{arg.lower().replace('_', '-')}" for arg in BASE_ARGS}
    contexts = {name: stand_in for name in stand_ins.values()}
    values = dict(stand_ins)
    if target is not None:
        values = {**build_args(config, config.policy(), target), **stand_ins}
        contexts.update({dep: stand_in for dep in target.depends_on})
        args += ["--target", target.stage]
    for key, value in values.items():
        args += ["--build-arg", f"{key}={value}"]
    for name, location in contexts.items():
        args += ["--build-context", f"{name}={location}"]
    return [*args, str(ROOT / context_dir(config))]


def check(dockerfile: Path, kit_name: str, env: dict[str, str], config: "StackConfig") -> CheckResult:
    """Check one Dockerfile on builder ``kit_name``; BuildKit's own complaint when it fails."""
    with tempfile.TemporaryDirectory(prefix="rocm-bake-stand-in-") as stand_in:
        argv = [builder_tool.binary("buildx"), "build", "--builder", kit_name, "--check", "--progress", "plain",
                *check_args(dockerfile, config, Path(stand_in))]
        result = subprocess.run(argv, env={**os.environ, **env}, capture_output=True, text=True, timeout=300)
    output = result.stdout + result.stderr
    ok = result.returncode == 0 and "Check complete, no warnings found" in output
    return CheckResult(dockerfile, ok, "" if ok else complaint_of(output), output)


def dockerfiles(directory: Path = DOCKERFILE_DIR) -> list[Path]:
    return sorted(directory.glob("*.Dockerfile"))


def check_all(files: list[Path], kit_name: str, env: dict[str, str], config: "StackConfig",
              report: bool = False) -> list[CheckResult]:
    results = []
    for path in files:
        results.append(check(path, kit_name, env, config))
        if report:
            print(results[-1].line(), flush=True)
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="*", type=Path, help="Dockerfiles (default: dockerfiles/*.Dockerfile)")
    parser.add_argument("--stack", default="gfx950", help="whose config gives the build args (default gfx950)")
    parser.add_argument("--builder", help="an existing buildx builder (default: a private offline buildkitd)")
    args = parser.parse_args(argv)
    files = args.files or dockerfiles()
    missing = [str(f) for f in files if not f.is_file()]
    if missing:
        print(f"check-dockerfiles: no such file: {', '.join(missing)}", file=sys.stderr)
        return 2
    from rocm_bake.config import load_stack_config

    try:
        config = load_stack_config(args.stack)
    except RocmBakeError as exc:
        print(f"check-dockerfiles: {exc}", file=sys.stderr)
        return 2
    if args.builder:
        results = check_all(files, args.builder, {}, config, report=True)
    else:
        with offline_builder() as kit:
            results = check_all(files, kit.name, kit.env, config, report=True)
    failed = [r for r in results if not r.ok]
    print(f"check-dockerfiles: {len(results) - len(failed)} of {len(results)} passed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
