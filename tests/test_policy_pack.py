"""The policy pack (policy/) on the real engine: each rule refuses its violating program, naming itself.

Each program under tests/policy_programs/ is a tiny Pulumi program declaring
one offending resource with the real types (docker-build's Image, our
dynamic WheelIndex and GitHubRelease), previewed only: nothing is built.
The CLI starts the pack through our Python language host's RunPlugin.

The real stacks pass: gfx950 and gfx1250 preview on the real engine with
the pack; gfx1201, gfx1151 and the fat stack declare the GPU test as a
``command:local:Command``, whose plugin cannot be built here (docs/engines.md),
so the pack's own policy functions judge their resources as
``rocm-bake plan`` declares them under Pulumi's mock runtime. The demo
stacks pass on the real engine in tests/test_lifecycle.py (preview and up
both run the pack).
"""

from __future__ import annotations

import json
import secrets
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from rocm_bake.checkout import local_defaults
from tests.engine_fixtures import ROOT, PulumiProject, copy_components, copy_project, engine, project_env

sys.path.insert(0, str(ROOT / "policy"))
import arch_policies  # noqa: E402  (policy/arch_policies.py: the pack's own policies)

from rocm_bake.arch_rules import RULES  # noqa: E402

POLICY_PACK = ROOT / "policy"
PROGRAMS = ROOT / "tests" / "policy_programs"
#: program -> (the policy that must refuse it, a fragment of its message, other policies it also breaks)
REFUSED = {
    "latest-tag": ("arch-scoped-tags", "'127.0.0.1:5000/rocm-bake/torch:latest' refused for gfx1201", set()),
    "shared-cache": ("per-arch-cache-refs", "torch's cache is 127.0.0.1:5000/rocm-bake/cache:torch-gfx1201", set()),
    "prebuild-kernels": ("prebuild-kernels", "PREBUILD_KERNELS=2 refused for gfx1201", set()),
    "rdna-flags": ("arch-build-args", "torch-gfx1201: USE_ROCM_CK_SDPA_GFX12='0', but stack gfx1201 (gfx1201) builds "
                   "with USE_ROCM_CK_SDPA_GFX12='1'", set()),
    "foreign-arch": ("own-arches-only", "index-gfx950 names gfx950 (in name), which is not an arch of stack gfx1201",
                     set()),
    "other-release": ("own-release-only", "publishes gfx950's index, not stack gfx1201's (gfx1201)",
                      {"own-arches-only"}),
}
ENGINE_STACKS = ("gfx950", "gfx1250")
MOCK_STACKS = ("gfx1201", "gfx1151", "fat-gfx950-gfx1201")


def preview_with_pack(proj: PulumiProject, stack: str) -> tuple[int, str]:
    """``pulumi preview --policy-pack policy``; a host that cannot start a Python pack fails naming why."""
    result = proj.run("preview", "--policy-pack", str(POLICY_PACK), stack=stack, check=False)
    output = result.stdout + result.stderr
    if "RunPlugin not implemented" in output:
        pytest.fail("the Python language host (tools/pulumi-language-python) does not implement RunPlugin, which "
                    "starts Python policy packs: run `make setup` on a checkout whose host has it")
    return result.returncode, output


def named_policies(output: str) -> set[str]:
    return {rule.name for rule in RULES if f"[mandatory]  {rule.name} " in output}


#: This module's fixtures that run the real engine (tests/conftest.py marks their tests ``services``).
SERVICE_FIXTURES = {"work", "real_project"}


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    engine("pulumi")
    return tmp_path_factory.mktemp("policy")


def program_copy(name: str, dest: Path) -> Path:
    """The program with an absolute venv (the copy lives outside the repository)."""
    shutil.copytree(PROGRAMS / name, dest)
    copy_components(dest)
    project = dest / "Pulumi.yaml"
    project.write_text(project.read_text().replace("virtualenv: ../../../.venv", f"virtualenv: {ROOT / '.venv'}"))
    return dest


def test_every_rule_has_a_violating_program() -> None:
    assert {policy for policy, _, _ in REFUSED.values()} == {rule.name for rule in RULES}
    assert {p.name for p in PROGRAMS.iterdir() if p.is_dir()} == set(REFUSED)


@pytest.mark.parametrize("program", sorted(REFUSED))
def test_the_pack_refuses_each_violating_program_naming_its_policy(work: Path, program: str) -> None:
    policy, message, also = REFUSED[program]
    state = work / f"state-{program}"
    state.mkdir()
    proj = PulumiProject(program_copy(program, work / program), state, project_env(state, None, work))
    proj.run("stack", "init", "gfx1201", "--secrets-provider", "passphrase")
    code, output = preview_with_pack(proj, "gfx1201")
    assert code != 0, output
    assert "rocm-bake-arch-rules@v0.1.0" in output, output
    assert named_policies(output) == {policy, *also}, output
    assert message in output, output


