"""which-index against fake KFD sysfs trees and a captured rocminfo sample."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from rocm_bake.archset import ArchSet
from rocm_bake.cli import main
from rocm_bake.commands import which_index as wi
from rocm_bake.errors import RocmBakeError
from rocm_bake.gpu.detect import detect_gpus, gfx_from_target_version, parse_rocminfo
from tests.kfd_fixtures import sysfs

BASE = "https://sbates130272.github.io/rocm-bake/data/wheels"

ROCMINFO_SAMPLE = """ROCk module version 6.12.12 is loaded
=====================
HSA System Attributes
=====================
Runtime Version:         1.18
Runtime Ext Version:     1.14
System Timestamp Freq.:  1000.000000MHz
Machine Model:           LARGE
System Endianness:       LITTLE
Mwaitx:                  DISABLED
XNACK enabled:           NO
DMAbuf Support:          YES
VMM Support:             YES

==========
HSA Agents
==========
*******
Agent 1
*******
  Name:                    AMD Ryzen 9 9950X 16-Core Processor
  Uuid:                    CPU-XX
  Marketing Name:          AMD Ryzen 9 9950X 16-Core Processor
  Vendor Name:             CPU
  Feature:                 None specified
  Profile:                 FULL_PROFILE
  Float Round Mode:        NEAR
  Max Queue Number:        0(0x0)
  Queue Min Size:          0(0x0)
  Queue Max Size:          0(0x0)
  Queue Type:              MULTI
  Node:                    0
  Device Type:             CPU
  ISA Info:
*******
Agent 2
*******
  Name:                    gfx1201
  Uuid:                    GPU-4d6a3e1f2b7c9a08
  Marketing Name:          AMD Radeon RX 9070 XT
  Vendor Name:             AMD
  Feature:                 KERNEL_DISPATCH
  Profile:                 BASE_PROFILE
  Float Round Mode:        NEAR
  Max Queue Number:        128(0x80)
  Queue Min Size:          64(0x40)
  Queue Max Size:          131072(0x20000)
  Queue Type:              MULTI
  Node:                    1
  Device Type:             GPU
  Cache Info:
    L1:                      32(0x20) KB
    L2:                      8192(0x2000) KB
  Chip ID:                 30033(0x7551)
  ASIC Revision:           1(0x1)
  Compute Unit:            64
  ISA Info:
    ISA 1
      Name:                    amdgcn-amd-amdhsa--gfx1201
      Machine Models:          HSA_MACHINE_MODEL_LARGE
    ISA 2
      Name:                    amdgcn-amd-amdhsa--gfx12-generic
      Machine Models:          HSA_MACHINE_MODEL_LARGE
