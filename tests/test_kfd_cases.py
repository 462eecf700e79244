"""Every KFD case that decided detection stays our own code, run through ``rocm-bake which-index``.

rocm-bootstrap 0.3.0 (AMD's GPU detection on PyPI) was run on these same
trees (docs/gpus.md, "GPU detection: rocm-bootstrap and our own code"). Where it
agrees with ours (an APU beside a dGPU, a gap in the node numbers, the name of
every target it knows) the test pins the answer both give; everywhere else the
test pins what ours does and says what rocm-bootstrap did instead.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from rocm_bake.cli import main
from rocm_bake.gpu.detect import gfx_from_target_version
from rocm_bake.gpu.which import WhichIndex, run_which_index
from tests.kfd_fixtures import CPU_PROPS, NODES, gpu_props, kfd_tree

BASE = "https://wheels.example/w"


def no_rocminfo() -> None:
    return None


def which(root: Path, stacks_dir: Path | None = None) -> WhichIndex:
    """which-index on ``root`` against the shipped stacks (gfx950, gfx1151, gfx1201, gfx1250, gfx950+gfx1201)."""
    return run_which_index(root, BASE, no_rocminfo, stacks_dir)


def by_arch(result: WhichIndex) -> dict[str, tuple[list[int], str | None, dict[str, str]]]:
    """Detected arch -> (device ordinals, the index it installs from, the pin)."""
    return {c.gpu_arch: (c.devices, c.index_arch, c.pin) for c in result.choices}


# --- where rocm-bootstrap agrees: the same GPUs, in the same order ---------------------------------------------


APU_GPU_NODE = gpu_props(110501)
#: Older APUs show one KFD node holding both the CPU cores and the GPU's SIMDs.
APU_COMBINED_NODE = APU_GPU_NODE.replace("cpu_cores_count 0", "cpu_cores_count 16")


@pytest.mark.parametrize("apu", [[CPU_PROPS, APU_GPU_NODE], [APU_COMBINED_NODE]], ids=["cpu-node+gpu-node", "one-node"])
def test_an_apu_beside_a_dgpu_is_two_arches_with_their_own_ordinals(tmp_path: Path, apu: list[str]) -> None:
    nodes = {str(n): text for n, text in enumerate([*apu, gpu_props(120001)])}
    result = which(kfd_tree(tmp_path, nodes))
    assert [(g.node, g.gfx) for g in result.detection.gpus] == [(str(len(apu) - 1), "gfx1151"), (str(len(apu)), "gfx1201")]
    # no shipped fat stack holds gfx1151 and gfx1201: one index each, each process pinned to its own GPU
    assert result.multi_arch and result.covering_index is None
    assert by_arch(result) == {
        "gfx1151": ([0], "gfx1151", {"ROCR_VISIBLE_DEVICES": "0"}),
        "gfx1201": ([1], "gfx1201", {"ROCR_VISIBLE_DEVICES": "1"}),
    }


def test_a_gap_in_the_node_numbers_does_not_shift_an_ordinal(tmp_path: Path) -> None:
    result = which(kfd_tree(tmp_path, {"0": CPU_PROPS, "1": gpu_props(90500), "3": gpu_props(120001)}))
    assert result.covering_index == "gfx950-gfx1201"
    assert [(c.gpu_arch, c.gpus, c.devices) for c in result.choices] == [
        ("gfx950", ["kfd 1"], [0]), ("gfx1201", ["kfd 3"], [1])]


#: rocm-bootstrap 0.3.0's whole gfx_target_version table (targets.py); its gfx1250-strict shares 120500 with gfx1250.
ROCM_BOOTSTRAP_TARGETS = {
    90000: "gfx900", 90002: "gfx902", 90004: "gfx904", 90006: "gfx906", 90008: "gfx908", 90009: "gfx909",
    90010: "gfx90a", 90012: "gfx90c", 90402: "gfx942", 90500: "gfx950",
    100100: "gfx1010", 100101: "gfx1011", 100102: "gfx1012", 100103: "gfx1013",
    100300: "gfx1030", 100301: "gfx1031", 100302: "gfx1032", 100303: "gfx1033", 100304: "gfx1034",
    100305: "gfx1035", 100306: "gfx1036",
    110000: "gfx1100", 110001: "gfx1101", 110002: "gfx1102", 110003: "gfx1103",
    110500: "gfx1150", 110501: "gfx1151", 110502: "gfx1152", 110503: "gfx1153",
    120000: "gfx1200", 120001: "gfx1201", 120500: "gfx1250", 120501: "gfx1251",
}


def test_every_target_rocm_bootstrap_knows_decodes_to_the_same_name() -> None:
    assert {value: gfx_from_target_version(value) for value in ROCM_BOOTSTRAP_TARGETS} == ROCM_BOOTSTRAP_TARGETS


# --- where ours covers what rocm-bootstrap does not ------------------------------------------------------------


def test_ordinals_follow_node_numbers_numerically_past_node_nine(tmp_path: Path) -> None:
    """Two CPU sockets, then 11 GPUs on nodes 2-12. rocm-bootstrap lists nodes as sorted strings (0, 1, 10, 11,
    12, 2, ...), so node 10's GPU would be device 0, not 8, and every pin would name another card."""
    nodes = {"0": CPU_PROPS, "1": CPU_PROPS} | {str(n): gpu_props(110501 if n % 2 == 0 else 120001) for n in range(2, 13)}
    result = which(kfd_tree(tmp_path, nodes))
    assert [g.node for g in result.detection.gpus] == [str(n) for n in range(2, 13)]
    assert by_arch(result) == {
        "gfx1151": ([0, 2, 4, 6, 8, 10], "gfx1151", {"ROCR_VISIBLE_DEVICES": "0,2,4,6,8,10"}),
        "gfx1201": ([1, 3, 5, 7, 9], "gfx1201", {"ROCR_VISIBLE_DEVICES": "1,3,5,7,9"}),
    }


