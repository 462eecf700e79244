"""The GitHub workflows, by running what they run: each step's script or make target, in the environment the
workflow gives it (its secrets as environment variables with test values), against loopback services.

* the secret check (``check_secrets.py``) names what is missing and prints no secret's value;
* the two-arch index job's steps build real test wheels, check their code objects, build both indexes into one
  dist and install each (``make wheel-index-check``);
* the deploy's stack facts (``stack_publish.py``), its build-farm registration (``register_builder.py``, against
  a buildkitd that demands mutual TLS, in a private ``BUILDX_CONFIG``) and its ``pulumi up``
  (``pulumi_up.sh``, against an S3 bucket served by versitygw, with the CLI ``make setup`` built);
* the preview's CLI step (``use_built_pulumi.sh``) and its look into the team's state (``stack_in_state.py``,
  against the same bucket, which it leaves byte for byte as it was).

What a script cannot express stays a structural check of the YAML, each saying why: which events start which
job, permissions, concurrency, which step is gated on which output, the inputs of the one action that is not
ours (pulumi/actions for the preview and its PR comment). actionlint runs for real: ``make setup`` builds it
from its Go module (``tools/actionlint``) into ``.tools/bin``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from rocm_bake.manifests import load_targets
from rocm_bake.offload import wheel_targets
from tests.fake_github import FakeGitHub
from tests.engine_fixtures import ROOT, STATE_BUCKET, TOOLS_BIN, copy_project, engine, project_env, start_state_bucket

import state_server  # noqa: E402  (tools/state_server.py, on sys.path through engine_fixtures: make state-server's code)

WORKFLOWS = ROOT / ".github" / "workflows"
SCRIPTS = ROOT / ".github" / "scripts"
ACTIONLINT_VERSION = "1.7.12"  # tools/actionlint/go.mod pins github.com/rhysd/actionlint at this version

sys.path.insert(0, str(SCRIPTS))
import check_secrets  # noqa: E402  (.github/scripts: the workflows' own code)
import register_builder  # noqa: E402
import stack_publish  # noqa: E402


def load(name: str) -> dict[str, Any]:
    data = yaml.safe_load((WORKFLOWS / name).read_text())
    if True in data:  # YAML 1.1 reads the key `on` as a boolean
        data["on"] = data.pop(True)
    return data


def all_steps() -> list[tuple[str, str, dict[str, Any]]]:
    """(workflow, job, step) for every step of both workflows."""
    return [(name, job_name, step) for name in ("ci.yml", "deploy.yml")
            for job_name, job in load(name)["jobs"].items() for step in job["steps"]]


def step_with_id(job: dict[str, Any], step_id: str) -> dict[str, Any]:
    (found,) = [s for s in job["steps"] if s.get("id") == step_id]
    return found


def uses(job: dict[str, Any], action: str) -> dict[str, Any]:
    (found,) = [s for s in job["steps"] if str(s.get("uses", "")).startswith(action + "@")]
    return found


def strings(node: Any) -> list[str]:
    """Every string value in a loaded workflow (comments are gone)."""
    if isinstance(node, dict):
        return [x for k, v in node.items() for x in strings(k) + strings(v)]
    if isinstance(node, list):
        return [x for v in node for x in strings(v)]
    return [node] if isinstance(node, str) else []


def step_run(argv: list[str], env: dict[str, str], tmp: Path, cwd: Path = ROOT,
             timeout: float = 600) -> tuple[subprocess.CompletedProcess[str], str, str]:
    """Run a step's command as the runner would: (process, $GITHUB_OUTPUT text, $GITHUB_STEP_SUMMARY text).

    ``env`` is the step's whole environment beyond PATH/HOME, so nothing of this machine's leaks in.
    """
    out, summary = tmp / "github-output", tmp / "github-summary"
    out.write_text(""), summary.write_text("")
    full = {"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", "/root"), "GITHUB_OUTPUT": str(out),
            "GITHUB_STEP_SUMMARY": str(summary), **env}
    done = subprocess.run(argv, cwd=cwd, env=full, capture_output=True, text=True, timeout=timeout)
    return done, out.read_text(), summary.read_text()


# ------------------------------------------------------------- actionlint


def actionlint(*paths: Path | str) -> subprocess.CompletedProcess[str]:
    """``.tools/bin/actionlint`` (built by ``make setup`` from its Go module) on these files.

    shellcheck and pyflakes integration is off: a machine with shellcheck on
    PATH and one without would otherwise judge the same workflow differently.
    """
    binary = engine("actionlint")
    return subprocess.run([str(binary), "-no-color", "-shellcheck=", "-pyflakes=", *map(str, paths)],
                          capture_output=True, text=True, timeout=120)


@pytest.mark.services
def test_actionlint_is_the_pinned_go_build() -> None:
    version = subprocess.run([str(engine("actionlint")), "-version"], capture_output=True, text=True, timeout=60)
    assert version.returncode == 0, version.stderr
    assert version.stdout.splitlines()[0] == ACTIONLINT_VERSION, version.stdout


@pytest.mark.services
def test_workflows_pass_actionlint() -> None:
    files = sorted(WORKFLOWS.glob("*.yml"))
    assert [f.name for f in files] == ["ci.yml", "deploy.yml"]
    done = actionlint(*files)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout == "", done.stdout


@pytest.mark.services
def test_actionlint_really_catches_mistakes(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yml"
    bad.write_text(
        "on: pull_request\njobs:\n  a:\n    runs-on: ubuntu-latest\n    needs: [nope]\n"
        "    steps:\n      - run: echo ${{ matrix.missing }}\n"
    )
    done = actionlint(bad)
    assert done.returncode == 1, done.stdout + done.stderr
    assert 'needs job "nope" which does not exist' in done.stdout, done.stdout
    assert 'property "missing" is not defined' in done.stdout, done.stdout


# ------------------------------------------------------------ expressions

CONTEXTS = {"github", "env", "vars", "job", "jobs", "steps", "runner", "secrets", "strategy",
            "matrix", "needs", "inputs"}
FUNCTIONS = {"contains", "startsWith", "endsWith", "format", "join", "toJSON", "fromJSON",
             "hashFiles", "success", "always", "cancelled", "failure"}
#: The repository secrets docs/team-and-farm.md documents (CI, deploy and where state lives).
SECRETS = set(check_secrets.ALL_SECRETS)
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


# ------------------------------------------------------------ structure
# What no script can say: the YAML's own wiring. Everything a step does is tested by running it, further down.

#: A step's `run:` is one command: a script of the repository, or a make target.
RUN_LINE = re.compile(r"^(?:\.venv/bin/python |python3 |bash )?(\S+)(?: .*)?$")


def test_every_run_step_is_one_line_calling_the_repositorys_code() -> None:
    """The logic lives in scripts the tests below run, so no step is a shell program restated nowhere else."""
    targets = set(re.findall(r"^([a-z][\w-]*):", (ROOT / "Makefile").read_text(), re.M))
    calls = []
    for name, job, step in all_steps():
        if "run" not in step:
            continue
        text = step["run"].strip()
        assert "\n" not in text, f"{name} {job} {step.get('name')}: a multi-line run block; move it to a script"
        if text.startswith("make "):
            assert text.split()[1] in targets, f"{name} {job}: make {text.split()[1]} is no Makefile target"
            calls.append(text.split()[1])
            continue
        match = RUN_LINE.match(text)
        assert match and (ROOT / match.group(1)).is_file(), f"{name} {job}: {text!r} calls no file of the repository"
        calls.append(match.group(1))
    assert len(calls) >= 10, calls  # a parse that found no steps must not pass


def test_triggers_permissions_and_concurrency() -> None:
    """Which events start which job, with which permissions, and how runs queue: the YAML's alone."""
    ci, deploy = load("ci.yml"), load("deploy.yml")
    assert list(ci["on"]) == ["pull_request"] and ci["permissions"] == {"contents": "read"}
    assert ci["jobs"]["two-arch-index"]["needs"] == "test" and ci["jobs"]["preview"]["needs"] == "test"
    assert ci["jobs"]["preview"]["permissions"] == {"contents": "read", "pull-requests": "write"}
    assert deploy["on"]["push"]["branches"] == ["main"] and deploy["permissions"] == {"contents": "read"}
    # one job per stack, all at once (BuildKit schedules the builds); two runs of one stack queue on its group
    assert "concurrency" not in deploy, "no workflow-wide group: one stack's deploy never waits for another's"
    (job,) = deploy["jobs"].values()
    assert job["concurrency"] == {"group": "rocm-bake-deploy-${{ matrix.stack }}", "cancel-in-progress": False}
    assert "max-parallel" not in job["strategy"] and job["strategy"]["fail-fast"] is False
    assert job["environment"] == "deploy", "the writing credentials live in an environment kept to main"
    assert job["permissions"] == {"contents": "write"}, "releases and gh-pages, for the stacks that publish"
    for matrix_job in (ci["jobs"]["preview"], job):
        assert matrix_job["strategy"]["matrix"]["stack"] == load_targets().default_arches
    # the deploy's order: each step needs what the one before made (the stack's builder name, the login, the farm)
    calls = [str(s.get("run") or s.get("uses")) for s in job["steps"]]
    order = [next(i for i, c in enumerate(calls) if part in c) for part in (
        "check_secrets.py deploy", "make setup", "stack_publish.py --deploy", "docker/login-action",
        "register_builder.py", "pulumi_up.sh")]
    assert order == sorted(order), calls