*** Done ***
"""


def no_rocminfo() -> None:
    return None


def result_for(root: Path, rocminfo=no_rocminfo, base: str = BASE) -> wi.WhichIndex:
    return wi.run_which_index(root, base, rocminfo)


@pytest.mark.parametrize(
    "version, gfx",
    [(90010, "gfx90a"), (90500, "gfx950"), (110501, "gfx1151"), (120001, "gfx1201"),
     (120500, "gfx1250"), (90402, "gfx942"), (90012, "gfx90c")],
)
def test_gfx_target_version_decoding(version: int, gfx: str) -> None:
    assert gfx_from_target_version(version) == gfx


def test_one_gpu_prints_the_exact_install_line(tmp_path: Path) -> None:
    result = result_for(sysfs(tmp_path, [0, 90500]))
    assert [c.gpu_arch for c in result.choices] == ["gfx950"]
    assert result.choices[0].native and not result.multi_arch
    # a remote index: its version is not known here, so the hash-locked line alone (it pins through its lock)
    assert result.choices[0].install == (
        f"pip install --require-hashes --index-url {BASE}/gfx950/ --extra-index-url https://pypi.org/simple "
        f"-r {BASE}/gfx950/requirements.txt"
    )
    assert result.choices[0].install_lines == [result.choices[0].install]
    text = wi.render(result)
    assert "index gfx950/ (arches gfx950; extra device-gfx950)" in text
    assert text.index(result.choices[0].install) < text.index("then run `python -m rocm_torch`")


def test_two_different_gpus_with_no_covering_index_list_each_and_pin_processes(tmp_path: Path) -> None:
    """gfx1151 + gfx1201: no fat stack covers both, so one line per arch and how to pin a process to its GPUs."""
    result = result_for(sysfs(tmp_path, [0, 120001, 110501]))
    assert [c.index_arch for c in result.choices] == ["gfx1151", "gfx1201"]
    assert result.multi_arch and result.covering_index is None and result.install is None
    assert result.message.startswith("no configured index covers every GPU here")
    assert "one environment can hold only one arch's wheels" in result.message.lower()
    # KFD node 1 is the gfx1201 (device 0), node 2 the gfx1151 (device 1)
    assert {c.gpu_arch: c.devices for c in result.choices} == {"gfx1201": [0], "gfx1151": [1]}
    assert {c.gpu_arch: c.pin for c in result.choices} == {
        "gfx1201": {"ROCR_VISIBLE_DEVICES": "0"}, "gfx1151": {"ROCR_VISIBLE_DEVICES": "1"}}
    assert {c.gpu_arch: c.pin_hip for c in result.choices} == {
        "gfx1201": {"HIP_VISIBLE_DEVICES": "0"}, "gfx1151": {"HIP_VISIBLE_DEVICES": "1"}}
    text = wi.render(result)
    for arch in ("gfx1151", "gfx1201"):
        assert f"  pip install --require-hashes --index-url {BASE}/{arch}/ " in text
        assert f"-r {BASE}/{arch}/requirements.txt" in text
    assert "ROCR_VISIBLE_DEVICES=1 python" in text and "HIP_VISIBLE_DEVICES=1 python" in text
    # never both variables on one command line: HIP renumbers what ROCr leaves visible
    assert not any("ROCR_VISIBLE_DEVICES" in line and "HIP_VISIBLE_DEVICES=" in line for line in text.splitlines())


def test_a_mixed_host_covered_by_a_fat_stack_gets_one_install_line(tmp_path: Path) -> None:
    """MI355X (gfx950) + R9700 (gfx1201): stacks/Pulumi.fat-gfx950-gfx1201.yaml covers both."""
    result = result_for(sysfs(tmp_path, [0, 90500, 120001]))
    assert result.multi_arch and result.covering_index == "gfx950-gfx1201"
    assert result.install_lines == [
        f"pip install --require-hashes --index-url {BASE}/gfx950-gfx1201/ --extra-index-url "
        f"https://pypi.org/simple -r {BASE}/gfx950-gfx1201/requirements.txt"]
    text = wi.render(result)
    assert text.count("--require-hashes") == 1 and "/gfx950/" not in text
    assert "index gfx950-gfx1201/ (arches gfx950, gfx1201; extra device-gfx950-gfx1201)" in text


def test_three_gpus_of_two_arches_are_covered_and_three_arches_are_not(tmp_path: Path) -> None:
    two = result_for(sysfs(tmp_path / "a", [0, 120001, 90500, 120001]))
    assert two.covering_index == "gfx950-gfx1201" and len(two.detection.gpus) == 3
    assert {c.gpu_arch: c.devices for c in two.choices} == {"gfx950": [1], "gfx1201": [0, 2]}
    three = result_for(sysfs(tmp_path / "b", [0, 90500, 120001, 110501]))
    assert three.covering_index is None and three.install is None
    assert {c.gpu_arch: c.pin["ROCR_VISIBLE_DEVICES"] for c in three.choices} == {
        "gfx950": "0", "gfx1201": "1", "gfx1151": "2"}
    assert "no configured index covers every GPU here" in wi.render(three)


def test_two_gpus_of_one_arch_pin_to_both_device_ordinals(tmp_path: Path) -> None:
    """gfx1201, gfx1151, gfx1201: the gfx1201 environment runs on devices 0 and 2 (KFD node order)."""
    result = result_for(sysfs(tmp_path, [0, 120001, 110501, 120001]))
    pins = {c.gpu_arch: (c.pin, c.pin_hip) for c in result.choices}
    assert pins["gfx1201"] == ({"ROCR_VISIBLE_DEVICES": "0,2"}, {"HIP_VISIBLE_DEVICES": "0,2"})
    assert "on devices 0,2 only: ROCR_VISIBLE_DEVICES=0,2 python" in wi.render(result)


def stacks(root: Path, **arch_by_stack: str | None) -> Path:
    """A stacks/ dir: stack name (``_`` for ``-``) -> its pytorchRocmArch (None: the key is absent)."""
    root.mkdir(parents=True, exist_ok=True)
    for name, arch in arch_by_stack.items():
        body = "config: {}\n" if arch is None else f'config:\n  rocm-bake:pytorchRocmArch: "{arch}"\n'
        (root / f"Pulumi.{name.replace('_', '-')}.yaml").write_text(body)
    return root


def test_a_three_arch_fat_stack_covers_a_three_arch_host_and_demo_stacks_do_not_count(tmp_path: Path) -> None:
    conf = stacks(tmp_path / "stacks", gfx950=None, gfx1201=None, gfx1151="gfx1151",
                  fat_three="gfx1151;gfx950;gfx1201", demo_fat="gfx950;gfx1201")
    host = sysfs(tmp_path / "host", [0, 90500, 120001, 110501])
    result = wi.run_which_index(host, BASE, no_rocminfo, conf)
    assert result.configured == ["gfx950", "gfx1151", "gfx1201", "gfx1151-gfx950-gfx1201"]
    assert result.covering_index == "gfx1151-gfx950-gfx1201"  # the stack's declared order
    assert result.install_lines == wi.install_lines(BASE, "gfx1151-gfx950-gfx1201")
    assert result.install.endswith("/gfx1151-gfx950-gfx1201/requirements.txt")
    # the demo stack's fat build is never the answer for the public URL: two arches are not covered here
    pair = wi.run_which_index(sysfs(tmp_path / "pair", [0, 90500, 120001]), BASE, no_rocminfo, conf)
    assert pair.covering_index == "gfx1151-gfx950-gfx1201"
    only_demo = stacks(tmp_path / "demo-only", gfx950=None, gfx1201=None, demo_fat="gfx950;gfx1201")
    none = wi.run_which_index(sysfs(tmp_path / "pair2", [0, 90500, 120001]), BASE, no_rocminfo, only_demo)
    assert none.covering_index is None and none.configured == ["gfx950", "gfx1201"]


def test_one_arch_without_its_own_index_is_served_by_a_covering_fat_index(tmp_path: Path) -> None:
    conf = stacks(tmp_path / "stacks", gfx1201=None, fat="gfx950;gfx1201")
    result = wi.run_which_index(sysfs(tmp_path / "h", [0, 90500]), BASE, no_rocminfo, conf)
    assert not result.multi_arch and result.covering_index == "gfx950-gfx1201"
    assert "no index of their own" in result.message


def test_bad_or_missing_stack_files_are_named(tmp_path: Path) -> None:
    host = sysfs(tmp_path / "h", [0, 90500])
    bad = stacks(tmp_path / "bad", gfx950=None, broken="gfx950;gfx9999")
    with pytest.raises(RocmBakeError, match=r"Pulumi\.broken\.yaml: rocm-bake:pytorchRocmArch 'gfx950;gfx9999'"):
        wi.run_which_index(host, BASE, no_rocminfo, bad)
    with pytest.raises(RocmBakeError, match="no stacks/Pulumi"):
        wi.run_which_index(host, BASE, no_rocminfo, tmp_path / "nothing")


def test_two_identical_gpus_are_one_arch(tmp_path: Path) -> None:
    result = result_for(sysfs(tmp_path, [0, 120001, 120001]))
    assert len(result.choices) == 1 and not result.multi_arch
    assert result.choices[0].gpus == ["kfd 1", "kfd 2"]


def test_apu_cpu_node_is_ignored(tmp_path: Path) -> None:
    result = result_for(sysfs(tmp_path, [0, 110501]))
    assert [g.gfx for g in result.detection.gpus] == ["gfx1151"]
    assert result.message == "index for this host: gfx1151"


def test_unknown_isa_says_no_compatible_index(tmp_path: Path) -> None:
    result = result_for(sysfs(tmp_path, [0, 130100]))
    (choice,) = result.choices
    assert choice.gpu_arch == "gfx1310" and choice.index_arch is None and choice.install is None
    assert "no compatible index" in choice.reason
    args = argparse.Namespace(sysfs_root=tmp_path, index_base=BASE, json=False)
    assert wi.run(args, rocminfo=no_rocminfo) == 1


@pytest.mark.parametrize(
    "version, expected",
    [(120000, "gfx1201"), (110500, "gfx1151"), (90402, None), (110000, None), (100300, None)],
    ids=["gfx1200", "gfx1150", "gfx942-not-gfx950", "gfx1100-not-gfx1151", "gfx1030"],
)
def test_nearest_only_within_a_family(tmp_path: Path, version: int, expected: str | None) -> None:
    (choice,) = result_for(sysfs(tmp_path, [0, version])).choices
    assert choice.index_arch == expected
    assert not choice.native
    if expected:
        assert "HSA_OVERRIDE_GFX_VERSION" in choice.env and "not a supported configuration" in choice.reason


def test_configured_indexes_are_the_shipped_non_demo_stacks(tmp_path: Path) -> None:
    from rocm_bake.config import STACKS_DIR

    configured = wi.configured_indexes()
    shipped = {p.name[len("Pulumi."):-len(".yaml")] for p in STACKS_DIR.glob("Pulumi.*.yaml")}
    assert all(isinstance(a, ArchSet) for a in configured)
    assert {a.dir_name for a in configured} == {s.removeprefix("fat-") for s in shipped if not s.startswith("demo-")}
    assert ("gfx950", "gfx1201") in [a.arches for a in configured]  # declared order, not sorted
    for (arch,) in (a.arches for a in configured if not a.is_fat):
        assert wi.nearest_compatible(arch, [arch]) is None  # itself is native, not "nearest"
    result = result_for(sysfs(tmp_path, [0, 120500]))
    assert result.choices[0].native == ("gfx1250" in configured)


def test_no_gpu_anywhere(tmp_path: Path) -> None:
    result = result_for(tmp_path)
    assert result.choices == [] and result.detection.source == "none"
    assert result.message.startswith("no AMD GPU found")
    cpu_only = result_for(sysfs(tmp_path / "cpu", [0]))
    assert cpu_only.message.startswith("no AMD GPU found") and cpu_only.detection.source == "kfd"


def test_rocminfo_fallback_when_sysfs_absent(tmp_path: Path) -> None:
    calls: list[int] = []

    def fake() -> str:
        calls.append(1)
        return ROCMINFO_SAMPLE

    result = result_for(tmp_path, rocminfo=fake)
    assert calls == [1] and result.detection.source == "rocminfo"
    assert [(g.gfx, g.marketing_name) for g in result.detection.gpus] == [("gfx1201", "AMD Radeon RX 9070 XT")]
    assert result.choices[0].install.endswith("/gfx1201/requirements.txt")
    # sysfs wins when present: rocminfo is not consulted
    result_for(sysfs(tmp_path / "s", [0, 90500]), rocminfo=fake)
    assert calls == [1]


def test_rocminfo_parser_ignores_cpu_agents_and_reads_each_gpu() -> None:
    cpu_only = ROCMINFO_SAMPLE.split("*******\nAgent 2")[0]
    assert parse_rocminfo(cpu_only) == []
    gpu_block = ROCMINFO_SAMPLE.split("*******\nAgent 2\n*******")[1].replace("*** Done ***\n", "")
    third = "*******\nAgent 3\n*******" + gpu_block.replace("gfx1201", "gfx1151").replace("gfx12-generic", "gfx11-generic")
    two = ROCMINFO_SAMPLE.replace("*** Done ***", third + "*** Done ***")
    assert [(g.gfx, g.node) for g in parse_rocminfo(two)] == [("gfx1201", "agent 2"), ("gfx1151", "agent 3")]


def test_index_base_is_normalised_and_validated(tmp_path: Path) -> None:
    result = result_for(sysfs(tmp_path, [0, 120001]), base="http://127.0.0.1:8081/index/")
    assert "--index-url http://127.0.0.1:8081/index/gfx1201/ " in result.choices[0].install
    with pytest.raises(RocmBakeError, match="--index-base"):
        result_for(tmp_path, base="not a url")


def test_bad_properties_are_clear_errors(tmp_path: Path) -> None:
    root = sysfs(tmp_path, [0])
    bad = root / "sys/class/kfd/kfd/topology/nodes/1"
    bad.mkdir()
    bad.joinpath("properties").write_text("gfx_target_version abc\n")
    with pytest.raises(RocmBakeError, match="nodes/1/properties: gfx_target_version 'abc'"):
        detect_gpus(root, no_rocminfo)


def test_cli_json(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    from rocm_bake.publish import origin

    monkeypatch.setattr(origin, "origin_github_repo", lambda *_: "sbates130272/rocm-bake")  # BASE is its Pages site
    root = sysfs(tmp_path, [0, 90500, 120001])
    assert main(["which-index", "--sysfs-root", str(root), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["multi_arch"] is True and data["covering_index"] == "gfx950-gfx1201"
    assert data["install_lines"] == wi.install_lines(BASE, "gfx950-gfx1201")
    assert [c["install_lines"] for c in data["choices"]] == [wi.install_lines(BASE, "gfx950"),
                                                             wi.install_lines(BASE, "gfx1201")]
    assert [c["devices"] for c in data["choices"]] == [[0], [1]]
    assert "gfx950-gfx1201" in data["configured"]
    mixed = sysfs(tmp_path / "mixed", [0, 120001, 110501])
    assert main(["which-index", "--sysfs-root", str(mixed), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["covering_index"] is None and data["install"] is None
    assert data["message"].startswith("no configured index covers every GPU here")
    assert [(c["gpu_arch"], c["pin"], c["pin_hip"]) for c in data["choices"]] == [
        ("gfx1151", {"ROCR_VISIBLE_DEVICES": "1"}, {"HIP_VISIBLE_DEVICES": "1"}),
        ("gfx1201", {"ROCR_VISIBLE_DEVICES": "0"}, {"HIP_VISIBLE_DEVICES": "0"})]
    assert main(["which-index", "--sysfs-root", str(root), "--index-base", "file:///srv/idx"]) == 0
    out = capsys.readouterr().out
    assert "--index-url file:///srv/idx/gfx950-gfx1201/" in out and "fat-build index" in out


def test_no_publish_target_answers_with_the_placeholder_base(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """No built-in site: with no --index-base, no stack's githubRepo and no GitHub origin, which-index still
    names the index (arch set, directory, extra), prints its lines over the placeholder and says how to give it."""
    from rocm_bake.publish import origin

    root = sysfs(tmp_path, [0, 90500])
    monkeypatch.setattr(origin, "origin_github_repo", lambda *_: None)
    assert main(["which-index", "--sysfs-root", str(root)]) == 0
    out = capsys.readouterr().out
    assert "index gfx950/ (arches gfx950; extra device-gfx950)" in out
    assert ("  pip install --require-hashes --index-url <your index base>/gfx950/ --extra-index-url "
            "https://pypi.org/simple -r <your index base>/gfx950/requirements.txt") in out
    assert "give it with --index-base URL" in out and "rocm-bake:githubRepo" in out
    mixed = sysfs(tmp_path / "mixed", [0, 90500, 120001])
    assert main(["which-index", "--sysfs-root", str(mixed), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["index_base"] == "<your index base>" and "--index-base" in data["base_hint"]
    assert data["install"].startswith("pip install --require-hashes --index-url <your index base>/gfx950-gfx1201/")
    # the stacks' publish settings give the base (before the origin remote)
    conf = stacks(tmp_path / "stacks", gfx950=None)
    (conf / "Pulumi.gfx950.yaml").write_text('config:\n  rocm-bake:githubRepo: team/wheels\n')
    result = wi.run_which_index(root, None, no_rocminfo, conf)
    assert result.index_base == "https://team.github.io/wheels/data/wheels" and result.base_hint is None
    monkeypatch.setattr(origin, "origin_github_repo", lambda *_: "fork/rb")
    assert main(["which-index", "--sysfs-root", str(root)]) == 0
    out = capsys.readouterr().out
    assert "--index-url https://fork.github.io/rb/data/wheels/gfx950/ " in out and "<your index base>" not in out


@pytest.mark.parametrize("base", ["http://wheels.example/idx", "http://10.0.0.5:8081/index"])
def test_plain_http_off_loopback_is_refused(tmp_path: Path, base: str) -> None:
    with pytest.raises(RocmBakeError, match="--index-base: plain http is refused off loopback"):
        result_for(sysfs(tmp_path, [0, 90500]), base=base)
