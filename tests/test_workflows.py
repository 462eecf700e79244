"""The GitHub workflows: actionlint, the jobs/steps contract, every ``${{ }}``, and their scripts.

The contract holds where state lives (the team's backend from a secret, in
the deploy and in the pull-request preview; never ``actions/cache`` nor
``file://`` on the runner), the secret check that names what is missing,
the sequential deploy, the build farm's registration (tested for real
against a buildkitd that demands mutual TLS) and the README's table of
secrets, which must name exactly the secrets the workflows read.

actionlint runs for real: ``make setup`` builds it from its Go module
(``tools/actionlint``, like the other engines) into ``.tools/bin``. The
structural checks below hold the workflows' contract (README, CI), independent of actionlint.
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
from tests.engine_fixtures import engine

ROOT = Path(__file__).resolve().parent.parent
WORKFLOWS = ROOT / ".github" / "workflows"
SCRIPTS = ROOT / ".github" / "scripts"
ACTIONLINT_VERSION = "1.7.12"  # tools/actionlint/go.mod pins github.com/rhysd/actionlint at this version

sys.path.insert(0, str(SCRIPTS))
import check_secrets  # noqa: E402  (.github/scripts: the workflows' own code)
import register_builder  # noqa: E402
import stack_in_state  # noqa: E402
import stack_publish  # noqa: E402


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


def step(job: dict[str, Any], **match: str) -> dict[str, Any]:
    """The one step whose keys hold these values, or whose ``run`` contains ``run=``."""
    found = [s for s in job["steps"] if all(
        (v in str(s.get(k, ""))) if k == "run" else s.get(k) == v for k, v in match.items())]
    assert len(found) == 1, f"expected one step with {match}, found {len(found)}"
    return found[0]


def index(job: dict[str, Any], wanted: dict[str, Any]) -> int:
    return next(i for i, s in enumerate(job["steps"]) if s is wanted)


def strings(node: Any) -> list[str]:
    """Every string value in a loaded workflow (comments are gone)."""
    if isinstance(node, dict):
        return [x for k, v in node.items() for x in strings(k) + strings(v)]
    if isinstance(node, list):
        return [x for v in node for x in strings(v)]
    return [node] if isinstance(node, str) else []


# ------------------------------------------------------------- actionlint


def actionlint(*paths: Path | str) -> subprocess.CompletedProcess[str]:
    """``.tools/bin/actionlint`` (built by ``make setup`` from its Go module) on these files.

    shellcheck and pyflakes integration is off: a machine with shellcheck on
    PATH and one without would otherwise judge the same workflow differently.
    """
    binary = engine("actionlint")
    return subprocess.run([str(binary), "-no-color", "-shellcheck=", "-pyflakes=", *map(str, paths)],
                          capture_output=True, text=True, timeout=120)


def test_actionlint_is_the_pinned_go_build() -> None:
    version = subprocess.run([str(engine("actionlint")), "-version"], capture_output=True, text=True, timeout=60)
    assert version.returncode == 0, version.stderr
    assert version.stdout.splitlines()[0] == ACTIONLINT_VERSION, version.stdout


def test_workflows_pass_actionlint() -> None:
    files = sorted(WORKFLOWS.glob("*.yml"))
    assert [f.name for f in files] == ["ci.yml", "deploy.yml"]
    done = actionlint(*files)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout == "", done.stdout


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
#: The repository secrets the README documents (CI, deploy and where state lives).
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


# --------------------------------------------------------------- contract


SETUP = "make setup"
CACHE_PATH = "~/.cache/rocm-bake/engines"


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


# -- where state lives ------------------------------------------------------------------------------------

BACKEND = "${{ secrets.PULUMI_BACKEND_URL }}"


@pytest.mark.parametrize("name", ["ci.yml", "deploy.yml"])
def test_no_state_in_actions_cache_nor_on_the_runner(name: str) -> None:
    """A cache is saved only on success (a failed `up` that made a release forgets it) and PRs read it."""
    data = load(name)
    for job_name, job in data["jobs"].items():
        for cached in [s for s in job["steps"] if str(s.get("uses", "")).startswith("actions/cache@")]:
            assert cached["with"]["path"] == CACHE_PATH, f"{job_name}: actions/cache of {cached['with']['path']}"
            assert cached["with"]["key"].startswith("engines-"), job_name
    for value in strings(data):
        assert "file://" not in value, f"{name}: a file:// backend on the runner: {value!r}"
        assert ".pulumi-state" not in value and "pulumi login --local" not in value, value


def test_deploy_and_preview_use_the_backend_from_a_secret() -> None:
    preview = load("ci.yml")["jobs"]["preview"]
    (deploy,) = load("deploy.yml")["jobs"].values()
    for job in (preview, deploy):
        assert job["env"]["PULUMI_BACKEND_URL"] == BACKEND
        action = uses(job, "pulumi/actions")
        assert action["uses"] == "pulumi/actions@v6"
        assert action["with"]["cloud-url"] == BACKEND
        assert action["with"]["stack-name"] == "${{ matrix.stack }}"
        # the checkout's stack files hold no salt: the state's secrets provider, with the real passphrase
        assert job["env"]["PULUMI_FALLBACK_TO_STATE_SECRETS_MANAGER"] == "true"
        passphrase = {**job["env"], **action.get("env", {})}["PULUMI_CONFIG_PASSPHRASE"]
        assert passphrase == "${{ secrets.PULUMI_CONFIG_PASSPHRASE }}"
        # every backend's credentials reach the engine (only the URL scheme's are needed)
        for scheme_names in check_secrets.BACKEND_CREDENTIALS.values():
            for secret in scheme_names:
                assert job["env"][secret] == f"${{{{ secrets.{secret} }}}}", secret


def test_preview_reads_the_real_state_or_says_why_not() -> None:
    job = load("ci.yml")["jobs"]["preview"]
    assert job["strategy"]["matrix"]["stack"] == load_targets().default_arches
    for stack in job["strategy"]["matrix"]["stack"]:
        assert (STACKS_DIR / f"Pulumi.{stack}.yaml").is_file(), stack
    action = uses(job, "pulumi/actions")
    assert action["with"]["command"] == "preview"
    assert "upsert" not in action["with"], "a preview never creates a stack (that writes the state)"
    assert "refresh" not in action["with"], "a refresh in preview would read the registry and the GitHub API"
    assert action["with"]["comment-on-pr"] is True and job["permissions"]["pull-requests"] == "write"
    assert action["with"]["policyPacks"] == "policy", "the arch rules judge every preview (policy/)"
    gate = step(job, id="state")
    assert gate["run"] == "python3 .github/scripts/check_secrets.py preview"
    assert gate["env"]["PULUMI_CONFIG_PASSPHRASE"] == "${{ secrets.PULUMI_CONFIG_PASSPHRASE }}"
    # without the secrets (a fork's pull request) nothing after the gate runs, and the preview least of all
    after = job["steps"][index(job, gate) + 1:]
    assert after and all("steps.state.outputs.available == 'true'" in s.get("if", "") for s in after)
    exists = step(job, id="stack")
    assert "pulumi stack ls --json" in exists["run"] and "stack_in_state.py \"$STACK\"" in exists["run"]
    assert action["if"] == "steps.state.outputs.available == 'true' && steps.stack.outputs.exists == 'true'"
    assert index(job, gate) < index(job, exists) < index(job, action)


@pytest.mark.parametrize("name", ["ci.yml", "deploy.yml"])
def test_pulumi_action_runs_the_cli_make_setup_built(name: str) -> None:
    """pulumi/actions skips its download when `pulumi version` on PATH satisfies pulumi-version."""
    jobs = load(name)["jobs"]
    job = jobs["preview"] if name == "ci.yml" else next(iter(jobs.values()))
    setup = step(job, run=SETUP)
    cli = step(job, id="cli")
    assert 'echo "$PWD/.tools/bin" >> "$GITHUB_PATH"' in cli["run"]
    assert "version=$(.tools/bin/pulumi version)" in cli["run"]
    assert 'echo "version=${version#v}" >> "$GITHUB_OUTPUT"' in cli["run"]
    action = uses(job, "pulumi/actions")
    assert action["with"]["pulumi-version"] == "${{ steps.cli.outputs.version }}"
    assert index(job, setup) < index(job, cli) < index(job, action)
    go = uses(job, "actions/setup-go")
    assert go["with"]["go-version-file"] == "tools/pulumi/go.mod" and index(job, go) < index(job, setup)


def test_the_cli_prints_the_bare_version_the_action_matches() -> None:
    """The action runs `pulumi version`: stdout must be `v` + an exact semver, or it downloads another CLI."""
    cli = ROOT / ".tools" / "bin" / "pulumi"
    if not cli.exists():
        pytest.fail(f"{cli} is missing: run `make setup`")
    done = subprocess.run([str(cli), "version"], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PULUMI_BACKEND_URL": "s3://not-contacted"})
    assert done.returncode == 0, done.stderr
    assert re.fullmatch(r"v3\.\d+\.\d+", done.stdout.strip()), done.stdout


# -- deploy -----------------------------------------------------------------------------------------------


def test_deploy_is_sequential_per_arch() -> None:
    deploy = load("deploy.yml")
    assert deploy["on"]["push"]["branches"] == ["main"]
    assert deploy["concurrency"] == {"group": "rocm-bake-builders", "cancel-in-progress": False}
    (job,) = deploy["jobs"].values()
    assert job["strategy"]["max-parallel"] == 1 and job["strategy"]["fail-fast"] is False
    assert job["strategy"]["matrix"]["stack"] == load_targets().default_arches
    action = uses(job, "pulumi/actions")
    assert action["with"]["command"] == "up" and action["with"]["upsert"] is True
    assert action["with"]["secrets-provider"] == "passphrase"
    assert job["environment"] == "deploy", "the writing credentials live in an environment kept to main"


def test_deploy_checks_every_secret_first_and_by_name() -> None:
    (job,) = load("deploy.yml")["jobs"].values()
    check = step(job, name="Required secrets")
    assert check["run"] == "python3 .github/scripts/check_secrets.py deploy"
    assert index(job, check) < index(job, step(job, run=SETUP))
    assert all("secrets." not in str(s) for s in job["steps"][:index(job, check)])
    # every secret the check may ask for reaches it, under the name it asks for
    seen = {**job["env"], **check.get("env", {})}
    for secret in set(check_secrets.ALL_SECRETS) - {"GITHUB_TOKEN"}:
        assert seen.get(secret) == f"${{{{ secrets.{secret} }}}}", secret


def test_deploy_logs_in_to_the_stack_registry_and_registers_the_farm() -> None:
    (job,) = load("deploy.yml")["jobs"].values()
    facts = step(job, id="stack")
    assert facts["run"] == '.venv/bin/python .github/scripts/stack_publish.py --deploy "$STACK"'
    login = uses(job, "docker/login-action")
    assert login["with"] == {"registry": "${{ steps.stack.outputs.registry }}",
                             "username": "${{ secrets.REGISTRY_USERNAME }}",
                             "password": "${{ secrets.REGISTRY_PASSWORD }}"}
    assert job["env"]["ROCM_BAKE_REGISTRY_USERNAME"] == "${{ secrets.REGISTRY_USERNAME }}"
    assert job["env"]["ROCM_BAKE_REGISTRY_PASSWORD"] == "${{ secrets.REGISTRY_PASSWORD }}"
    farm = step(job, run="register_builder.py")
    assert '--name "$BUILDER" --buildx .tools/bin/buildx --tls-dir "$RUNNER_TEMP/buildkit-tls"' in farm["run"]
    assert farm["env"]["BUILDER"] == "${{ steps.stack.outputs.builder }}"
    for secret in ("BUILDKIT_HOST", *check_secrets.FARM_CREDENTIALS["tcp"]):
        assert job["env"][secret] == f"${{{{ secrets.{secret} }}}}"
    action = uses(job, "pulumi/actions")
    assert index(job, step(job, run=SETUP)) < index(job, facts) < index(job, login) < index(job, farm) \
        < index(job, action)


def test_deploy_hands_the_token_only_to_stacks_that_publish() -> None:
    (job,) = load("deploy.yml")["jobs"].values()
    action = uses(job, "pulumi/actions")
    assert action["env"] == {
        "GITHUB_TOKEN": "${{ steps.stack.outputs.publish == 'true' && secrets.GITHUB_TOKEN || '' }}"
    }
    assert "GITHUB_TOKEN" not in job["env"]
    assert job["permissions"] == {"contents": "write"}


# -- the README agrees ------------------------------------------------------------------------------------


def readme_section() -> str:
    text = (ROOT / "README.md").read_text()
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


# -------------------------------------------------------- helper scripts


def secrets_env(**extra: str) -> dict[str, str]:
    """A complete deploy environment: an S3 bucket, a farm over mutual TLS, a registry login."""
    return {"PULUMI_BACKEND_URL": "s3://team-state/rocm-bake?region=eu-west-1", "PULUMI_CONFIG_PASSPHRASE": "p",
            "AWS_ACCESS_KEY_ID": "a", "AWS_SECRET_ACCESS_KEY": "s", "BUILDKIT_HOST": "tcp://farm.example:1234",
            "BUILDKIT_CA_CERT": "c", "BUILDKIT_CLIENT_CERT": "c", "BUILDKIT_CLIENT_KEY": "k",
            "REGISTRY_USERNAME": "u", "REGISTRY_PASSWORD": "p", **extra}


def run_check(job: str, env: dict[str, str], tmp_path: Path,
              capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """(exit code, what it printed, what it wrote to $GITHUB_OUTPUT + $GITHUB_STEP_SUMMARY)."""
    out, summary = tmp_path / "output", tmp_path / "summary"
    out.write_text(""), summary.write_text("")
    code = check_secrets.main([job], {**env, "GITHUB_OUTPUT": str(out), "GITHUB_STEP_SUMMARY": str(summary)})
    return code, capsys.readouterr().out, out.read_text() + summary.read_text()


def test_check_secrets_names_what_deploy_lacks(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, said, _ = run_check("deploy", {}, tmp_path, capsys)
    assert code == 1
    assert said.startswith("::error title=missing secrets::deploy needs the repository secrets ")
    for name in ("PULUMI_BACKEND_URL", "PULUMI_CONFIG_PASSPHRASE", "BUILDKIT_HOST", "REGISTRY_USERNAME",
                 "REGISTRY_PASSWORD"):
        assert name in said
    code, said, written = run_check("deploy", secrets_env(), tmp_path, capsys)
    assert (code, written) == (0, "available=true\n"), said
    for drop, scheme_url in (("AWS_SECRET_ACCESS_KEY", None), ("BUILDKIT_CLIENT_KEY", None),
                             ("GOOGLE_CREDENTIALS", "gs://team-state"),
                             ("PULUMI_ACCESS_TOKEN", "https://api.pulumi.com"),
                             ("AZURE_STORAGE_KEY", "azblob://team-state")):
        env = {k: v for k, v in secrets_env().items() if k != drop}
        if scheme_url:
            env["PULUMI_BACKEND_URL"] = scheme_url
            env.update({"AZURE_STORAGE_ACCOUNT": "acct"} if scheme_url.startswith("azblob") else {})
        code, said, _ = run_check("deploy", env, tmp_path, capsys)
        assert code == 1 and said.rstrip().endswith(f"{drop} (README: CI, deploy and where state lives)"), said
    # a farm on the runner's own host (unix socket) needs no certificates
    env = {k: v for k, v in secrets_env(BUILDKIT_HOST="unix:///run/buildkit/buildkitd.sock").items()
           if not k.startswith("BUILDKIT_C")}
    assert run_check("deploy", env, tmp_path, capsys)[0] == 0


def test_check_secrets_refuses_state_on_the_runner(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for url, why in (("file:///home/runner/.pulumi-state", "gone when the job ends"),
                     ("file://~", "gone when the job ends"), ("bucket-name", "scheme '(none)'"),
                     ("ftp://x", "scheme 'ftp'")):
        code, said, _ = run_check("preview", secrets_env(PULUMI_BACKEND_URL=url), tmp_path, capsys)
        assert code == 1 and "::error title=bad secret::" in said and why in said, said
    code, said, _ = run_check("deploy", secrets_env(BUILDKIT_HOST="docker-container://buildx_buildkit0"), tmp_path,
                              capsys)
    assert code == 1 and "BUILDKIT_HOST has scheme 'docker-container'" in said


def test_check_secrets_skips_a_fork_preview_saying_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, said, written = run_check("preview", {}, tmp_path, capsys)
    assert code == 0
    assert said.startswith("::notice title=pulumi preview skipped::no PULUMI_BACKEND_URL secret")
    assert "available=false\n" in written and "**pulumi preview skipped**" in written
    # the URL without the passphrase is a misconfiguration, not a fork: it fails
    env = {k: v for k, v in secrets_env().items() if k != "PULUMI_CONFIG_PASSPHRASE"}
    code, said, _ = run_check("preview", env, tmp_path, capsys)
    assert code == 1 and "PULUMI_CONFIG_PASSPHRASE" in said
    # a preview needs no farm and no registry login
    env = {k: v for k, v in secrets_env().items() if not k.startswith(("BUILDKIT", "REGISTRY"))}
    code, _, written = run_check("preview", env, tmp_path, capsys)
    assert (code, written) == (0, "available=true\n")


def test_stack_in_state_reads_stack_ls(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "output"
    monkeypatch.setenv("GITHUB_OUTPUT", str(out))
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(tmp_path / "summary"))
    listing = '[{"name": "gfx950", "current": false, "resourceCount": 31}]'
    assert stack_in_state.main(["gfx950"], listing) == 0
    assert stack_in_state.main(["gfx1250"], listing) == 0
    assert stack_in_state.main(["gfx950"], '[{"name": "team/rocm-bake/gfx950"}]') == 0
    assert out.read_text() == "exists=true\nexists=false\nexists=true\n"
    assert "stack gfx1250 is not in the team's state yet" in capsys.readouterr().out
    assert stack_in_state.main(["gfx950"], "error: no backend") == 2
    assert not stack_in_state.listed([{"name": "gfx9500"}], "gfx950")


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
        assert stack_publish.is_loopback(registry) is loop, registry


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


@pytest.fixture(scope="module")
def farm(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """A buildkitd on tcp://127.0.0.1 that demands a client certificate from its CA, like a build farm."""
    import socket
    import time

    sys.path.insert(0, str(ROOT / "tools"))
    import builder as builder_tool  # tools/builder.py: the worker config `make builder` uses

    if shutil.which("openssl") is None:
        pytest.fail("openssl is needed to make the farm's certificates: apt-get install openssl")
    buildkitd = ROOT / ".tools" / "bin" / "buildkitd"
    if not buildkitd.exists() or not (ROOT / ".tools" / "bin" / "buildx").exists():
        pytest.fail("buildkitd/buildx missing from .tools/bin: run `make setup`")
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