@pytest.mark.parametrize("name", ["ci.yml", "deploy.yml"])
def test_no_state_in_actions_cache_nor_on_the_runner(name: str) -> None:
    """A cache is saved only on success (a failed `up` that made a release forgets it) and PRs read it."""
    data = load(name)
    for job_name, job in data["jobs"].items():
        for cached in [s for s in job["steps"] if str(s.get("uses", "")).startswith("actions/cache@")]:
            assert cached["with"]["path"] == "~/.cache/rocm-bake/engines", f"{job_name}: {cached['with']['path']}"
    for value in strings(data):
        assert "file://" not in value and "pulumi login --local" not in value, f"{name}: {value!r}"


def test_every_secret_reaches_the_steps_under_its_own_name() -> None:
    """The scripts read secrets by name from the environment; only the YAML maps ``secrets.X`` to it."""
    preview = load("ci.yml")["jobs"]["preview"]
    (deploy,) = load("deploy.yml")["jobs"].values()
    for job, needed in ((preview, check_secrets.required("preview", {})),
                        (deploy, check_secrets.required("deploy", {}))):
        gate = next(s for s in job["steps"] if "check_secrets.py" in str(s.get("run", "")))
        seen = {**job["env"], **gate.get("env", {})}
        names = [*needed, *(n for names in check_secrets.BACKEND_CREDENTIALS.values() for n in names)]
        for name in names:
            assert seen.get(name) == f"${{{{ secrets.{name} }}}}", name
        assert job["env"]["PULUMI_FALLBACK_TO_STATE_SECRETS_MANAGER"] == "true"
        # the gate is the first step that sees a secret: nothing earlier reads one
        before = job["steps"][:job["steps"].index(gate)]
        assert before and all("secrets." not in str(s) for s in before)
    for name in ("BUILDKIT_HOST", *check_secrets.FARM_CREDENTIALS["tcp"]):
        assert deploy["env"][name] == f"${{{{ secrets.{name} }}}}"
    assert deploy["env"]["BUILDX_CONFIG"] == "${{ github.workspace }}/.rocm-bake/buildx"
    assert "GITHUB_TOKEN" not in deploy["env"], "only the up step gets it, and pulumi_up.sh withholds it unless publishing"