def test_an_unknown_target_beside_a_known_one_is_named_and_the_known_one_is_served(tmp_path: Path) -> None:
    """gfx803 (Polaris, still enumerated by KFD) is in no table: rocm-bootstrap raises ValueError for it, so
    the host's gfx950 is not reported either."""
    result = which(kfd_tree(tmp_path, {"0": CPU_PROPS, "1": gpu_props(80003), "2": gpu_props(90500)}))
    assert by_arch(result) == {"gfx803": ([0], None, {}), "gfx950": ([1], "gfx950", {"ROCR_VISIBLE_DEVICES": "1"})}
    gfx803 = next(c for c in result.choices if c.gpu_arch == "gfx803")
    assert gfx803.reason.startswith("gfx803 is not built by this project") and gfx803.reason.endswith(
        "no built arch is ISA-compatible with it: no compatible index")


def test_gfx908_is_not_offered_the_gfx90a_index(tmp_path: Path) -> None:
    """rocm-bootstrap groups gfx908 and gfx90a in one sub-family under gfx9-generic (its own comment says the
    generic covers neither); LLVM's gfx9-generic holds neither, so ours offers no index rather than a wrong one."""
    stacks = tmp_path / "stacks"
    stacks.mkdir()
    (stacks / "Pulumi.gfx90a.yaml").write_text("config:\n  rocm-bake:pytorchRocmArch: gfx90a\n")
    result = which(kfd_tree(tmp_path / "host", {"0": CPU_PROPS, "1": gpu_props(90008)}), stacks)
    assert by_arch(result) == {"gfx908": ([0], None, {})}
    assert result.message == "no compatible index for the GPU(s) found"


def test_rocm_bootstraps_environment_overrides_do_not_change_our_answer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """rocm-bootstrap answers ROCM_BOOTSTRAP_FORCE_GFX_ARCH=gfx1201 with gfx1201 on a gfx950 host, and
    ROCM_BOOTSTRAP_DISABLE_DETECTION=1 with no GPU: a variable set for pip would silently pick another index."""
    monkeypatch.setenv("ROCM_BOOTSTRAP_FORCE_GFX_ARCH", "gfx1201")
    monkeypatch.setenv("ROCM_BOOTSTRAP_DISABLE_DETECTION", "1")
    result = which(kfd_tree(tmp_path, {"0": CPU_PROPS, "1": gpu_props(90500)}))
    assert result.message == "index for this host: gfx950"


def symlink_loop(path: Path) -> None:
    path.symlink_to(path)


def properties_loop(node: Path) -> None:
    node.mkdir()
    symlink_loop(node / "properties")


def properties_fifo(node: Path) -> None:
    node.mkdir()
    os.mkfifo(node / "properties")


def properties_of_a_gibibyte(node: Path) -> None:
    """Real properties, then a sparse GiB (no disk used): rocm-bootstrap reads it whole into memory."""
    node.mkdir()
    with open(node / "properties", "w") as handle:
        handle.write(gpu_props(90500))
        handle.truncate(1 << 30)


Spec = str | bytes | None | Callable[[Path], None]

