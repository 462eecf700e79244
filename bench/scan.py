#!/usr/bin/env python3
"""Benchmark the code-object scan (``rocm-bake wheel arches``) against reading the member once.

A wheel is built whose ``torch/_C.so`` (gcc + objcopy, as the tests do) holds
a ``.hip_fatbin`` of ``--size-mb`` MiB (default 290) in ``--bundles``
page-aligned bundles (default 220), half of them CCOB-compressed (zlib and zstd alternating, v2 and v3). Payloads are
incompressible: slices of one random block larger than DEFLATE's 32 KiB
window, so DEFLATE stores them and inflating is a copy (the baseline does the
least work it can). The same ``.so`` goes into a second wheel stored, not
deflated. A third wheel holds the same layout with compressible, code-like
payloads (DEFLATE ≈ 2.7:1), closer to real code objects.

In-process rows: the best of ``--repeat`` alternating runs, each in its own
child process (all children import the scanner first, page cache warm, glibc
heap trimming pinned: see ``CHILD_ENV``), timed inside the child:

* **deflated member** — ``wheel_targets`` on the deflated wheel against one
  streaming inflate pass of the same member by zipfile (``open`` +
  ``read1(1 MiB)`` to the end: inflate and the CRC check, the reader the scan
  itself uses). Goal ≤ 1.3×. Context row: against raw ``zlib`` inflate of the
  member's bytes with no CRC check, the floor.
* **stored member** — ``wheel_targets`` on the stored wheel against one read of
  the member by zipfile (copy and CRC check). Goal ≤ 0.2×. Context row:
  against a plain read of the member's bytes, no CRC, the floor.
* **peak RSS** of each scan child (``getrusage(RUSAGE_CHILDREN).ru_maxrss`` in
  a runner that starts only that child) against the 256 MiB budget. Goal ≤ 1.

Whole-process rows (**CLI**), as a user runs it, process start counted:
``rocm-bake wheel arches --json WHEEL`` (the installed console script, its
``.pyc`` written first as ``pip install`` does) against ``python -c`` running
zipfile's streaming inflate pass of the same member, ``--cli-runs``
alternating pairs, the median of the per-pair ratios. Goal ≤ 1.3× on wall
time, for each of the incompressible and compressible deflated wheels, both
programs run with glibc heap trimming pinned (each at its fastest, as the
in-process children); the CPU-time ratio (user + sys, ``os.wait4``) is
recorded beside it, steadier when other work shares the machine. A context
pair of rows runs both in the user's environment as it is, where glibc's
trimming costs the plain inflate loop more page faults than the scan.

Usage: ``python bench/scan.py [--size-mb 290] [--bundles 220] [--repeat 5]
[--cli-runs 9] [--cli-only]``; a quick run: ``--size-mb 64 --bundles 40``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import struct
import subprocess
import sys
import tempfile
import statistics
import time
import zipfile
import zlib
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from results import record, reset  # noqa: E402

BENCH = "scan"
MB = 1 << 20
ALIGN = 4096
RSS_BUDGET = 256 * MB
TARGETS = ["gfx950", "gfx1201", "gfx942", "gfx1151", "gfx90a", "gfx1250"]
MAGIC = b"__CLANG_OFFLOAD_BUNDLE__"
HOST_ID = "host-x86_64-unknown-linux-gnu"
#: The console script pip installed next to this interpreter: what a user runs.
ROCM_BAKE = str(Path(sys.executable).with_name("rocm-bake"))
MEMBER = "torch/_C.so"
C_SOURCE = "int rocm_bake_bench(int x) { return x * 3 + 1; }\n"

#: Runs one command and reports the peak RSS of exactly that child.
RSS_RUNNER = (
    "import json, resource, subprocess, sys\n"
    "r = subprocess.run(sys.argv[1:], capture_output=True, text=True)\n"
    "sys.stderr.write(r.stderr)\n"
    "if r.returncode: sys.exit(r.returncode)\n"
    "out = json.loads(r.stdout)\n"
    "out['maxrss'] = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024\n"
    "print(json.dumps(out))\n"
)


# ------------------------------------------------------------------ data


class Payloads:
    """Payload bytes, cheaply: slices of one block, rotated.

    Incompressible (the default): a random block larger than DEFLATE's 32 KiB
    window, so DEFLATE stores it and inflating is a copy (the hardest case for
    the scan's ratio: the baseline does least). Compressible: the block is
    built like machine code, a few hundred short "instructions" picked at
    random with a random 8-byte operand every third word (DEFLATE ≈ 2.7:1),
    so inflating is real work as in a real wheel.
    """

    def __init__(self, block_mb: int = 8, compressible: bool = False) -> None:
        block = code_like(block_mb * MB) if compressible else os.urandom(block_mb * MB)
        self._twice, self._size, self._at = block + block, len(block), 0

    def take(self, n: int) -> bytes:
        out = bytearray()
        while len(out) < n:
            piece = min(n - len(out), self._size)
            out += self._twice[self._at : self._at + piece]
            self._at = (self._at + 7919 * ALIGN + 13) % self._size
        return bytes(out)


def code_like(n: int) -> bytes:
    """``n`` bytes of words from a small vocabulary (4 to 28 bytes, a third of each zero) and random operands."""
    zero_low = bytes(0 if i < 96 else i for i in range(256))
    seed = os.urandom(256 * 32)
    vocab = [seed[i * 32 : i * 32 + 4 + (i % 7) * 4].translate(zero_low) for i in range(256)]
    operands, picks = os.urandom(n), os.urandom(n // 4)
    words, size, used = [], 0, 0
    for i, pick in enumerate(picks):
        word = operands[used : used + 8] if i % 3 == 2 else vocab[pick]
        used += 8 if i % 3 == 2 else 0
        words.append(word)
        size += len(word)
        if size >= n:
            break
    return b"".join(words)[:n]


def bundle(target: str, payload: bytes) -> bytes:
    """An uncompressed bundle: host entry and one device entry (independent of rocm_bake)."""
    ids = [HOST_ID, f"hipv4-amdgcn-amd-amdhsa--{target}"]
    header = len(MAGIC) + 8 + sum(24 + len(i) for i in ids)
    device_at = -(-header // ALIGN) * ALIGN
    out = bytearray(MAGIC + struct.pack("<Q", len(ids)))
    out += struct.pack("<QQQ", header, 0, len(ids[0])) + ids[0].encode()
    out += struct.pack("<QQQ", device_at, len(payload), len(ids[1])) + ids[1].encode()
    out += bytes(device_at - len(out))
    return bytes(out + payload)


def ccob(inner: bytes, method: str, version: int) -> bytes:
    if method == "zlib":
        data, code = zlib.compress(inner, 1), 0
    else:
        from backports import zstd

        data, code = zstd.compress(inner, 1), 1
    digest = struct.unpack("<Q", hashlib.md5(inner).digest()[8:])[0]
    if version == 3:
        return b"CCOB" + struct.pack("<HHQQQ", 3, code, 32 + len(data), len(inner), digest) + data
    return b"CCOB" + struct.pack("<HHIIQ", 2, code, 24 + len(data), len(inner), digest) + data


#: How many distinct CCOB blobs ``write_fatbin`` makes and reuses (compressing each bundle anew would time zlib).
CCOB_BLOBS = 4


def bundle_target(i: int) -> str:
    """The target of bundle ``i``: even bundles are plain, odd ones one of the CCOB blobs, each with its own target.

    The scan's expected answer comes from here, so a small fixture (fewer bundles than targets) is judged right.
    """
    return TARGETS[i // 2 % CCOB_BLOBS] if i % 2 else TARGETS[i // 2 % len(TARGETS)]


def expected_targets(bundles: int) -> list[str]:
    """What a correct scan of a ``bundles``-bundle fixture reports, sorted."""
    return sorted({bundle_target(i) for i in range(bundles)})


def write_fatbin(path: Path, size: int, count: int, compressible: bool = False) -> tuple[int, int]:
    """``count`` aligned bundles filling ``size`` bytes; half CCOB (a few distinct blobs reused)."""
    payloads = Payloads(compressible=compressible)
    each = max(size // count - 2 * ALIGN, ALIGN)
    compressed = [
        ccob(bundle(bundle_target(2 * j + 1), payloads.take(each)), ("zlib", "zstd")[j % 2], 2 + j // 2 % 2)
        for j in range(CCOB_BLOBS)
    ]
    written = ccob_count = 0
    with open(path, "wb") as out:
        for i in range(count):
            if i % 2:
                blob = compressed[i // 2 % len(compressed)]
                ccob_count += 1
            else:
                blob = bundle(bundle_target(i), payloads.take(each))
            out.write(blob + bytes((-len(blob)) % ALIGN))
            written += len(blob) + (-len(blob)) % ALIGN
    return written, ccob_count


def build_wheels(work: Path, size: int, count: int, compressible: bool = False) -> tuple[Path, Path, int, int]:
    """A deflated and a stored wheel (under ``work/deflated`` and ``work/stored``) holding the same ``_C.so``."""
    work.mkdir(parents=True, exist_ok=True)
    src, so, fatbin = work / "bench.c", work / "_C.so", work / "fatbin"
    src.write_text(C_SOURCE)
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(so), str(src)], check=True)
    fatbin_size, ccob_count = write_fatbin(fatbin, size, count, compressible)
    subprocess.run(["objcopy", "--add-section", f".hip_fatbin={fatbin}", str(so)], check=True)
    fatbin.unlink()
    wheels = []
    for name, compression in (("deflated", zipfile.ZIP_DEFLATED), ("stored", zipfile.ZIP_STORED)):
        wheel = work / name / "torch-2.9.0-cp311-cp311-linux_x86_64.whl"
        wheel.parent.mkdir()
        with zipfile.ZipFile(wheel, "w", compression=compression, compresslevel=1) as zf:
            zf.writestr("torch-2.9.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: torch\nVersion: 2.9.0\n")
            zf.write(so, MEMBER)
        wheels.append(wheel)
    so.unlink()
    return wheels[0], wheels[1], fatbin_size, ccob_count


# ---------------------------------------------------------------- children


def _data_start(raw, info: zipfile.ZipInfo) -> int:  # type: ignore[no-untyped-def]
    raw.seek(info.header_offset)
    name_len, extra_len = struct.unpack_from("<HH", raw.read(30), 26)
    return info.header_offset + 30 + name_len + extra_len


def child(mode: str, wheel: Path) -> None:
    """One measurement, timed inside the child (interpreter start-up and imports excluded).

    Every child imports the scanner, so all start from the same process state.
    """
    from rocm_bake import progress
    from rocm_bake.offload.wheel import wheel_targets

    progress.set_quiet(True)
    if mode == "scan":
        started = time.perf_counter()
        report = wheel_targets(wheel)
        seconds = time.perf_counter() - started
        print(json.dumps({"seconds": seconds, "targets": report.targets, "unknown": report.unknown,
                          "bundles": len(report.sources)}))
        return
    with zipfile.ZipFile(wheel) as zf:
        info = zf.getinfo(MEMBER)
        started = time.perf_counter()
        total = 0
        if mode == "zipfile":  # zipfile's own pass: inflate (or copy) + CRC, as the scan reads
            with zf.open(info) as handle:
                while chunk := handle.read1(MB):
                    total += len(chunk)
        elif mode == "zlib":  # the floor: raw DEFLATE, no zipfile, no CRC
            with open(wheel, "rb") as raw:
                raw.seek(_data_start(raw, info))
                inflater, left = zlib.decompressobj(-15), info.compress_size
                while left and (data := raw.read(min(MB, left))):
                    left -= len(data)
                    total += len(inflater.decompress(data))
                total += len(inflater.flush())
        else:  # "read": the stored member's bytes straight from the file
            with open(wheel, "rb") as raw:
                raw.seek(_data_start(raw, info))
                left = info.file_size
                while left and (chunk := raw.read(min(MB, left))):
                    total += len(chunk)
                    left -= len(chunk)
        seconds = time.perf_counter() - started
    assert total == info.file_size, (total, info.file_size)
    print(json.dumps({"seconds": seconds}))


#: glibc returns freed 1 MiB buffers to the kernel and faults them back in on
#: the next read: that page-fault noise was half of an inflate pass here and
#: swung with unrelated imports. Pinned thresholds keep freed memory in the
#: heap, so both contenders measure their own work (and the baseline runs at
#: its fastest: the strongest baseline).
CHILD_ENV = {"MALLOC_TRIM_THRESHOLD_": str(256 * MB), "MALLOC_MMAP_THRESHOLD_": str(256 * MB)}


def run_child(mode: str, wheel: Path) -> dict:
    cmd = [sys.executable, "-c", RSS_RUNNER, sys.executable, str(Path(__file__).resolve()), "--child", mode, str(wheel)]
    out = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, **CHILD_ENV})
    if out.returncode:
        raise SystemExit(f"{mode} {wheel.name} failed:\n{out.stderr}")
    return json.loads(out.stdout)


def best_of(repeat: int, pairs: list[tuple[str, Path]]) -> dict[str, dict]:
    """Alternate the contenders ``repeat`` times; keep each one's fastest run (and its peak RSS)."""
    best: dict[str, dict] = {}
    for _ in range(repeat):
        for mode, wheel in pairs:
            result = run_child(mode, wheel)
            key = f"{mode}:{wheel.parent.name}"
            if key not in best or result["seconds"] < best[key]["seconds"]:
                best[key] = {**result, "maxrss": max(result["maxrss"], best.get(key, {}).get("maxrss", 0))}
            else:
                best[key]["maxrss"] = max(best[key]["maxrss"], result["maxrss"])
    return best


# ------------------------------------------------------- whole processes

#: The baseline as a whole program: zipfile's own streaming pass over the member (inflate + CRC check),
#: the loop of the in-process ``zipfile`` child.
INFLATE_PROGRAM = (
    "import sys, zipfile\n"
    "with zipfile.ZipFile(sys.argv[1]) as zf, zf.open(sys.argv[2]) as member:\n"
    "    while chunk := member.read1(1 << 20):\n"
    "        pass\n"
)


#: Runs one command and prints the peak RSS of exactly that child (a child forked from this big
#: process would count this process's pages until it execs).
CLI_RSS_RUNNER = (
    "import resource, subprocess, sys\n"
    "subprocess.run(sys.argv[1:], check=True, stdout=subprocess.DEVNULL)\n"
    "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024)\n"
)


class Process:
    """One whole process as a user runs it: wall seconds, CPU seconds (user + sys), stdout."""

    def __init__(self, argv: list[str], work: Path, env: dict[str, str] | None = None) -> None:
        out_path, err_path = work / "stdout", work / "stderr"
        with open(out_path, "wb") as out, open(err_path, "wb") as err:
            started = time.perf_counter()
            child = subprocess.Popen(argv, stdout=out, stderr=err, env=env)
            _, status, usage = os.wait4(child.pid, 0)
            self.wall = time.perf_counter() - started
        if os.waitstatus_to_exitcode(status):
            raise SystemExit(f"{argv[:4]} failed:\n{err_path.read_text()[-2000:]}")
        self.cpu = usage.ru_utime + usage.ru_stime
        self.stdout = out_path.read_text()


def byte_compile() -> None:
    """Write rocm_bake's ``.pyc`` files, as ``pip install`` does: a user's start-up does not compile.

    (An editable install under ``PYTHONDONTWRITEBYTECODE`` would otherwise
    compile every module on every start.)
    """
    import rocm_bake

    subprocess.run([sys.executable, "-m", "compileall", "-q", str(Path(rocm_bake.__file__).parent)], check=True)


def cli_pairs(wheel: Path, bundles: int, runs: int, work: Path, pinned: bool
              ) -> tuple[list[tuple[Process, Process]], int]:
    """``runs`` pairs of (``rocm-bake wheel arches --json``, the inflate program), order alternating per pair.

    ``pinned``: both run with glibc heap trimming pinned (:data:`CHILD_ENV`),
    each at its fastest, so the ratio is the two programs' own work; else both
    run in the user's environment as it is, where glibc's trimming makes the
    plain loop fault its freed chunks back in (tens of thousands of page
    faults a pass: a slower baseline, so context only). Also the scan's peak
    RSS, from a warm-up run under :data:`CLI_RSS_RUNNER`.
    """
    env = {**os.environ, **CHILD_ENV} if pinned else None
    subject = [ROCM_BAKE, "wheel", "arches", "--json", str(wheel)]
    baseline = [sys.executable, "-c", INFLATE_PROGRAM, str(wheel), MEMBER]
    (report,) = json.loads(Process(subject, work, env).stdout)  # warm-up, and the answer checked
    if report["targets"] != expected_targets(bundles) or report["unknown"]:
        raise SystemExit(f"rocm-bake wheel arches {wheel}: wrong answer {report}")
    maxrss = int(Process([sys.executable, "-c", CLI_RSS_RUNNER, *subject], work, env).stdout)
    Process(baseline, work, env)
    pairs = []
    for i in range(runs):
        if i % 2:
            base = Process(baseline, work, env)
            pairs.append((Process(subject, work, env), base))
        else:
            pairs.append((Process(subject, work, env), Process(baseline, work, env)))
    return pairs, maxrss


def record_cli(row: str, fixture: str, measured: tuple[list[tuple[Process, Process]], int], goal: float | None) -> None:
    """Two rows: wall time (what a user waits; the goal) and CPU time (steadier when the machine is busy)."""
    pairs, rss = measured
    load = os.getloadavg()[0]
    subject = "`rocm-bake wheel arches --json WHEEL`, a whole process (start-up, imports, scan, JSON out)"
    baseline = "`python -c` zipfile streaming inflate of the same member (open + read1(1 MiB)), a whole process"
    for what in ("wall", "cpu"):
        ratios = [getattr(s, what) / getattr(b, what) for s, b in pairs]
        ratio = statistics.median(ratios)
        subj = statistics.median(getattr(s, what) for s, _ in pairs)
        base = statistics.median(getattr(b, what) for _, b in pairs)
        best = min(getattr(s, what) for s, _ in pairs) / min(getattr(b, what) for _, b in pairs)
        label = "wall time" if what == "wall" else "CPU time (user + sys)"
        note = (f"{fixture}; {label}: median of {len(pairs)} alternating pairs, min–max {min(ratios):.2f}–"
                f"{max(ratios):.2f}, best-of {best:.2f}; {subj:.3f} s vs {base:.3f} s; load {load:.1f} on "
                f"{os.cpu_count()} cores; scan peak RSS {rss / MB:.0f} MiB")
        row_goal = goal if what == "wall" else None
        if row_goal is None:
            note += "; context only"
        record(BENCH, f"{row}, {what if what == 'wall' else 'CPU'}", subject=subject, baseline=baseline,
               ratio=ratio, goal=f"≤ {row_goal}" if row_goal else "—",
               met=ratio <= row_goal if row_goal else None, note=note)
        print(f"{row} ({label}): {ratio:.3f}× ({note})")


def in_process_rows(best: dict[str, dict], fatbin_size: int, ccob_count: int, args: argparse.Namespace) -> None:
    """The ``wheel_targets`` rows: the scan alone, interpreter start-up and imports excluded."""
    for key in ("scan:deflated", "scan:stored"):
        got = best[key]
        expected = expected_targets(args.bundles)
        if got["targets"] != expected or got["unknown"] or got["bundles"] != args.bundles:
            raise SystemExit(f"{key}: wrong answer {got} (expected {expected}, {args.bundles} bundles)")
    what = (f"{fatbin_size / MB:.0f} MiB .hip_fatbin, {args.bundles} aligned bundles ({ccob_count} CCOB zlib/zstd), "
            f"best of {args.repeat}")
    scan_d, scan_s = "`wheel_targets`, `.so` deflated", "`wheel_targets`, `.so` stored"
    rows = [
        ("deflated member", "scan:deflated", "zipfile:deflated", 1.3, scan_d,
         "one streaming inflate pass of the member by zipfile (open + read1(1 MiB): inflate + CRC check)"),
        ("deflated member, raw floor", "scan:deflated", "zlib:deflated", None, scan_d,
         "raw zlib inflate of the member's bytes, no zipfile, no CRC check (context: the floor)"),
        ("stored member", "scan:stored", "zipfile:stored", 0.2, scan_s,
         "one read of the member by zipfile (open + read1(1 MiB): copy + CRC check)"),
        ("stored member, raw floor", "scan:stored", "read:stored", None, scan_s,
         "a plain read of the member's bytes from the wheel file, no CRC check (context: the floor)"),
    ]
    for row, subject, baseline, goal, subject_text, baseline_text in rows:
        ratio = best[subject]["seconds"] / best[baseline]["seconds"]
        note = f"{what}; {best[subject]['seconds']:.3f} s vs {best[baseline]['seconds']:.3f} s"
        if goal is None:
            note += "; context only: the goal row above compares with zipfile's pass, which checks the CRC"
        record(BENCH, row, subject=subject_text, baseline=baseline_text, ratio=ratio,
               goal=f"≤ {goal}" if goal else "—", met=ratio <= goal if goal else None, note=note)
        print(f"{row}: {ratio:.3f}× ({note})" + (f" goal ≤ {goal}" if goal else ""))
        if goal is None:
            continue
        rss = best[subject]["maxrss"]
        record(BENCH, f"{row}, peak RSS", subject=f"peak RSS of the scan child ({rss / MB:.0f} MiB)",
               baseline="256 MiB budget", ratio=rss / RSS_BUDGET, goal="≤ 1", met=rss <= RSS_BUDGET,
               note="getrusage(RUSAGE_CHILDREN).ru_maxrss of a runner that starts only the scan")
        print(f"{row}, peak RSS: {rss / MB:.0f} MiB (budget 256 MiB)")


def built(work: Path, args: argparse.Namespace, compressible: bool) -> tuple[Path, Path, int, int, str]:
    """Build one fixture's wheels and say what they hold."""
    started = time.perf_counter()
    deflated, stored, fatbin_size, ccob_count = build_wheels(work, args.size_mb * MB, args.bundles, compressible)
    member = zipfile.ZipFile(deflated).getinfo(MEMBER)
    payloads = "compressible" if compressible else "incompressible"
    fixture = (f"{fatbin_size / MB:.0f} MiB .hip_fatbin, {args.bundles} bundles ({ccob_count} CCOB zlib/zstd), "
               f"{payloads} payloads: member {member.file_size / MB:.0f} MiB deflated to "
               f"{member.compress_size / MB:.0f} MiB")
    print(f"built in {time.perf_counter() - started:.1f} s: {fixture}", flush=True)
    return deflated, stored, fatbin_size, ccob_count, fixture


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mb", type=int, default=290, help=".hip_fatbin size in MiB (default 290)")
    parser.add_argument("--bundles", type=int, default=220, help="bundles in it, half CCOB (default 220)")
    parser.add_argument("--repeat", type=int, default=5, help="alternating in-process runs per contender (default 5)")
    parser.add_argument("--cli-runs", type=int, default=9, help="alternating whole-process pairs (default 9)")
    parser.add_argument("--cli-only", action="store_true", help="only the whole-process rows")
    parser.add_argument("--child", nargs=2, metavar=("MODE", "WHEEL"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child[0], Path(args.child[1]))
        return
    reset(BENCH)
    if not Path(ROCM_BAKE).exists():
        raise SystemExit(f"bench/scan.py: {ROCM_BAKE} not found: install the project (make setup)")
    byte_compile()
    with tempfile.TemporaryDirectory(prefix="rocm-bake-bench-scan-") as tmp:
        work = Path(tmp)
        deflated, stored, fatbin_size, ccob_count, fixture = built(work / "incompressible", args, False)
        if not args.cli_only:
            best = best_of(args.repeat, [("zipfile", deflated), ("scan", deflated), ("zlib", deflated),
                                         ("zipfile", stored), ("read", stored), ("scan", stored)])
            in_process_rows(best, fatbin_size, ccob_count, args)
        stored.unlink()
        record_cli("CLI, deflated member", fixture, cli_pairs(deflated, args.bundles, args.cli_runs, work, True), 1.3)
        record_cli("CLI, deflated member, user's environment", fixture,
                   cli_pairs(deflated, args.bundles, args.cli_runs, work, False), None)
        deflated.unlink()
        deflated, stored, _, _, fixture = built(work / "compressible", args, True)
        stored.unlink()
        record_cli("CLI, deflated member, compressible payloads", fixture,
                   cli_pairs(deflated, args.bundles, args.cli_runs, work, True), 1.3)


if __name__ == "__main__":
    main()