def test_the_preview_is_gated_and_only_reads() -> None:
    """pulumi/actions runs the preview and comments on the PR: its inputs and gates are YAML, not ours to run."""
    job = load("ci.yml")["jobs"]["preview"]
    gate = step_with_id(job, "state")
    after = job["steps"][job["steps"].index(gate) + 1:]
    assert after and all("steps.state.outputs.available == 'true'" in s.get("if", "") for s in after), \
        "without the secrets (a fork's pull request) nothing after the gate runs"
    action = uses(job, "pulumi/actions")
    assert action["uses"] == PULUMI_ACTIONS
    assert action["if"] == "steps.state.outputs.available == 'true' && steps.stack.outputs.exists == 'true'"
    assert action["with"]["command"] == "preview" and action["with"]["stack-name"] == "${{ matrix.stack }}"
    assert "upsert" not in action["with"], "a preview never creates a stack (that writes the state)"
    assert "refresh" not in action["with"], "a refresh would read the registry and the GitHub API"
    assert action["with"]["cloud-url"] == "${{ secrets.PULUMI_BACKEND_URL }}"
    assert action["with"]["policyPacks"] == "policy" and action["with"]["comment-on-pr"] is True
    # the action runs the `pulumi` on PATH when its version matches: the one use_built_pulumi.sh put there
    assert action["with"]["pulumi-version"] == "${{ steps.cli.outputs.version }}"
    assert action["env"]["PULUMI_CONFIG_PASSPHRASE"] == "${{ secrets.PULUMI_CONFIG_PASSPHRASE }}"
    order = [job["steps"].index(s) for s in (gate, step_with_id(job, "cli"), step_with_id(job, "stack"), action)]
    assert order == sorted(order)


#: The pulumi/actions release both workflows use; its input names (policyPacks, expect-no-changes) are v7's.
PULUMI_ACTIONS = "pulumi/actions@v7"
#: Every input pulumi/actions@v7 declares (its action.yml): an input it does not know is silently ignored.
PULUMI_ACTIONS_INPUTS = {
    "command", "stack-name", "pulumi-version", "pulumi-version-file", "work-dir", "comment-on-pr",
    "comment-on-pr-number", "comment-on-summary", "github-token", "cloud-url", "secrets-provider", "parallel",
    "message", "config-map", "expect-no-changes", "diff", "replace", "exclude", "exclude-dependents", "target",
    "target-dependents", "policyPacks", "policyPackConfigs", "refresh", "upsert", "remove", "edit-pr-comment",
    "color", "exclude-protected", "plan", "suppress-outputs", "suppress-progress", "always-include-summary",
    "continue-on-error", "log-verbosity", "log-flow", "debug",
}


def test_every_pulumi_action_is_v7_with_inputs_v7_names() -> None:
    steps = [(name, step) for name, _job, step in all_steps() if str(step.get("uses", "")).startswith("pulumi/")]
    assert {name for name, _ in steps} == {"ci.yml", "deploy.yml"}, "both workflows run pulumi/actions"
    for name, step in steps:
        assert step["uses"] == PULUMI_ACTIONS, f"{name}: {step['uses']}"
        assert set(step["with"]) <= PULUMI_ACTIONS_INPUTS, f"{name}: {set(step['with']) - PULUMI_ACTIONS_INPUTS}"


def test_the_deploy_ends_with_a_preview_that_expects_no_changes() -> None:
    """After pulumi_up.sh, pulumi/actions previews the same stack in the same state: any change left fails the job."""
    job = load("deploy.yml")["jobs"]["up"]
    action = uses(job, "pulumi/actions")
    assert job["steps"][-1] is action
    assert action["with"]["command"] == "preview" and action["with"]["stack-name"] == "${{ matrix.stack }}"
    assert action["with"]["expect-no-changes"] is True and action["with"]["policyPacks"] == "policy"
    assert action["with"]["cloud-url"] == "${{ secrets.PULUMI_BACKEND_URL }}"
    assert action["with"]["pulumi-version"] == "${{ steps.cli.outputs.version }}"
    assert step_with_id(job, "cli")["run"] == ".github/scripts/use_built_pulumi.sh"
    # the token as the up has it: only where the stack publishes
    assert action["env"] == {
        "GITHUB_TOKEN": "${{ steps.stack.outputs.publish == 'true' && secrets.GITHUB_TOKEN || '' }}"}


# -- the docs agree ----------------------------------------------------------------------------------------


def readme_section() -> str:
    """The docs section the workflows' error lines point at (check_secrets.README)."""
    text = (ROOT / "docs" / "team-and-farm.md").read_text()
    start = text.index("\n## CI, deploy and where state lives\n")
    end = text.find("\n## ", start + 1)
    return text[start:end if end != -1 else len(text)]


def test_readme_names_every_secret_the_workflows_read() -> None:
    section = readme_section()
    table = {m.group(1) for m in re.finditer(r"^\|\s*`([A-Z][A-Z0-9_]+)`", section, re.M)}
    used = {m.group(1) for name in ("ci.yml", "deploy.yml")
            for m in re.finditer(r"secrets\.([A-Z][A-Z0-9_]+)", (WORKFLOWS / name).read_text())}
    assert table == used == set(check_secrets.ALL_SECRETS)
    for phrase in ("actions/cache", "PULUMI_BACKEND_URL", "deploy` environment", "register_builder.py",
                   "check_secrets.py", "PULUMI_FALLBACK_TO_STATE_SECRETS_MANAGER", "dist/"):
        assert phrase in section, phrase


# ------------------------------------------------------ the secret check


def secret_values(**extra: str) -> dict[str, str]:
    """A complete deploy environment (an S3 bucket, a farm over mutual TLS, a registry login), each value
    distinct and findable, so a test can tell that none of them was printed."""
    names = ["PULUMI_CONFIG_PASSPHRASE", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "BUILDKIT_CA_CERT",
             "BUILDKIT_CLIENT_CERT", "BUILDKIT_CLIENT_KEY", "REGISTRY_USERNAME", "REGISTRY_PASSWORD"]
    env = {name: f"v4lue-{name.lower()}-x9" for name in names}
    env.update({"PULUMI_BACKEND_URL": "s3://team-state/rocm-bake?region=eu-west-1",
                "BUILDKIT_HOST": "tcp://farm.example:1234"})
    return {**env, **extra}