#: Node 1 of a host whose node 2 is a good gfx950: (node 1's entry, the error's tail, what rocm-bootstrap 0.3.0 did).
HOSTILE: dict[str, tuple[Spec, str, str]] = {
    "binary": (b"\x7fELF\x02\x01\x01\x00" + bytes(range(256)),
               "properties: binary data (not UTF-8 at byte 136), not a KFD topology file of 'key value' lines",
               "UnicodeDecodeError traceback"),
    "control-characters": ("gfx_target_version 90500\n\x00\x01\x02\n",
                           "properties: binary data (control characters), not a KFD topology file of 'key value' lines",
                           "node skipped (no simd_count line): one gfx950"),
    "huge": (properties_of_a_gibibyte, "properties: larger than 64 KiB, not a KFD topology file",
             "reads the whole file (200 MB took 1.2 s and 425 MiB peak RSS), then gfx950"),
    "missing-properties": (None, "properties: missing (every KFD node has one)", "node skipped: one gfx950"),
    "missing-gfx_target_version": ("simd_count 256\n", "properties: no gfx_target_version line", "node skipped"),
    "negative": (gpu_props(-90500), "properties: gfx_target_version -90500 is not a GPU", "ValueError traceback"),
    "overflowing": (gpu_props(10**30),
                    "properties: gfx_target_version 10000000000000000000: a major version above 99 is no AMDGPU "
                    "processor", "ValueError traceback"),
    "not-hex": (gpu_props(91600), "properties: gfx_target_version 91600: minor 16 / stepping 0 exceed one hex digit",
                "ValueError traceback"),
    "not-an-integer": (gpu_props("abc"), "properties: gfx_target_version 'abc' is not an integer",  # type: ignore[arg-type]
                       "node skipped"),
    "two-versions": (gpu_props(90500) + "gfx_target_version 120001\n",
                     "properties: gfx_target_version appears 2 times (90500, 120001): which one is the GPU is not known",
                     "the last one: gfx1201"),
    "properties-symlink-loop": (properties_loop, "properties: a symlink loop, not a KFD topology file",
                                "OSError traceback"),
    "properties-fifo": (properties_fifo, "properties: not a regular file, not a KFD topology file", "blocks forever"),
    "node-symlink-loop": (symlink_loop, ": a symlink loop, not a KFD node", "node skipped"),
    "node-is-a-file": (lambda node: node.write_text(gpu_props(120001)), ": not a directory, not a KFD node",
                       "node skipped"),
}
#: Entries the kernel never names so, holding a GPU's properties; counted as a GPU, one would shift every ordinal.
NOT_NODES = {"not-a-node-number": "gpu", "leading-zero": "01"}
for _case in NOT_NODES:
    HOSTILE[_case] = (gpu_props(120001), ": not a KFD node (the kernel names its nodes 0, 1, 2, ...)",
                      {"gpu": "entry skipped", "01": "counted as node 1: its gfx1201 first"}[NOT_NODES[_case]])


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_a_hostile_node_is_one_error_line_naming_it(
    tmp_path: Path, case: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Exit 2, nothing on stdout, one line naming the node and the rule; the good gfx950 beside it is not
    reported as the host's only GPU (that would pick an index for half a host)."""
    spec, tail, _rocm_bootstrap = HOSTILE[case]
    name = NOT_NODES.get(case, "1")
    root = kfd_tree(tmp_path, {"0": CPU_PROPS, name: spec, "2": gpu_props(90500)})
    assert main(["which-index", "--sysfs-root", str(root), "--index-base", BASE]) == 2
    out, err = capsys.readouterr()
    entry = root / NODES / name
    assert out == ""
    assert err == ("rocm-bake: error: cannot read 1 KFD node(s), so the GPUs of this host are not known: "
                   f"{entry}{'/' if tail.startswith('properties') else ''}{tail}\n")



@pytest.mark.parametrize("make, what", [(symlink_loop, "a symlink loop"), (lambda p: p.write_text(""), "not a directory")],
                         ids=["loop", "file"])
def test_a_nodes_directory_that_is_not_one_is_named_not_no_gpu(
    tmp_path: Path, make: Callable[[Path], None], what: str
) -> None:
    from rocm_bake.errors import RocmBakeError

    nodes = tmp_path / NODES
    nodes.parent.mkdir(parents=True)
    make(nodes)
    with pytest.raises(RocmBakeError) as caught:
        which(tmp_path)
    assert str(caught.value) == f"{nodes}: {what}, not a KFD topology"