@pytest.fixture(scope="module")
def real_project(work: Path) -> Iterator[PulumiProject]:
    state = work / "state-real"
    state.mkdir()
    proj = PulumiProject(copy_project(work / "real"), state, project_env(state, None, work))
    yield proj


@pytest.mark.parametrize("stack", ENGINE_STACKS)
def test_real_stacks_pass_the_pack_on_the_real_engine(real_project: PulumiProject, stack: str) -> None:
    real_project.run("stack", "init", stack, "--secrets-provider", "passphrase")
    code, output = preview_with_pack(real_project, stack)
    assert code == 0, output
    assert "✅ rocm-bake-arch-rules@v0.1.0" in output, output
    assert "[mandatory]" not in output


class Violations(list):
    def __call__(self, message: str, urn: str | None = None) -> None:
        self.append(message)


def judge(stack: str, resources: list[dict], config: dict) -> list[tuple[str, str, str]]:
    """The pack's policies over planned resources, the stack's config given as the engine gives it."""
    from pulumi_policy import PolicyResourceOptions, ResourceValidationArgs
    from pulumi_policy.proxy import unknown_checking_proxy

    arch_policies.configure_stack(stack, {k: v if isinstance(v, str) else json.dumps(v) for k, v in config.items()})
    found = []
    for res in resources:
        for policy in arch_policies.POLICIES:
            report = Violations()
            args = ResourceValidationArgs(res["type"], unknown_checking_proxy(res["inputs"]),
                                          f"urn:pulumi:{stack}::rocm-bake::{res['type']}::{res['name']}", res["name"],
                                          PolicyResourceOptions(False, [], None, [], None, [], None), None)
            policy.validate(args, report)
            found += [(policy.name, res["name"], message) for message in report]
    return found


@pytest.fixture(scope="module")
def planned() -> dict[str, dict]:
    from rocm_bake.commands.plan import plans

    return {p["stack"]: p for p in plans([*MOCK_STACKS, *ENGINE_STACKS], {})}


@pytest.mark.parametrize("stack", [*MOCK_STACKS, *ENGINE_STACKS])
def test_every_real_stack_passes_the_packs_policies(planned: dict[str, dict], stack: str) -> None:
    from rocm_bake.config import read_stack_file

    resources = planned[stack]["resources"]
    assert any(r["type"] == "docker-build:index:Image" for r in resources)
    assert judge(stack, resources, read_stack_file(stack)) == []


def test_the_packs_policies_catch_a_stack_judged_by_another_arch(planned: dict[str, dict]) -> None:
    """The mock evaluation is not vacuous: gfx1201's resources under gfx950's config break the rules."""
    found = judge("gfx950", planned["gfx1201"]["resources"], {"rocm-bake:pytorchRocmArch": "gfx950"})
    # plan declares what `pulumi up` in this checkout would: its own registry when it has a record
    registry = local_defaults(ROOT).get("rocm-bake:registry", "127.0.0.1:5000")
    assert ("arch-scoped-tags", "torch-gfx1201",
            f"torch-gfx1201: image ref '{registry}/rocm-bake/torch:gfx1201-rocm10.1.0' is tagged for gfx1201, "
            "not gfx950: refusing to put gfx1201 wheels in the gfx950 index") in found
    assert {name for name, _, _ in found} >= {"arch-scoped-tags", "per-arch-cache-refs", "own-arches-only"}


def test_a_bad_config_is_one_violation_not_one_per_policy_and_resource(planned: dict[str, dict]) -> None:
    found = judge("gfx950", planned["gfx950"]["resources"], {"rocm-bake:registy": "r.example:5000"})
    assert len(found) == 1, f"the config error must be said once, not {len(found)} times (every policy on every " \
                            f"resource): {found[:2]}"
    assert "'rocm-bake:registy'; did you mean rocm-bake:registry?" in found[0][2]


def test_a_pack_started_without_a_stack_refuses_naming_why(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PULUMI_STACK", raising=False)
    monkeypatch.setattr(arch_policies, "_stack", {})
    report = Violations()
    from pulumi_policy import PolicyResourceOptions, ResourceValidationArgs

    args = ResourceValidationArgs("docker-build:index:Image", {}, "urn:x", "x",
                                  PolicyResourceOptions(False, [], None, [], None, [], None), None)
    arch_policies.POLICIES[0].validate(args, report)
    assert report == ["the policy pack was started without PULUMI_STACK: run it through "
                      "`pulumi preview|up --policy-pack policy`, whose language host sets it"]