def check(job: str, env: dict[str, str], tmp: Path) -> tuple[int, str, str]:
    """The gate step as the workflow runs it: (exit code, its log, what it wrote to output + summary)."""
    done, output, summary = step_run(["python3", str(SCRIPTS / "check_secrets.py"), job], env, tmp)
    log = done.stdout + done.stderr
    for name, value in env.items():
        if name not in ("PULUMI_BACKEND_URL", "BUILDKIT_HOST"):
            assert value not in log + output + summary, f"the value of {name} was printed"
    return done.returncode, log, output + summary


def test_secret_check_names_what_deploy_lacks_and_prints_no_value(tmp_path: Path) -> None:
    code, said, _ = check("deploy", {}, tmp_path)
    assert code == 1
    assert said.startswith("::error title=missing secrets::deploy needs the repository secrets PULUMI_BACKEND_URL, "
                           "PULUMI_CONFIG_PASSPHRASE, BUILDKIT_HOST, REGISTRY_USERNAME, REGISTRY_PASSWORD ("), said
    code, said, written = check("deploy", secret_values(), tmp_path)
    assert (code, written) == (0, "available=true\n"), said
    for drop, url in (("AWS_SECRET_ACCESS_KEY", None), ("BUILDKIT_CLIENT_KEY", None),
                      ("GOOGLE_CREDENTIALS", "gs://team-state"), ("PULUMI_ACCESS_TOKEN", "https://api.pulumi.com"),
                      ("AZURE_STORAGE_KEY", "azblob://team-state")):
        env = {k: v for k, v in secret_values().items() if k != drop}
        if url:
            env["PULUMI_BACKEND_URL"] = url
            env.update({"AZURE_STORAGE_ACCOUNT": "acct"} if url.startswith("azblob") else {})
        code, said, _ = check("deploy", env, tmp_path)
        where = "docs/team-and-farm.md: CI, deploy and where state lives"
        assert code == 1 and said.rstrip().endswith(f"secrets {drop} ({where})"), said
    # a farm on the runner's own host (unix socket) needs no certificates
    env = {k: v for k, v in secret_values(BUILDKIT_HOST="unix:///run/buildkit/buildkitd.sock").items()
           if not k.startswith("BUILDKIT_C")}
    assert check("deploy", env, tmp_path)[0] == 0


def test_secret_check_refuses_state_on_the_runner(tmp_path: Path) -> None:
    for url, why in (("file:///home/runner/.pulumi-state", "gone when the job ends"),
                     ("bucket-name", "scheme '(none)'"), ("ftp://x", "scheme 'ftp'")):
        code, said, written = check("preview", secret_values(PULUMI_BACKEND_URL=url), tmp_path)
        assert (code, written) == (1, "") and said.startswith("::error title=bad secret::PULUMI_BACKEND_URL") \
            and why in said, said
    code, said, _ = check("deploy", secret_values(BUILDKIT_HOST="docker-container://buildx_buildkit0"), tmp_path)
    assert code == 1 and "BUILDKIT_HOST has scheme 'docker-container'" in said


def test_secret_check_skips_a_fork_preview_saying_so(tmp_path: Path) -> None:
    code, said, written = check("preview", {}, tmp_path)
    assert code == 0
    assert said.startswith("::notice title=pulumi preview skipped::no PULUMI_BACKEND_URL secret")
    assert written.startswith("available=false\n**pulumi preview skipped**")
    # the URL without the passphrase is a misconfiguration, not a fork: it fails
    env = {k: v for k, v in secret_values().items() if k != "PULUMI_CONFIG_PASSPHRASE"}
    code, said, _ = check("preview", env, tmp_path)
    assert code == 1 and "secrets PULUMI_CONFIG_PASSPHRASE (" in said, said
    # a preview needs no farm and no registry login
    env = {k: v for k, v in secret_values().items() if not k.startswith(("BUILDKIT", "REGISTRY"))}
    code, _, written = check("preview", env, tmp_path)
    assert (code, written) == (0, "available=true\n")


# ------------------------------------------------------ the two-arch index job

TWO_ARCHES = "gfx950 gfx1201"


