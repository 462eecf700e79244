#!/usr/bin/env python3
"""Benchmark ``rocm-bake index build`` against real baselines, side by side in one run.

Rows (recorded through ``bench/results.py``; every time is the best of a few
alternating runs, page cache warm for every contender):

* **cold build vs the same work, direct** — ``build_index`` with no hash
  cache and no index (sha256, every member against RECORD, METADATA
  validation, code-object scan, a copy of each wheel into the tree, pages), in
  process, against the work it cannot skip written the most direct way on the
  same number of threads: hashlib sha256 of each wheel, each member against
  RECORD through zipfile, ``shutil.copyfile``. Goal ≥ 0.9× its throughput.
  Every contender starts after an untimed ``sync``, so none pays, through the
  kernel's dirty-page throttling, for the writes of the one before.
* **cold build vs openssl (+ cp)** — shown, no goal: ``xargs -P <cores>
  openssl dgst -sha256`` alone, and with ``cp`` into a fresh dir. Plain tools
  make one hash pass; the RECORD check is a second over every member. The same
  build through the CLI is shown too (it adds start-up and imports).
* **cold build vs simple503** — shown, no goal: ``rocm-bake index build``
  (CLI) against ``simple503 -e`` from PyPI, which also hashes and extracts PEP
  658 metadata but neither checks RECORD nor copies, over the same wheels
  (hard-linked, since simple503 moves its input).
* **warm rebuild** — ``rocm-bake index build`` again with nothing changed,
  through the CLI as a subprocess, against the cold CLI build. Goal ≤ 5%.
* **files written for one changed wheel** — 500 small wheels, one gets a new
  version; the CLI build's ``files_written`` against the files in the tree.
  Goal: only that wheel, its ``.metadata`` and page, the metapackage, its
  ``.metadata`` and page (6).
* **resolve-only bytes** — ``uv pip install --dry-run`` and ``pip install
  --dry-run`` of ``rocm-torch[device-<arch>]`` against the index served with
  PEP 658 ``.metadata`` files, and against the same index without them (pages
  stripped of ``data-core-metadata``, ``.metadata`` files removed), both
  served by ``http.server`` (the serving line of docs/wheel-pipeline.md, which has no Range
  support, so without PEP 658 the resolvers download whole wheels). Goal ≤ 1%.

Usage: ``python bench/index_build.py [--count 40] [--size-mb 50] [--small-count 500]``.
The default run takes about two minutes on two cores.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))

from results import record, reset  # noqa: E402

from rocm_bake import progress  # noqa: E402
from rocm_bake.archset import ArchSet  # noqa: E402
from rocm_bake.index.build import build_index  # noqa: E402
from rocm_bake.index.check import clean_env, serve, uv_binary  # noqa: E402
from rocm_bake.index.hashcache import hash_workers  # noqa: E402
from tests.index_fixtures import NATIVE_TAG, amdgpu_code_object, make_wheel  # noqa: E402

BENCH = "index_build"
#: The arches ``--arch`` offers: each has an EF_AMDGPU_MACH in the product's table.
ARCHES = ("gfx1151", "gfx1201", "gfx1250", "gfx942", "gfx950")
PEP658_ATTRS = re.compile(r' data-(?:dist-info|core)-metadata="[^"]*"')


def make_bench_wheel(out: Path, index: int, arch: str, size: int, version: str = "1.0.0+rocm10.1.0") -> Path:
    """A native wheel: an AMDGPU code object for ``arch`` plus ``size`` incompressible bytes, stored."""
    name = f"benchpkg{index:03d}"
    members = {f"{name}/kernels/k.co": amdgpu_code_object(arch, body_size=0),
               f"{name}/lib/payload.bin": os.urandom(size)}
    return make_wheel(out, name, version, extra_files=members, tag=NATIVE_TAG, requires_python=">=3.10",
                      compression=zipfile.ZIP_STORED)


def warm_page_cache(paths: list[Path]) -> None:
    for p in paths:
        with open(p, "rb", buffering=0) as f:
            while f.read(8 << 20):
                pass


def cli() -> list[str]:
    script = Path(sys.executable).parent / "rocm-bake"
    return [str(script)] if script.exists() else [sys.executable, "-m", "rocm_bake"]


def best(runs: int, prepare: Callable[[], None], fn: Callable[[], object]) -> float:
    """The fastest of ``runs`` timed calls of ``fn``, each after an untimed ``prepare``."""
    times = []
    for _ in range(runs):
        prepare()
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def settled() -> None:
    """Untimed, before every contender: flush dirty pages, so none pays for the writes of the one before
    (the generated wheels, a baseline's copies) through the kernel's dirty-page throttling."""
    os.sync()


def fresh(dist: Path) -> Callable[[], None]:
    def prepare() -> None:
        shutil.rmtree(dist / "index", ignore_errors=True)
        shutil.rmtree(dist / ".cache", ignore_errors=True)
        settled()

    return prepare


def run(cmd: list[str], **kw: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, check=True, capture_output=True, text=True, **kw)  # type: ignore[call-overload]


def nothing() -> None:
    return None


# ---------------------------------------------------------------- rows


def hashing_rows(paths: list[Path], wheels: Path, dist: Path, arch: ArchSet, runs: int) -> tuple[float, float]:
    """Cold build vs openssl (same parallelism) and vs simple503; returns (cold CLI s, MiB)."""
    workers = hash_workers()
    per_proc = max(1, -(-len(paths) // workers))
    listing = "\0".join(map(str, paths)).encode()
    mib = sum(p.stat().st_size for p in paths) / (1 << 20)

    def openssl() -> None:
        subprocess.run(["xargs", "-0", "-P", str(workers), "-n", str(per_proc), "openssl", "dgst", "-sha256"],
                       input=listing, check=True, stdout=subprocess.DEVNULL)

    copies = dist.parent / "copies"

    def fresh_copies() -> None:
        shutil.rmtree(copies, ignore_errors=True)
        copies.mkdir()
        settled()

    def openssl_and_cp() -> None:
        """The same necessary work, done by the fastest plain tools: hash each wheel and copy it into a tree
        (an index must hold copies, never links, so the bytes it serves cannot change after hashing)."""
        subprocess.run(["xargs", "-0", "-P", str(workers), "-n", str(per_proc), "sh", "-c",
                        'openssl dgst -sha256 "$@" && cp -- "$@" "$0"', str(copies)],
                       input=listing, check=True, stdout=subprocess.DEVNULL)

    direct_out = dist.parent / "direct"

    def fresh_direct() -> None:
        shutil.rmtree(direct_out, ignore_errors=True)
        direct_out.mkdir()
        settled()

    def direct_one(path: Path) -> str:
        """The work a cold build cannot skip, written the most direct way: the file's sha256, every member
        against RECORD (zipfile, as pip reads it), a copy. No pages, cache, metadata or device-code check."""
        digest = hashlib.sha256()
        with open(path, "rb", buffering=0) as handle:
            while chunk := handle.read(4 << 20):
                digest.update(chunk)
        with zipfile.ZipFile(path) as zf:
            record = next(n for n in zf.namelist() if n.endswith(".dist-info/RECORD"))
            rows = {r.split(",")[0]: r.split(",")[1] for r in zf.read(record).decode().splitlines() if r}
            for info in zf.infolist():
                if info.filename == record:
                    continue
                member = hashlib.sha256()
                with zf.open(info) as data:
                    while chunk := data.read(1 << 20):
                        member.update(chunk)
                want = rows[info.filename].partition("=")[2]
                if base64.urlsafe_b64encode(member.digest()).rstrip(b"=").decode() != want:
                    raise SystemExit(f"direct baseline: {path.name}: {info.filename} does not match RECORD")
        shutil.copyfile(path, direct_out / path.name)
        return digest.hexdigest()

    def direct() -> None:
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(max_workers=workers) as pool:
            list(pool.map(direct_one, paths))

    def library() -> None:
        build_index(arch, wheels, dist)

    build_cmd = [*cli(), "index", "build", "--arch", arch, "--wheels", str(wheels), "--out", str(dist), "--quiet"]
    t_ssl = t_lib = t_cli = t_cp = t_direct = float("inf")
    for _ in range(runs):  # alternate, so a noisy neighbour hits every contender alike
        warm_page_cache(paths)
        t_ssl = min(t_ssl, best(1, settled, openssl))
        t_cp = min(t_cp, best(1, fresh_copies, openssl_and_cp))
        t_direct = min(t_direct, best(1, fresh_direct, direct))
        t_lib = min(t_lib, best(1, fresh(dist), library))
        t_cli = min(t_cli, best(1, fresh(dist), lambda: run(build_cmd)))
    shutil.rmtree(copies, ignore_errors=True)
    shutil.rmtree(direct_out, ignore_errors=True)
    print(f"openssl x{workers}: {t_ssl:6.3f} s {mib / t_ssl:7.0f} MiB/s | openssl + cp x{workers}: {t_cp:6.3f} s "
          f"{mib / t_cp:7.0f} MiB/s | direct x{workers}: {t_direct:6.3f} s {mib / t_direct:7.0f} MiB/s | "
          f"cold library build {t_lib:6.3f} s {mib / t_lib:7.0f} MiB/s | cold CLI build {t_cli:6.3f} s")
    subject = (f"build_index cold, in process: sha256 + RECORD check + METADATA + code-object scan + copy into "
               f"the tree + pages, {workers} threads")
    ratio = t_direct / t_lib
    record(BENCH, "cold build vs the same work, direct",
           subject=subject,
           baseline=f"{workers} threads of hashlib sha256 + every member against RECORD through zipfile + "
                    f"shutil.copyfile, same {len(paths)} wheels ({mib:.0f} MiB): the work a cold build cannot skip",
           ratio=round(ratio, 3), goal=">= 0.90x throughput", met=ratio >= 0.9,
           note=f"{mib / t_lib:.0f} vs {mib / t_direct:.0f} MiB/s; every contender starts after an untimed sync")
    record(BENCH, "cold build vs openssl dgst -sha256 + cp",
           subject=subject,
           baseline=f"xargs -P{workers} -n{per_proc} sh -c 'openssl dgst -sha256 && cp' into a fresh dir: one "
                    "hash pass and the copy, no RECORD check",
           ratio=round(t_cp / t_lib, 3), goal="(shown, no goal)", met=None,
           note=f"{mib / t_lib:.0f} vs {mib / t_cp:.0f} MiB/s; the RECORD check is a second sha256 pass over "
                "every member (a stored wheel: its whole size again), which plain tools do not make")
    record(BENCH, "cold build vs openssl dgst -sha256",
           subject=subject,
           baseline=f"xargs -P{workers} -n{per_proc} openssl dgst -sha256 alone: one hash pass, no copy",
           ratio=round(t_ssl / t_lib, 3), goal="(shown, no goal)", met=None,
           note=f"{mib / t_lib:.0f} vs {mib / t_ssl:.0f} MiB/s: the floor of hashing alone")
    record(BENCH, "cold CLI build vs openssl dgst -sha256",
           subject="rocm-bake index build cold, as a subprocess (adds interpreter start-up and imports)",
           baseline=f"xargs -P{workers} -n{per_proc} openssl dgst -sha256, same wheels",
           ratio=round(t_ssl / t_cli, 3), goal="(shown, no goal)", met=None,
           note=f"{t_cli:.3f} s vs {t_ssl:.3f} s")

    def simple503() -> None:
        run([str(Path(sys.executable).parent / "simple503"), "-e", str(origin), str(target)])

    origin, target = dist.parent / "s503-origin", dist.parent / "s503-target"

    def prepare_503() -> None:
        shutil.rmtree(origin, ignore_errors=True)
        shutil.rmtree(target, ignore_errors=True)
        origin.mkdir()
        for p in paths:
            os.link(p, origin / p.name)  # simple503 moves its input: give it links

    t_503 = best(runs, lambda: (prepare_503(), settled()), simple503)
    shutil.rmtree(origin, ignore_errors=True)
    shutil.rmtree(target, ignore_errors=True)
    print(f"simple503 -e: {t_503:6.3f} s   cold CLI build: {t_cli:6.3f} s")
    record(BENCH, "cold build vs simple503",
           subject="rocm-bake index build cold (CLI): sha256 + validated METADATA + device-code check + PEP 658",
           baseline="simple503 0.4 -e (PyPI; hashes and extracts PEP 658 metadata), same wheels, as a subprocess",
           ratio=round(t_503 / t_cli, 3), goal="(shown, no goal)", met=None,
           note=f"{t_cli:.3f} s vs {t_503:.3f} s; simple503 neither checks RECORD nor copies (it serves the files "
                "it is given), so the goal is on the same-work row")
    return t_cli, mib


WARM_SPLIT = """
import contextlib, io, json, sys, time
start = time.perf_counter()
from rocm_bake import cli
args = cli.build_parser().parse_args(sys.argv[1:])
parsed = time.perf_counter()
with contextlib.redirect_stdout(io.StringIO()):
    args.func(args)
done = time.perf_counter()
print(json.dumps({"startup": parsed - start, "command": done - parsed}))
"""


def warm_row(wheels: Path, dist: Path, arch: str, t_cold_cli: float, runs: int) -> None:
    cmd = [*cli(), "index", "build", "--arch", arch, "--wheels", str(wheels), "--out", str(dist), "--json"]
    fresh(dist)()
    run(cmd)
    t_warm = best(runs, nothing, lambda: run(cmd))
    out = json.loads(run(cmd).stdout)
    assert out["unchanged"] and out["hashed_bytes"] == 0, out
    t_start = best(runs, nothing, lambda: run([sys.executable, "-c", "pass"]))
    # Where the warm time goes: CLI start-up (importing every command module) vs this command's own work.
    split = json.loads(run([sys.executable, "-c", WARM_SPLIT, *cmd[len(cli()):]], cwd=ROOT).stdout)
    ratio = t_warm / t_cold_cli
    print(f"warm CLI build: {t_warm:6.3f} s = {100 * ratio:.1f}% of cold ({t_cold_cli:.3f} s); "
          f"python -c pass {t_start:.3f} s; CLI import + parser {split['startup'] * 1000:.0f} ms, "
          f"the command itself {split['command'] * 1000:.1f} ms")
    record(BENCH, "warm rebuild through the CLI",
           subject="rocm-bake index build, nothing changed (subprocess)",
           baseline=f"the cold CLI build over the same {len(list(wheels.glob('*.whl')))} wheels",
           ratio=round(ratio, 4), goal="<= 0.05", met=ratio <= 0.05,
           note=f"{t_warm * 1000:.0f} ms vs {t_cold_cli:.2f} s: python start-up {t_start * 1000:.0f} ms, "
                f"CLI import + parser {split['startup'] * 1000:.0f} ms, index build itself "
                f"{split['command'] * 1000:.1f} ms")


def incremental_row(work: Path, arch: str, count: int) -> None:
    wheels = work / "small" / "wheels"
    dist = work / "small" / "dist"
    wheels.mkdir(parents=True)
    paths = [make_bench_wheel(wheels, i, arch, 2048) for i in range(count)]
    cmd = [*cli(), "index", "build", "--arch", arch, "--wheels", str(wheels), "--out", str(dist), "--json"]
    cold = json.loads(run(cmd).stdout)
    changed = paths[count // 2]
    changed.unlink()
    make_bench_wheel(wheels, count // 2, arch, 2048, version="1.0.1+rocm10.1.0")
    after = json.loads(run(cmd).stdout)
    total = after["files_written"] + after["files_kept"]
    print(f"one changed wheel among {count}: {after['files_written']} of {total} files written "
          f"(cold build wrote {cold['files_written']})")
    record(BENCH, f"files written, one changed wheel among {count}",
           subject="rocm-bake index build after one wheel got a new version (CLI --json files_written)",
           baseline=f"the {total} files of the index tree (a full rewrite)",
           ratio=round(after["files_written"] / total, 4), goal="8 files: wheel, .metadata, page, metapackage x3, requirements.txt, pylock.toml",
           met=after["files_written"] == 8, note=f"{after['files_written']} of {total}")


def strip_pep658(dist: Path, arch: str, out: Path) -> None:
    """The same index without PEP 658: no ``.metadata`` files, no metadata attributes in the pages."""
    src = (dist / "index" / arch).resolve()
    dest = out / "index" / arch
    for dirpath, _dirs, names in os.walk(src):
        rel = Path(dirpath).relative_to(src)
        (dest / rel).mkdir(parents=True, exist_ok=True)
        for name in names:
            if name.endswith(".metadata"):
                continue
            if name == "index.html":
                page = (Path(dirpath) / name).read_text()
                (dest / rel / name).write_text(PEP658_ATTRS.sub("", page))
            else:
                os.link(Path(dirpath) / name, dest / rel / name)


def resolve_bytes(dist: Path, arch: str, work: Path) -> dict[str, int]:
    venv = work / "venv"
    if not venv.exists():
        run([sys.executable, "-m", "venv", "--without-pip", str(venv)])
    python = str(venv / "bin" / "python")
    req = f"rocm-torch[device-{arch}]"
    out: dict[str, int] = {}
    with serve(dist) as served:
        url = f"{served.url}/index/{arch}/"
        run([uv_binary(), "pip", "install", "--dry-run", "--no-config", "--no-cache", "--python", python,
             "--default-index", url, req], env=clean_env(), cwd=work)
        out["uv"] = sum(r.bytes for r in served.requests())
        served.reset()
        run([sys.executable, "-m", "pip", "--python", python, "install", "--isolated", "--dry-run",
             "--no-cache-dir", "--index-url", url, req], env=clean_env(), cwd=work)
        out["pip"] = sum(r.bytes for r in served.requests())
    return out


def resolve_rows(dist: Path, arch: str, work: Path) -> None:
    without = work / "no658"
    strip_pep658(dist, arch, without)
    with_658 = resolve_bytes(dist, arch, work)
    plain = resolve_bytes(without, arch, work)
    for tool in ("uv", "pip"):
        ratio = with_658[tool] / plain[tool]
        print(f"resolve-only {tool}: {with_658[tool]:,} bytes with PEP 658, {plain[tool]:,} without ({100 * ratio:.3f}%)")
        record(BENCH, f"resolve-only bytes, {tool} --dry-run",
               subject=f"{tool} resolving rocm-torch[device-{arch}] from the index with PEP 658 .metadata",
               baseline="the same index without .metadata files or attributes (http.server: no Range, whole wheels)",
               ratio=round(ratio, 6), goal="<= 0.01", met=ratio <= 0.01,
               note=f"{with_658[tool]:,} vs {plain[tool]:,} bytes")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=40)
    parser.add_argument("--size-mb", type=float, default=50)
    parser.add_argument("--small-count", type=int, default=500)
    parser.add_argument("--runs", type=int, default=3, help="timed runs per contender (best is kept)")
    parser.add_argument("--arch", type=ArchSet, default=ArchSet("gfx950"), choices=[ArchSet(a) for a in ARCHES])
    parser.add_argument("--workdir", type=Path, default=None, help="default: a temp dir, removed afterwards")
    args = parser.parse_args()
    for tool in ("openssl", "xargs"):
        if shutil.which(tool) is None:
            raise SystemExit(f"bench/index_build.py needs {tool} on PATH (apt-get install {tool})")
    if not (Path(sys.executable).parent / "simple503").exists():
        raise SystemExit("bench/index_build.py needs simple503: pip install -e '.[bench]'")

    reset(BENCH)
    progress.set_quiet(True)  # the in-process builds: the figures are the output here
    print(f"{platform.node()}: {hash_workers()} cores, python {platform.python_version()}")
    with tempfile.TemporaryDirectory(prefix="rocm-bake-bench-", dir=args.workdir) as tmp:
        work = Path(tmp)
        dist = work / "dist"
        wheels = dist / "wheels" / args.arch
        wheels.mkdir(parents=True)
        print(f"generating {args.count} wheels x {args.size_mb:g} MB ...", flush=True)
        size = int(args.size_mb * (1 << 20))
        paths = [make_bench_wheel(wheels, i, args.arch, size) for i in range(args.count)]
        t_cold_cli, _ = hashing_rows(paths, wheels, dist, args.arch, args.runs)
        warm_row(wheels, dist, args.arch, t_cold_cli, max(args.runs, 5))
        resolve_rows(dist, args.arch, work)
        shutil.rmtree(dist)
        incremental_row(work, args.arch, args.small_count)
    return 0


if __name__ == "__main__":
    sys.exit(main())
