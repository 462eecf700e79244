"""The arch rules the policy pack enforces (rocm_bake.arch_rules), without the engine.

tests/test_policy_pack.py runs the pack on the real engine; these pin each
rule's edges: what passes, what is refused and with which words.
"""

from __future__ import annotations

import json
from dataclasses import asdict

import pytest

from rocm_bake.arch_rules import UNKNOWN, Declared, check_cache, check_own_arches
from rocm_bake.arch_rules import check_arch_build_args, check_own_release, check_prebuild, check_tags, stack_config
from rocm_bake.checkout import Checkout
from rocm_bake.errors import RocmBakeError
from rocm_bake.resource_types import FETCHED_WHEELS, GITHUB_RELEASE, IMAGE, WHEEL_INDEX

REG = "127.0.0.1:5000/rocm-bake"


@pytest.fixture(autouse=True)
def outside_any_checkout(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The pack runs in the project's directory: here one with no checkout record and no make exports."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("ROCM_BAKE_REGISTRY", raising=False)
    monkeypatch.delenv("ROCM_BAKE_BUILDER", raising=False)


def config(stack: str = "gfx950", **keys: str):
    return stack_config(stack, {f"rocm-bake:{k}": v for k, v in keys.items()}, frozenset())


def image(name: str, dockerfile: str, **props) -> Declared:
    return Declared(IMAGE, name, {"dockerfile": {"location": f"dockerfiles/{dockerfile}.Dockerfile"}, **props})


def cache(ref) -> dict:
    return {"cacheFrom": [{"registry": {"ref": ref}}], "cacheTo": [{"registry": {"ref": ref, "mode": "max"}}]}


def test_tags_are_the_stacks_arch_tag_never_latest() -> None:
    cfg = config()
    assert check_tags(cfg, image("torch-gfx950", "torch", tags=[f"{REG}/torch:gfx950-rocm10.1.0"], push=True)) == []
    assert check_tags(cfg, image("t", "torch", tags=[f"{REG}/torch:latest"])) == [
        f"t: image ref '{REG}/torch:latest' refused for gfx950: :latest is written by whichever architecture was "
        "pushed last, with the wheels inside indistinguishable afterwards"]
    assert check_tags(cfg, image("t", "torch", tags=[], push=True)) == [
        "t is pushed with no tag, which the registry reads as :latest; tag it gfx950-rocm10.1.0"]
    assert check_tags(cfg, image("t", "torch", tags=[f"{REG}/torch:gfx950-rocm10.0.0"])) == [
        f"t: '{REG}/torch:gfx950-rocm10.0.0' is tagged 'gfx950-rocm10.0.0', not this stack's 'gfx950-rocm10.1.0'"]
    assert "is tagged for gfx1201, not gfx950" in check_tags(cfg, image("t", "torch",
                                                                        tags=[f"{REG}/torch:gfx1201-rocm10.1.0"]))[0]
    assert check_tags(cfg, image("t", "torch", tags=UNKNOWN)) == []  # preview: judged at up


def test_the_wheel_fetch_reads_only_arch_tags() -> None:
    fetch = Declared(FETCHED_WHEELS.token, "wheels-gfx950", {"arch": "gfx950", "image_refs": [f"{REG}/torch:latest", UNKNOWN]})
    assert check_tags(config(), fetch) == [
        f"wheels-gfx950: image ref '{REG}/torch:latest' refused for gfx950: :latest is written by whichever "
        "architecture was pushed last, with the wheels inside indistinguishable afterwards"]


def test_cache_refs_are_per_arch_except_triton_wheels_shared_one() -> None:
    cfg = config()
    assert check_cache(cfg, image("torch-gfx950", "torch", **cache(f"{REG}/cache:torch-gfx950"))) == []
    assert check_cache(cfg, image("triton-wheel-gfx950", "triton-wheel",
                                  **cache(f"{REG}/cache:triton-wheel-shared"))) == []
    assert check_cache(cfg, image("tw", "triton-wheel", **cache(f"{REG}/cache:triton-wheel-gfx950")))[0] == (
        f"tw cacheFrom '{REG}/cache:triton-wheel-gfx950': triton-wheel's cache is {REG}/cache:triton-wheel-shared "
        "(the ref every arch shares: it compiles no device code)")
    assert check_cache(cfg, image("t", "torch", **cache(f"{REG}/cache:torch-shared")))[1] == (
        f"t cacheTo '{REG}/cache:torch-shared': torch's cache is {REG}/cache:torch-gfx950 "
        "(this stack's CACHE_ARCH (gfx950) ref)")
    assert check_cache(cfg, image("t", "torch", **cache(UNKNOWN))) == []


def test_cache_scope_follows_cache_arch_and_a_raw_or_unknown_target_is_refused() -> None:
    cfg = config("gfx1151", cacheArch="gfx1151-strix")
    assert check_cache(cfg, image("t", "torch", **cache(f"{REG}/cache:torch-gfx1151-strix"))) == []
    assert "torch's cache is 127.0.0.1:5000/rocm-bake/cache:torch-gfx1151-strix" in check_cache(
        cfg, image("t", "torch", **cache(f"{REG}/cache:torch-gfx1151")))[0]
    raw = image("t", "torch", cacheTo=[{"raw": "type=local,dest=/tmp/c"}])
    assert check_cache(cfg, raw) == [
        "t cacheTo: {'raw': 'type=local,dest=/tmp/c'} is not a registry cache ref; torch's is "
        f"{REG}/cache:torch-gfx1151-strix"]
    assert check_cache(cfg, image("x", "other", **cache(f"{REG}/cache:x"))) == [
        "x builds dockerfiles/other.Dockerfile, which is no target of manifests/targets.yml: which cache ref it "
        "may use is unknown"]


@pytest.mark.parametrize("scope", ["shared", "strix", "gfx1201", "gfx11510"])
def test_a_cache_scope_that_another_arch_could_share_is_refused(scope: str) -> None:
    """Two arch stacks with ``cacheArch: shared`` would meet on one device-code ref with the ref rule satisfied."""
    cfg = config("gfx1151", cacheArch=scope)
    ref = f"{REG}/cache:torch-{scope}"
    assert check_cache(cfg, image("torch-gfx1151", "torch", **cache(ref))) == [
        f"torch-gfx1151: rocm-bake:cacheArch {scope!r} is not stack gfx1151's own cache scope: device code is "
        f"cached per arch set, so it must be 'gfx1151' or start with 'gfx1151-' (another arch's stack could use "
        f"{scope!r} too)"]
    shared_ok = image("triton-wheel-gfx1151", "triton-wheel", **cache(f"{REG}/cache:triton-wheel-shared"))
    assert check_cache(cfg, shared_ok) == []  # no device code: the one shared ref stays right


def test_images_pushed_through_exports_are_judged_by_every_name() -> None:
    cfg = config()
    latest = {"registry": {"names": [f"{REG}/torch:latest"]}}
    assert check_tags(cfg, image("t", "torch", tags=[], exports=[latest])) == [
        f"t: image ref '{REG}/torch:latest' refused for gfx950: :latest is written by whichever architecture was "
        "pushed last, with the wheels inside indistinguishable afterwards"]
    untagged = {"image": {"names": [f"{REG}/torch"], "push": True}}
    assert "has no tag, which means :latest" in check_tags(cfg, image("t", "torch", exports=[untagged]))[0]
    nameless = {"registry": {}}
    assert check_tags(cfg, image("t", "torch", tags=[], exports=[nameless])) == [
        "t is pushed with no tag, which the registry reads as :latest; tag it gfx950-rocm10.1.0"]
    own = {"registry": {"names": [f"{REG}/torch:gfx950-rocm10.1.0"]}}
    assert check_tags(cfg, image("t", "torch", tags=[], exports=[own])) == []
    assert check_tags(cfg, image("t", "torch", tags=[], exports=[{"registry": {"names": UNKNOWN}}])) == []


@pytest.mark.parametrize("stack, args, want", [
    ("gfx1250", {"USE_ROCM_CK_SDPA_GFX12": "1"},
     ["t: USE_ROCM_CK_SDPA_GFX12='1', but stack gfx1250 (gfx1250) builds with USE_ROCM_CK_SDPA_GFX12='0'"]),
    ("gfx1201", {"USE_ROCM_CK_SDPA_GFX12": "0"},
     ["t: USE_ROCM_CK_SDPA_GFX12='0', but stack gfx1201 (gfx1201) builds with USE_ROCM_CK_SDPA_GFX12='1'"]),
    ("gfx1201", {"AMDGPU_SCHED_STRATEGY": "coexec"},
     ["t: AMDGPU_SCHED_STRATEGY='coexec', but stack gfx1201 (gfx1201) builds with AMDGPU_SCHED_STRATEGY=''"]),
    ("gfx950", {"PYTORCH_ROCM_ARCH": "gfx1201", "CACHE_ARCH": "gfx950"},
     ["t: PYTORCH_ROCM_ARCH='gfx1201', but stack gfx950 (gfx950) builds with PYTORCH_ROCM_ARCH='gfx950'"]),
    ("gfx1250", {"USE_ROCM_CK_SDPA_GFX12": "0", "AMDGPU_SCHED_STRATEGY": "coexec", "ROCM_PRUNE_KEEP": "-gfx1250"}, []),
    ("gfx1250", {"USE_ROCM_CK_SDPA_GFX12": UNKNOWN}, []),
])
def test_arch_decided_build_args_are_the_stacks_own(stack: str, args: dict, want: list[str]) -> None:
    assert check_arch_build_args(config(stack), image("t", "torch", buildArgs=args)) == want


def test_an_image_without_device_code_is_not_judged_by_arch_args() -> None:
    assert check_arch_build_args(config("gfx1250"), image("t", "triton-wheel", buildArgs={"ROCM_VERSION": "x"})) == []


@pytest.mark.parametrize(("stack", "keys", "args", "want"), [
    ("gfx1201", {}, {"PYTORCH_ROCM_ARCH": "gfx1201", "PREBUILD_KERNELS": "0"}, []),
    ("gfx1201", {}, {"PYTORCH_ROCM_ARCH": "gfx1201", "PREBUILD_KERNELS": "1"},
     ["a: PREBUILD_KERNELS=1, but stack gfx1201 has no pin (0 is the default everywhere) (rocm-bake:prebuildKernels)"]),
    ("gfx950", {"prebuildKernels": "2"}, {"PYTORCH_ROCM_ARCH": "gfx950", "PREBUILD_KERNELS": "2"}, []),
    ("gfx950", {"prebuildKernels": "2"}, {"PYTORCH_ROCM_ARCH": "gfx950", "PREBUILD_KERNELS": "0"},
     ["a: PREBUILD_KERNELS=0, but stack gfx950 has the pin 2 (rocm-bake:prebuildKernels)"]),
    ("fat", {"pytorchRocmArch": "gfx950;gfx1201"}, {"PYTORCH_ROCM_ARCH": "gfx950;gfx1201", "PREBUILD_KERNELS": "2"},
     ["a: PREBUILD_KERNELS=2 refused for gfx1201: level 2 produces no wheel on non-CDNA arches (6 of 68 AITER JIT "
      "modules carry CDNA-only code and setup.py treats the failure as fatal); use 0 (the default)"]),
    ("gfx950", {}, {"PREBUILD_KERNELS": "lots"}, ["a: PREBUILD_KERNELS='lots' is not a level AITER knows (0, 1 or 2)"]),
    ("gfx950", {}, {"PREBUILD_KERNELS": UNKNOWN}, []),
])
def test_prebuild_kernels_is_0_unless_pinned_and_2_only_on_cdna(stack, keys, args, want) -> None:
    assert check_prebuild(config(stack, **keys), image("a", "amd_aiter", buildArgs=args)) == want


def test_resources_name_only_their_stacks_arches() -> None:
    fat = config("fat", pytorchRocmArch="gfx950;gfx1201")
    both = image("torch-gfx950_gfx1201", "torch", tags=[f"{REG}/torch:gfx950_gfx1201-rocm10.1.0"],
                 buildArgs={"ROCM_PRUNE_KEEP": "-gfx950 -gfx1201"})
    assert check_own_arches(fat, both) == []
    assert check_own_arches(config(), both) == [
        "torch-gfx950_gfx1201 names gfx1201 (in name), which is not an arch of stack gfx950 (gfx950)"]
    index = Declared(WHEEL_INDEX.token, "index", {"arch": "gfx950", "wheels_dir": "dist/wheels/gfx1151",
                                        "__provider": "gfx1201 in a pickled blob is no input"})
    assert check_own_arches(config(), index) == [
        "index names gfx1151 (in wheels_dir), which is not an arch of stack gfx950 (gfx950)"]
    assert check_own_arches(config(), Declared("pulumi:pulumi:Stack", "rocm-bake-gfx1201", {})) == []


def release(**props) -> Declared:
    base = {"arch": "gfx950", "repo": "sbates130272/rocm-bake", "rocm_version": "10.1.0", "dist": "dist",
            "api_url": "https://api.github.com", "tag": "wheels-gfx950-rocm10.1.0"}
    return Declared(GITHUB_RELEASE.token, "publish-release", {**base, **props})


def test_a_stack_publishes_only_its_own_release() -> None:
    on = config(publish="true", githubRepo="sbates130272/rocm-bake")  # no default target: named
    assert check_own_release(on, release()) == []
    assert check_own_release(config(), release()) == [
        "publish-release publishes, but stack gfx950 has rocm-bake:publish false (publishing is a separate decision)"]
    assert check_own_release(on, release(arch="gfx1201", tag=None)) == [
        "publish-release publishes gfx1201's index, not stack gfx950's (gfx950)"]
    assert check_own_release(on, release(repo="someone/else")) == [
        "publish-release repo 'someone/else' is not this stack's 'sbates130272/rocm-bake' (rocm-bake:githubRepo)"]
    assert check_own_release(on, release(tag="wheels-gfx950-rocm10.0.0")) == [
        "publish-release tag 'wheels-gfx950-rocm10.0.0' is not this stack's 'wheels-gfx950-rocm10.1.0' "
        "(its own release)"]
    fat = config("fat", pytorchRocmArch="gfx950;gfx1201", publish="true", githubRepo="sbates130272/rocm-bake")
    assert check_own_release(fat, release(arch="gfx950;gfx1201", tag="wheels-gfx950-gfx1201-rocm10.1.0")) == []
    assert check_own_release(on, Declared(WHEEL_INDEX.token, "index-gfx950", {"arch": "gfx950", "dist": "dist"})) == []


def test_the_stack_config_is_parsed_once_with_secrets_dropped_unread() -> None:
    cfg = stack_config("gfx950", {"rocm-bake:githubToken": "ghp_never_kept", "rocm-bake:other": "x"},
                       frozenset({"rocm-bake:other"}))
    assert cfg.github_token is None and cfg.pytorch_rocm_arch == "gfx950"
    with pytest.raises(RocmBakeError, match=r"rocm-bake:prebuildKernels: PREBUILD_KERNELS=2 refused for gfx1201"):
        stack_config("gfx1201", {"rocm-bake:prebuildKernels": "2"}, frozenset())


def test_the_pack_takes_the_checkouts_registry_as_the_program_does(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A stack file that names no registry means this checkout's own (its record, or make's export), as in
    components/stack.py's read_config: the pack must expect the refs the program declared, not port 5000."""
    (tmp_path / ".rocm-bake").mkdir()
    (tmp_path / ".rocm-bake" / "checkout.json").write_text(json.dumps(asdict(Checkout("0a1b2c3d", 17359, "rocm-bake-0a1b2c3d"))))
    own = "127.0.0.1:17359/rocm-bake"
    assert check_cache(config(), image("torch-gfx950", "torch", **cache(f"{own}/cache:torch-gfx950"))) == []
    refused = check_cache(config(), image("t", "torch", **cache(f"{REG}/cache:torch-gfx950")))
    assert refused and f"torch's cache is {own}/cache:torch-gfx950" in refused[0], refused
    monkeypatch.setenv("ROCM_BAKE_REGISTRY", "127.0.0.1:24001")  # what make exported for this run wins
    assert check_cache(config(), image("t", "torch", **cache("127.0.0.1:24001/rocm-bake/cache:torch-gfx950"))) == []
    # a stack file that names the registry wins over both
    assert check_cache(config(registry="reg.example:443"),
                       image("t", "torch", **cache("reg.example:443/rocm-bake/cache:torch-gfx950"))) == []