def test_two_arch_index_job_steps(tmp_path: Path) -> None:
    """Its four steps in order, in a fresh working directory, with the job's ARCHES."""
    env = {"ARCHES": TWO_ARCHES}
    wheels, dist = tmp_path / "build" / "test-wheels", tmp_path / "dist"
    made, _, _ = step_run([str(ROOT / ".venv/bin/python"), str(SCRIPTS / "make_test_wheels.py"), "--out",
                           str(wheels), *TWO_ARCHES.split()], env, tmp_path, cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    names = {arch: sorted(p.name for p in (wheels / arch).glob("*.whl")) for arch in TWO_ARCHES.split()}
    assert names["gfx950"] == names["gfx1201"] and len(names["gfx950"]) == 5, names
    for arch in TWO_ARCHES.split():
        torch = next((wheels / arch).glob("torch-*.whl"))
        assert wheel_targets(torch).targets == [arch], "same filename, this arch's device code only"

    checked, _, _ = step_run([str(SCRIPTS / "check_test_wheels.sh"), str(wheels), *TWO_ARCHES.split()], env,
                             tmp_path, cwd=tmp_path)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert checked.stdout.rstrip().endswith("each arch's wheels carry its code objects only: gfx950 gfx1201")

    built, _, _ = step_run([str(SCRIPTS / "build_indexes.sh"), str(wheels), str(dist), *TWO_ARCHES.split()], env,
                           tmp_path, cwd=tmp_path)
    assert built.returncode == 0, built.stdout + built.stderr
    for arch in TWO_ARCHES.split():
        served = sorted(p.name for p in (dist / "index" / arch).rglob("*.whl") if not p.name.startswith("rocm_torch"))
        assert served == names[arch], (arch, served)

    installed, _, _ = step_run(["make", "wheel-index-check", f"DIST={dist}", f"ARCHES={TWO_ARCHES}"], env, tmp_path)
    assert installed.returncode == 0, installed.stdout[-3000:] + installed.stderr[-3000:]
    for arch in TWO_ARCHES.split():
        for tool in ("pip", "uv"):
            assert re.search(rf"^{arch}\s+{tool}\s+installs its own\s+ok\s+6 installed", installed.stdout, re.M), \
                installed.stdout
            assert re.search(rf"^{arch}\s+{tool}\s+refuses other arches' extras\s+ok", installed.stdout, re.M)

    # the check step's point: another arch's torch, under its usual name, is refused
    shutil.copy(next((wheels / "gfx950").glob("torch-*.whl")), next((wheels / "gfx1201").glob("torch-*.whl")))
    mixed, _, _ = step_run([str(SCRIPTS / "check_test_wheels.sh"), str(wheels), *TWO_ARCHES.split()], env,
                           tmp_path, cwd=tmp_path)
    assert mixed.returncode != 0
    assert re.search(r"torch-\S+\.whl.*gfx950.*refused for the gfx1201 index", mixed.stderr), mixed.stderr


# ------------------------------------------------------ the deploy's stack facts


def test_stack_publish_reads_each_stack_config(tmp_path: Path) -> None:
    from rocm_bake.config import load_stack_config

    for stack in load_targets().default_arches:
        done = subprocess.run([sys.executable, str(SCRIPTS / "stack_publish.py"), stack], capture_output=True,
                              text=True, env={k: v for k, v in os.environ.items() if k != "GITHUB_OUTPUT"})
        assert done.returncode == 0, done.stderr
        config = load_stack_config(stack)
        assert done.stdout.splitlines() == [
            f"publish={'true' if config.publish else 'false'}", f"registry={config.registry}",
            f"builder={config.builder}",
        ]
    done = subprocess.run([sys.executable, str(SCRIPTS / "stack_publish.py"), "no-such-stack"],
                          capture_output=True, text=True)
    assert done.returncode == 2 and "no-such-stack" in done.stderr


def test_stack_publish_deploy_refuses_a_loopback_registry(tmp_path: Path) -> None:
    (tmp_path / "Pulumi.team.yaml").write_text(
        "config:\n  rocm-bake:pytorchRocmArch: gfx950\n  rocm-bake:registry: registry.example:5000\n"
        "  rocm-bake:builder: farm\n  rocm-bake:publish: true\n  rocm-bake:githubRepo: octo/rocm-bake\n")
    (tmp_path / "Pulumi.local.yaml").write_text("config:\n  rocm-bake:pytorchRocmArch: gfx950\n")
    out = tmp_path / "output"
    base = [sys.executable, str(SCRIPTS / "stack_publish.py"), "--deploy", "--stacks-dir", str(tmp_path)]
    env = {**os.environ, "GITHUB_OUTPUT": str(out)}
    done = subprocess.run([*base, "team"], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    assert out.read_text() == "publish=true\nregistry=registry.example:5000\nbuilder=farm\n"
    done = subprocess.run([*base, "local"], capture_output=True, text=True, env=env)
    assert done.returncode == 2
    assert "rocm-bake:registry is 127.0.0.1:5000, a loopback address" in done.stderr
    assert "stacks/Pulumi.local.yaml" in done.stderr and out.read_text().count("publish=") == 1
    for registry, loop in (("localhost:5000", True), ("127.0.0.2", True), ("[::1]:5000", True),
                           ("ghcr.io", False), ("10.0.0.5:5000", False), ("[2001:db8::1]:443", False)):
        assert stack_publish.is_loopback_registry(registry) is loop, registry


# -- the build farm, for real: a buildkitd over mutual TLS ------------------------------------------------


def openssl(*args: str, cwd: Path) -> None:
    done = subprocess.run(["openssl", *args], cwd=cwd, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def make_pki(d: Path, ca: str = "ca") -> None:
    """A CA, a server certificate for 127.0.0.1 and a client certificate (EC keys: quick)."""
    d.mkdir(parents=True, exist_ok=True)
    key = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    openssl("req", "-x509", *key, "-keyout", f"{ca}.key", "-out", f"{ca}.pem", "-days", "1", "-subj",
            f"/CN={ca}", cwd=d)
    for who, ext in (("server", "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n"),
                     ("client", "extendedKeyUsage=clientAuth\n")):
        (d / f"{who}.ext").write_text(ext)
        openssl("req", *key, "-keyout", f"{who}.key", "-out", f"{who}.csr", "-subj", f"/CN={who}", cwd=d)
        openssl("x509", "-req", "-in", f"{who}.csr", "-CA", f"{ca}.pem", "-CAkey", f"{ca}.key", "-CAcreateserial",
                "-out", f"{who}.pem", "-days", "1", "-extfile", f"{who}.ext", cwd=d)


#: This module's fixtures that start BuildKit, versitygw or the engine (tests/conftest.py marks their tests
#: ``services``); the tests that run an engine themselves carry the marker by hand.
SERVICE_FIXTURES = {"farm", "bucket", "runner", "deployed"}


@pytest.fixture(scope="module")
def farm(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """A buildkitd on tcp://127.0.0.1 that demands a client certificate from its CA, like a build farm."""
    import socket
    import time

    sys.path.insert(0, str(ROOT / "tools"))
    import builder as builder_tool  # tools/builder.py: the worker config `make builder` uses

    if shutil.which("openssl") is None:
        pytest.fail("openssl is needed to make the farm's certificates: apt-get install openssl")
    buildkitd = engine("buildkitd")
    engine("buildx")
    if os.geteuid() != 0:
        pytest.fail("buildkitd (runc worker) runs as root here: run the tests as root, as `make test` does in CI")
    work = tmp_path_factory.mktemp("farm")
    make_pki(work / "pki")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    (work / "buildkitd.toml").write_text(builder_tool.config_text([]))
    pki = work / "pki"
    with (work / "buildkitd.log").open("w") as log:
        process = subprocess.Popen(
            [str(buildkitd), "--root", str(work / "root"), "--config", str(work / "buildkitd.toml"),
             "--addr", f"tcp://127.0.0.1:{port}", "--tlscacert", str(pki / "ca.pem"),
             "--tlscert", str(pki / "server.pem"), "--tlskey", str(pki / "server.key")],
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"buildkitd did not start: {(work / 'buildkitd.log').read_text()[-2000:]}")
                time.sleep(0.2)
        yield {"host": f"tcp://127.0.0.1:{port}", "pki": pki, "work": work}
    finally:
        process.terminate()
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def register(farm: dict[str, Any], tmp_path: Path, pki: Path | None = None, **env: str) -> subprocess.CompletedProcess:
    pki = pki or farm["pki"]
    full = {**os.environ, "BUILDX_CONFIG": str(farm["work"] / "buildx"), "BUILDKIT_HOST": farm["host"],
            "BUILDKIT_CA_CERT": (farm["pki"] / "ca.pem").read_text(),
            "BUILDKIT_CLIENT_CERT": (pki / "client.pem").read_text(),
            "BUILDKIT_CLIENT_KEY": (pki / "client.key").read_text(), **env}
    full = {k: v for k, v in full.items() if v != "<unset>"}
    return subprocess.run(
        [sys.executable, str(SCRIPTS / "register_builder.py"), "--name", "farm-test", "--buildx",
         str(ROOT / ".tools" / "bin" / "buildx"), "--tls-dir", str(tmp_path / "tls")],
        capture_output=True, text=True, env=full, timeout=300)


def test_register_builder_reaches_a_farm_over_mutual_tls(farm: dict[str, Any], tmp_path: Path) -> None:
    done = register(farm, tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"builder 'farm-test': the build farm at {farm['host']} over mutual TLS (remote driver, BuildKit v" \
        in done.stdout
    for name in ("cacert.pem", "cert.pem", "key.pem"):
        assert (tmp_path / "tls" / name).stat().st_mode & 0o777 == 0o600
    inspect = subprocess.run([str(ROOT / ".tools" / "bin" / "buildx"), "inspect", "farm-test"], capture_output=True,
                             text=True, env={**os.environ, "BUILDX_CONFIG": str(farm["work"] / "buildx")})
    assert re.search(r"Driver:\s+remote", inspect.stdout) and farm["host"] in inspect.stdout, inspect.stdout
    # a second run (a reused machine) re-registers
    assert register(farm, tmp_path).returncode == 0


def test_register_builder_fails_clearly_without_the_right_certificate(farm: dict[str, Any], tmp_path: Path) -> None:
    done = register(farm, tmp_path, BUILDKIT_CLIENT_KEY="<unset>")
    assert done.returncode == 1
    assert "BUILDKIT_HOST is tcp://, which needs mutual TLS: set BUILDKIT_CLIENT_KEY" in done.stdout
    # a client certificate from another CA: the farm refuses it, and the step says which farm
    make_pki(tmp_path / "other", ca="other-ca")
    done = register(farm, tmp_path, pki=tmp_path / "other")
    assert done.returncode == 1, done.stdout
    assert f"the build farm at {farm['host']} did not answer as builder 'farm-test'" in done.stdout
    assert register_builder.create_argv("b", "unix:///s", {}) == ["create", "--name", "b", "--driver", "remote",
                                                                  "unix:///s"]


# ------------------------------------------------------ the Pulumi CLI and the team's state


@pytest.mark.services
def test_use_built_pulumi_puts_the_built_cli_on_path_with_its_bare_version(tmp_path: Path) -> None:
    done, output, _ = step_run([str(SCRIPTS / "use_built_pulumi.sh")], {"GITHUB_PATH": str(tmp_path / "path")},
                               tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (tmp_path / "path").read_text() == f"{TOOLS_BIN}\n"
    version = subprocess.run([str(engine("pulumi")), "version"], capture_output=True, text=True, timeout=60)
    assert re.fullmatch(r"v3\.\d+\.\d+\n", version.stdout), version.stdout
    assert output == f"version={version.stdout.strip()[1:]}\n", "pulumi/actions matches a bare semver"
    # outside a workflow step (no GITHUB_OUTPUT) it says so instead of writing nowhere
    env = {"GITHUB_PATH": str(tmp_path / "path"), "GITHUB_OUTPUT": ""}
    done, _, _ = step_run([str(SCRIPTS / "use_built_pulumi.sh")], env, tmp_path)
    assert done.returncode != 0 and "GITHUB_OUTPUT: this runs as a workflow step" in done.stderr
    assert (tmp_path / "path").read_text() == f"{TOOLS_BIN}\n", "nothing written when it cannot write both"


BUCKET = STATE_BUCKET
TOKEN = "ghs_t0ken-v4lue-x9"
#: The stack's bases, on a loopback port nothing listens on: the farm's build fails at once, naming it.
NO_BASE = "127.0.0.1:9/rocm-bake/no-base:1"


@pytest.fixture(scope="module")
def bucket(tmp_path_factory: pytest.TempPathFactory) -> Iterator[state_server.StateServer]:
    """The team's state: an S3 bucket (versitygw, started by make state-server's own code) on a free port."""
    yield from start_state_bucket(tmp_path_factory)


@pytest.fixture(scope="module")
def github() -> Iterator[FakeGitHub]:
    """The stack's GitHub (REST API, uploads, downloads) on loopback, knowing only the workflow's token."""
    with FakeGitHub(owner="octo", repo="rocm-bake", token=TOKEN) as fake:
        yield fake


@pytest.fixture(scope="module")
def runner(tmp_path_factory: pytest.TempPathFactory, bucket: state_server.StateServer,
           github: FakeGitHub) -> dict[str, Any]:
    """A runner's checkout (the program, stacks/, Dockerfiles) and the job environment the workflows give it.

    The stack publishes (to the loopback GitHub, so no request leaves the machine), so its program needs a GitHub
    token at declaration: whether the token reached the engine shows in what the program says. A ``pulumi`` ahead
    of the built CLI on PATH records any call to it.
    """
    work = tmp_path_factory.mktemp("runner")
    checkout = copy_project(work / "checkout")
    stack = f"ci-{os.urandom(3).hex()}"
    (checkout / "stacks" / f"Pulumi.{stack}.yaml").write_text(
        "config:\n  rocm-bake:pytorchRocmArch: gfx950\n  rocm-bake:registry: registry.example:5000\n"
        "  rocm-bake:builder: the-farm\n  rocm-bake:publish: true\n  rocm-bake:githubRepo: octo/rocm-bake\n"
        f"  rocm-bake:buildArgs: {{ROCM_IMAGE: '{NO_BASE}', PYTHON_IMAGE: '{NO_BASE}'}}\n"
        f"  rocm-bake:githubApiUrl: {github.api_url}\n  rocm-bake:githubUploadsUrl: {github.uploads_url}\n"
        f"  rocm-bake:githubWebUrl: {github.web_url}\n")
    trap = work / "other-bin"
    trap.mkdir()
    (trap / "pulumi").write_text(f"#!/bin/sh\necho \"$@\" >> {work / 'other-pulumi-called'}\nexit 97\n")
    (trap / "pulumi").chmod(0o755)
    env = {k: v for k, v in project_env(work / "no-file-backend", None, work).items()
           if not k.startswith(("AWS_", "PULUMI_BACKEND", "BUILDX"))}
    env.update(bucket.env())
    env.update({"PATH": f"{trap}:{os.environ['PATH']}", "STACK": stack, "GITHUB_TOKEN": TOKEN,
                "BUILDX_CONFIG": str(work / "buildx")})
    return {"dir": checkout, "stack": stack, "env": env, "work": work}


def checkpoint(bucket: state_server.StateServer, stack: str) -> Path:
    return bucket.bucket_dir / ".pulumi" / "stacks" / "rocm-bake" / f"{stack}.json"


def up(runner: dict[str, Any], tmp: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """The deploy's last step, as the workflow runs it."""
    done, _, _ = step_run([str(SCRIPTS / "pulumi_up.sh"), runner["stack"]], {**runner["env"], **env}, tmp,
                          cwd=runner["dir"])
    return done


@pytest.fixture(scope="module")
def deployed(runner: dict[str, Any], bucket: state_server.StateServer, farm: dict[str, Any], github: FakeGitHub,
             tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The deploy's last two steps: the farm registered as the stack's builder, then pulumi_up.sh twice (the
    stack's first deploy with PUBLISH empty, then with PUBLISH=true)."""
    tmp = tmp_path_factory.mktemp("up")
    secrets = {"BUILDKIT_HOST": farm["host"], "BUILDKIT_CA_CERT": (farm["pki"] / "ca.pem").read_text(),
               "BUILDKIT_CLIENT_CERT": (farm["pki"] / "client.pem").read_text(),
               "BUILDKIT_CLIENT_KEY": (farm["pki"] / "client.key").read_text()}
    runner["env"].update(secrets)
    registered, _, _ = step_run([str(ROOT / ".venv/bin/python"), str(SCRIPTS / "register_builder.py"), "--name",
                                 "the-farm", "--buildx", str(TOOLS_BIN / "buildx"), "--tls-dir",
                                 str(tmp / "buildkit-tls")], runner["env"], tmp, cwd=runner["dir"])
    assert registered.returncode == 0, registered.stdout + registered.stderr
    withheld = up(runner, tmp, PUBLISH="")
    github_before = list(github.state.log)
    published = up(runner, tmp, PUBLISH="true")
    return {"withheld": withheld, "published": published, "github_before": github_before,
            "github_after": list(github.state.log)}


def test_pulumi_up_step_deploys_into_the_bucket_with_the_built_cli(
        runner: dict[str, Any], bucket: state_server.StateServer,
        deployed: dict[str, Any]) -> None:
    stack = runner["stack"]
    withheld = deployed["withheld"].stdout + deployed["withheld"].stderr
    # the first deploy created the stack in the bucket, with the passphrase provider, and ran the program
    assert f"Created stack '{stack}'" in withheld, withheld[-3000:]
    state = json.loads(checkpoint(bucket, stack).read_text())
    assert state["checkpoint"]["latest"]["secrets_providers"]["type"] == "passphrase"
    # PUBLISH empty: the token never reached the program, which says it has none
    assert f"stack {stack} does not publish: GITHUB_TOKEN withheld from the engine" in withheld
    assert f"stack {stack}: rocm-bake:publish is true but there is no GitHub token" in withheld
    assert deployed["withheld"].returncode != 0 and deployed["github_before"] == [], "stopped before any request"
    # PUBLISH=true: it did, and the program declared its publishing
    published = deployed["published"].stdout + deployed["published"].stderr
    assert "no GitHub token" not in published, published[-3000:]
    assert "✅ rocm-bake-arch-rules@v" in published, "the arch rules (policy/) judge the deploy's update"
    assert "rocm-bake:publish:PublishedIndex publish-gfx950 created" in published, published[-3000:]
    # the images built on the farm the step before registered in BUILDX_CONFIG (over mutual TLS), which
    # reached for the stack's base and found nothing there
    assert "is not registered" not in published and "no builder" not in published, published[-3000:]
    assert NO_BASE in published and "connection refused" in published, published[-3000:]
    names = {r["urn"].rsplit("::", 1)[-1] for r in json.loads(checkpoint(bucket, stack).read_text())
             ["checkpoint"]["latest"]["resources"]}
    assert "publish-gfx950" in names, names
    for text in (withheld, published):
        assert TOKEN not in text and bucket.credentials.secret_access_key not in text
    # the CLI make setup built, never another `pulumi` on PATH; no state anywhere but the bucket
    assert not (runner["work"] / "other-pulumi-called").exists()
    places = [runner["dir"], runner["work"] / "no-file-backend", ROOT / ".rocm-bake" / "state", Path.home() / ".pulumi"]
    assert [hit for place in places if place.exists() for hit in place.rglob(f"{stack}.json*")] == []


def test_pulumi_up_step_runs_the_up_arches_up_runs() -> None:
    """One argument list for every up (``--refresh`` included, as ``make up``: a wiped registry or a deleted image
    is rebuilt): the deploy's engine line is ``pulumi_command``'s, with the script's CLI, stack and policy path."""
    from rocm_bake.commands.arches import POLICY_PACK, Pass, pulumi_command

    script = (SCRIPTS / "pulumi_up.sh").read_text().splitlines()
    engine_line = next(line for line in script if line.startswith("exec "))
    want = ['"$root/policy"' if arg == str(POLICY_PACK) else arg
            for arg in pulumi_command("up", Pass('"$stack"', "gfx950", "any"), cli='"$cli"')]
    assert engine_line.split()[1:] == want, f"pulumi_up.sh: {engine_line!r} is not arches up's {want}"


def test_pulumi_up_step_refuses_an_empty_backend_url(runner: dict[str, Any], tmp_path: Path) -> None:
    """.tools/bin/pulumi would fall back to the checkout's file backend: on a runner, gone after the job."""
    stack = f"never-{os.urandom(3).hex()}"
    local = ROOT / ".rocm-bake" / "state" / ".pulumi"
    try:
        done, _, _ = step_run([str(SCRIPTS / "pulumi_up.sh"), stack], {**runner["env"], "PULUMI_BACKEND_URL": ""},
                              tmp_path, cwd=runner["dir"])
        assert done.stdout.startswith("::error title=state::PULUMI_BACKEND_URL is empty"), done.stdout
        assert done.returncode == 1
        assert list(local.rglob(f"{stack}*")) == [], "a stack in the checkout's file backend"
    finally:  # a broken script must not leave its stack in this checkout's own state
        for path in sorted(local.rglob(f"{stack}*"), reverse=True):
            shutil.rmtree(path) if path.is_dir() else path.unlink()


def bucket_files(bucket: state_server.StateServer) -> dict[str, bytes]:
    return {str(p.relative_to(bucket.data)): p.read_bytes() for p in sorted(bucket.data.rglob("*")) if p.is_file()}


def test_stack_in_state_reads_the_bucket_and_writes_nothing(
        runner: dict[str, Any], bucket: state_server.StateServer,
        deployed: dict[str, Any], tmp_path: Path) -> None:
    """The preview's look into the team's state, before pulumi/actions previews against it."""
    before = bucket_files(bucket)
    argv = [str(ROOT / ".venv/bin/python"), str(SCRIPTS / "stack_in_state.py")]
    done, output, summary = step_run([*argv, runner["stack"]], runner["env"], tmp_path, cwd=runner["dir"])
    assert (done.returncode, output) == (0, "exists=true\n"), done.stdout + done.stderr
    done, output, summary = step_run([*argv, "gfx1250"], runner["env"], tmp_path, cwd=runner["dir"])
    assert (done.returncode, output) == (0, "exists=false\n"), done.stdout + done.stderr
    assert done.stdout.startswith("::notice title=pulumi preview skipped::stack gfx1250 is not in the team's state")
    assert summary.startswith("**pulumi preview gfx1250 skipped**")
    assert bucket_files(bucket) == before, "a pull request's look into the state wrote to it"
    # wrong credentials: an error naming pulumi stack ls, never a skip, and no key in it
    wrong = {**runner["env"], "AWS_SECRET_ACCESS_KEY": "wr0ng-s3cret-x9"}
    done, output, _ = step_run([*argv, runner["stack"]], wrong, tmp_path, cwd=runner["dir"])
    assert (done.returncode, output) == (2, ""), done.stdout
    assert done.stdout.startswith("::error title=team state::pulumi stack ls failed:"), done.stdout
    assert "wr0ng-s3cret-x9" not in done.stdout + done.stderr
    done, output, _ = step_run([*argv, runner["stack"]], {**runner["env"], "PULUMI_BACKEND_URL": ""}, tmp_path,
                               cwd=runner["dir"])
    assert (done.returncode, output) == (2, "") and "PULUMI_BACKEND_URL is empty" in done.stdout
    assert not (runner["work"] / "other-pulumi-called").exists()


def test_the_previews_command_reads_the_team_state_and_writes_nothing(
        runner: dict[str, Any], bucket: state_server.StateServer, tmp_path: Path) -> None:
    """What pulumi/actions runs for the preview step (command preview, policyPacks policy) with the CLI
    use_built_pulumi.sh put first on PATH, in the preview job's environment: no farm, no GitHub token."""
    stack = f"{runner['stack']}-pr"
    (runner["dir"] / "stacks" / f"Pulumi.{stack}.yaml").write_text(
        f"config:\n  rocm-bake:pytorchRocmArch: gfx1201\n  rocm-bake:targets: triton-wheel\n"
        f"  rocm-bake:buildArgs: {{ROCM_IMAGE: '{NO_BASE}', PYTHON_IMAGE: '{NO_BASE}'}}\n")
    env = {k: v for k, v in runner["env"].items() if not k.startswith(("BUILDKIT", "GITHUB_TOKEN"))}
    env["PATH"] = f"{TOOLS_BIN}:{env['PATH']}"
    cli = [str(TOOLS_BIN / "pulumi"), "--non-interactive"]
    made, _, _ = step_run([*cli[:1], "stack", "init", stack, "--secrets-provider", "passphrase", *cli[1:]], env,
                          tmp_path, cwd=runner["dir"])  # what the deploy made earlier: the state to preview
    assert made.returncode == 0, made.stderr
    before = bucket_files(bucket)
    done, _, _ = step_run(["pulumi", "preview", "--stack", stack, "--policy-pack", str(ROOT / "policy"), *cli[1:]],
                          env, tmp_path, cwd=runner["dir"])
    said = done.stdout + done.stderr
    assert bucket_files(bucket) == before, "the preview wrote to the team's state"
    assert done.returncode == 0, said[-3000:]
    assert "✅ rocm-bake-arch-rules@v" in said and "triton-wheel-gfx1201" in said, said[-3000:]
    assert not (runner["work"] / "other-pulumi-called").exists()

