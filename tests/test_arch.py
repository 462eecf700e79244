"""Truth tables for the architecture policy (gfx1250 is not RDNA, etc.)."""

import json
import pickle
import subprocess
import sys

import pytest

from rocm_bake.arch import arch_policy, check_prebuild_kernels, is_rdna4
from rocm_bake.archset import Arch, ArchError, ArchSet
from rocm_bake.errors import RocmBakeError
from rocm_bake.manifests import load_fleet


@pytest.mark.parametrize(
    ("value", "rdna4"),
    [
        ("gfx1201", True),
        ("gfx1200", True),
        ("gfx1250", False),
        ("gfx1251", False),
        ("gfx1151", False),
        ("gfx950", False),
        ("gfx90a", False),
        ("gfx950;gfx1201", True),
        ("gfx1250;gfx1201", True),
        ("gfx1250;gfx1251", False),
    ],
)
def test_is_rdna4_strips_gfx125_first(value, rdna4):
    assert is_rdna4(ArchSet(value)) is rdna4
    assert arch_policy(ArchSet(value)).use_ck_sdpa_gfx12 is rdna4


@pytest.mark.parametrize(
    ("arch", "coexec"),
    [("gfx950", True), ("gfx1250", True), ("gfx1251", False), ("gfx1201", False), ("gfx1151", False), ("gfx942", False)],
)
def test_sched_coexec_only_gfx950_and_gfx1250(arch, coexec):
    assert arch_policy(ArchSet(arch)).sched_coexec is coexec


def test_fat_build_coexec_needs_every_arch():
    assert arch_policy(ArchSet("gfx950;gfx1250")).sched_coexec is True
    assert arch_policy(ArchSet("gfx950;gfx1201")).sched_coexec is False


@pytest.mark.parametrize("arch", ["gfx950", "gfx1201", "gfx1151", "gfx1250", "gfx1251"])
def test_prebuild_default_is_zero_everywhere(arch):
    assert arch_policy(ArchSet(arch)).prebuild_kernels == 0


@pytest.mark.parametrize("arch", ["gfx950", "gfx942", "gfx90a"])
def test_prebuild_two_allowed_on_cdna(arch):
    assert check_prebuild_kernels([Arch(arch)], 2) == 2


@pytest.mark.parametrize("arch", ["gfx1201", "gfx1151", "gfx1250", "gfx1251", "gfx1100"])
def test_prebuild_two_refused_off_cdna_naming_arch(arch):
    with pytest.raises(RocmBakeError, match=rf"{arch}.*no wheel"):
        arch_policy(ArchSet(arch), prebuild_kernels=2)


def test_prebuild_pin_must_hold_for_every_arch_of_a_fat_build():
    with pytest.raises(RocmBakeError, match="gfx1201"):
        arch_policy(ArchSet("gfx950;gfx1201"), prebuild_kernels=2)
    assert arch_policy(ArchSet("gfx950;gfx942"), prebuild_kernels=2).prebuild_kernels == 2
    assert arch_policy(ArchSet("gfx950;gfx1201"), prebuild_kernels=1).prebuild_kernels == 1


def test_prebuild_unknown_level_refused():
    with pytest.raises(RocmBakeError, match="PREBUILD_KERNELS=7"):
        check_prebuild_kernels([Arch("gfx950")], 7)


@pytest.mark.parametrize(
    ("bad", "words"),
    [("gfx95", "malformed"), ("GFX950", "did you mean gfx950"), ("sm_90", "malformed"), ("", "empty"),
     ("gfx951", "unknown"), (" gfx950", "malformed")],
)
def test_bad_arch_names(bad, words):
    with pytest.raises(RocmBakeError, match=words):
        Arch(bad)


def test_arch_set_refuses_duplicates_and_empty_parts():
    assert ArchSet("gfx950;gfx1201").arches == ("gfx950", "gfx1201")
    with pytest.raises(RocmBakeError, match="more than once"):
        ArchSet("gfx950;gfx950")
    with pytest.raises(RocmBakeError, match="empty"):
        ArchSet("gfx950;")


def test_rocm_prune_keep_and_fleet_coverage():
    assert arch_policy(ArchSet("gfx1151")).rocm_prune_keep == ["-gfx1151"]
    fleet = load_fleet()
    strix = fleet.coverage(ArchSet("gfx1151"))
    assert strix.fleet_nodes == ["snoc-strix"] and strix.gpu_testable
    for arch in ("gfx950", "gfx1250"):
        assert fleet.coverage(ArchSet(arch)).model_dump() == {"fleet_nodes": [], "gpu_testable": False}


def test_fat_build_gpu_testable_only_if_every_arch_has_a_node():
    fleet = load_fleet()
    assert fleet.coverage(ArchSet("gfx1151;gfx1201")).gpu_testable is True
    assert fleet.coverage(ArchSet("gfx950;gfx1201")).gpu_testable is False
    assert fleet.coverage(ArchSet("gfx950;gfx1201")).fleet_nodes == ["snoc-navi"]


def test_the_policy_imports_no_manifest():
    """The arch <-> manifests circle is gone: fleet lookups live with the fleet."""
    code = "import sys, rocm_bake.arch; print('rocm_bake.manifests' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout.strip() == "False"


def test_a_parsed_value_is_proof_and_stays_a_string():
    rocm = ArchSet("gfx950;gfx1201")
    assert isinstance(rocm, str) and rocm == "gfx950;gfx1201" and json.dumps(rocm) == '"gfx950;gfx1201"'
    assert rocm.arches == ("gfx950", "gfx1201") and all(type(a) is Arch for a in rocm.arches)
    assert (rocm.tag_suffix, rocm.dir_name, rocm.extra, rocm.is_fat) == (
        "gfx950_gfx1201", "gfx950-gfx1201", "device-gfx950-gfx1201", True)
    assert ArchSet(rocm) is rocm and Arch(rocm.arches[0]) == "gfx950"
    assert ArchSet("gfx950-gfx1201") == rocm  # the directory spelling parses to the same value
    assert pickle.loads(pickle.dumps(rocm)) == rocm and type(pickle.loads(pickle.dumps(rocm))) is ArchSet
    with pytest.raises(ArchError, match="malformed") as info:
        ArchSet("gfx950;GFX1201")
    assert isinstance(info.value, RocmBakeError) and isinstance(info.value, ValueError)


def test_a_parsed_value_is_not_validated_again(monkeypatch):
    """Parse once at the edge: functions handed an Arch/ArchSet do not re-check it."""
    rocm = ArchSet("gfx950;gfx1201")
    arch = Arch("gfx1151")
    fleet = load_fleet()  # the manifest's own arches are parsed at its edge, here
    calls = []
    for kind in (Arch, ArchSet):
        original = kind.__dict__["_normalised"].__func__
        monkeypatch.setattr(kind, "_normalised", classmethod(lambda cls, v, o=original: (calls.append(v), o(cls, v))[1]))
    policy = arch_policy(rocm, prebuild_kernels=1)
    assert fleet.coverage(policy.arch).fleet_nodes == ["snoc-navi"] and fleet.nodes_for(arch) == ["snoc-strix"]
    assert calls == []
    ArchSet("gfx950")  # the edge parses a plain string once
    assert calls == ["gfx950", "gfx950"]  # the value, then its one part


def test_long_hostile_values_are_not_echoed_whole():
    with pytest.raises(ArchError) as info:
        Arch("x" * 100_000)
    assert len(str(info.value)) < 400
