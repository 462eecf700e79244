"""Our Python language host (tools/pulumi-language-python) on the real CLI, as a Pulumi user meets it.

* ``go test`` of the host itself (its own tests, with the Go env of tools/engines.py);
* ``pulumi about`` names the docker-build plugin and the program's pinned dependencies (pydantic among them);
* ``pulumi install`` on a fresh clone makes the venv, installs the program and installs or finds every plugin
  the installed SDKs name;
* ``pulumi import --generate-code``, ``pulumi convert`` and ``pulumi package gen-sdk`` write Python (through
  pkg/v3/codegen/python);
* a Python policy pack runs through RunPlugin in its own venv, sees the stack, and refuses a violation;
* ``--attach-debugger`` starts the program under debugpy: a debug-adapter client attaches and the preview completes;
* after ``kill -9`` of the CLI mid-``up``, the host and the program it ran are gone within seconds.

Each test runs in temp copies with its own file backend and passphrase; nothing is mocked. A missing engine or
Go toolchain fails loudly, naming ``make setup``.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.engine_fixtures import TOOLS_BIN, VENV_BIN, PulumiProject, copy_project, engine, live_processes

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import engines as engines_tool  # noqa: E402  (tools/engines.py: make setup's own code)

HOST_MODULE = ROOT / "tools" / "pulumi-language-python"
POLICY_WHEEL = "pulumi-policy==1.21.0"


def cli_env(state: Path, **extra: str) -> dict[str, str]:
    """The CLI offline, on a temp file backend with a random passphrase; pip without the machine's site config."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PULUMI_")}
    env.update({
        "PULUMI_BACKEND_URL": f"file://{state}",
        "PULUMI_CONFIG_PASSPHRASE": secrets.token_urlsafe(16),
        "PULUMI_SKIP_UPDATE_CHECK": "true",
        "PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION": "true",
        "PULUMI_HOME": os.environ.get("PULUMI_HOME", str(Path.home() / ".pulumi")),
        "PATH": f"{TOOLS_BIN}:{VENV_BIN}:{os.environ.get('PATH', '')}",
        "PIP_CONFIG_FILE": os.devnull,
        **extra,
    })
    return env


def new_project(dir: Path, state: Path, stack: str = "t", **env: str) -> PulumiProject:
    state.mkdir(parents=True, exist_ok=True)
    project = PulumiProject(dir, state, cli_env(state, **env))
    project.run("stack", "init", stack)
    return project


def pinned_dependencies() -> dict[str, str]:
    """pyproject.toml's ``name==version`` runtime pins that apply to this Python (markers evaluated),
    names normalized as pip lists them."""
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    pins = {}
    for dep in tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]:
        req = Requirement(dep)
        if req.marker is not None and not req.marker.evaluate():
            continue
        (spec,) = req.specifier  # every runtime dependency is one exact pin
        assert spec.operator == "==", dep
        pins[canonicalize_name(req.name)] = spec.version
    return pins


def test_go_tests_of_the_host_pass() -> None:
    if shutil.which("go") is None:
        pytest.fail("no Go toolchain on PATH: install Go (`make setup` builds the host with it)")
    result = subprocess.run([sys.executable, str(ROOT / "tools" / "engines.py"), "--go-test", HOST_MODULE.name],
                            capture_output=True, text=True, timeout=600)  # what `make test-host` runs
    assert result.returncode == 0, f"go test in {HOST_MODULE}:\n{result.stdout[-6000:]}\n{result.stderr[-3000:]}"
    assert re.search(r"^ok\s+\S+/tools/pulumi-language-python\s", result.stdout, re.M), result.stdout


@pytest.fixture(scope="module")
def program(tmp_path_factory: pytest.TempPathFactory) -> PulumiProject:
    """The real program in a temp copy, with the pyproject.toml that says what it depends on."""
    engine("pulumi")
    work = tmp_path_factory.mktemp("langhost")
    dest = copy_project(work / "prog")
    shutil.copy(ROOT / "pyproject.toml", dest / "pyproject.toml")
    return new_project(dest, work / "state")


def test_about_names_docker_build_and_the_pinned_dependencies(program: PulumiProject) -> None:
    about = json.loads(program.run("about", "--json", stack="t").stdout)
    assert about["errors"] in (None, []), about["errors"]
    plugins = {(p["name"], p["kind"]): p["version"] for p in about["plugins"]}
    docker_build = next(e for e in engines_tool.ENGINES if e.name == "docker-build")
    assert plugins.get(("docker-build", "resource")) == docker_build.version, plugins
    assert about["runtime"]["executable"] == str(ROOT / ".venv" / "bin" / "python"), about["runtime"]
    deps = {d["name"]: d["version"] for d in about["dependencies"] or []}
    assert deps == pinned_dependencies(), "pulumi about lists the program's own pinned dependencies"
    assert "pydantic" in deps


def test_import_generates_python(program: PulumiProject, tmp_path: Path) -> None:
    """A docker-build Image imports with no registry; the engine asks the host for the code."""
    out = tmp_path / "imported.py"
    program.run("import", "docker-build:index:Image", "imported-image", "127.0.0.1:1/rocm-bake/x:gfx950",
                "--generate-code", "--out", str(out), "--yes", "--skip-preview", stack="t")
    code = out.read_text()
    assert "import pulumi_docker_build as docker_build" in code, code
    assert re.search(r'^imported_image = docker_build\.Image\("imported-image",$', code, re.M), code
    assert "protect=True" in code, "imports are protected"
    compiled = subprocess.run([str(VENV_BIN / "python"), "-m", "py_compile", str(out)], capture_output=True, text=True)
    assert compiled.returncode == 0, compiled.stderr
    state = json.loads(program.run("stack", "export", stack="t").stdout)
    types = [r["type"] for r in state["deployment"]["resources"]]
    assert "docker-build:index:Image" in types, types


# -- a policy pack through RunPlugin ---------------------------------------------------------------

DYNAMIC_PROGRAM = """
import os, time
import pulumi
from pulumi.dynamic import CreateResult, Resource, ResourceProvider


class Echo(ResourceProvider):
    def create(self, props):
        marker = os.environ.get("CREATE_MARKER")
        if marker:  # the kill -9 test: say the create is running, then hold the update open
            open(marker, "w").write(str(os.getpid()))
            time.sleep(float(os.environ.get("CREATE_SLEEP", "0")))
        return CreateResult(id_="echo-1", outs={"text": props["text"]})


class EchoResource(Resource):
    text: pulumi.Output[str]

    def __init__(self, name, text):
        super().__init__(Echo(), name, {"text": text})


pulumi.export("out", EchoResource("hello", os.environ.get("TEXT", "ok")).text)
"""

POLICY_PACK = """
import os
from pulumi_policy import EnforcementLevel, PolicyPack, ResourceValidationPolicy


def no_forbidden_text(args, report_violation):
    if args.props.get("text") == "forbidden":
        report_violation(f"text of {args.name} is 'forbidden' (stack {os.environ.get('PULUMI_STACK')}, "
                         f"project {os.environ.get('PULUMI_PROJECT')})")


PolicyPack(
    name="h5-tiny-pack",
    enforcement_level=EnforcementLevel.MANDATORY,
    policies=[ResourceValidationPolicy(name="no-forbidden-text", description="text is never 'forbidden'",
                                       validate=no_forbidden_text)],
)
"""


def dynamic_program(dir: Path) -> Path:
    dir.mkdir(parents=True)
    (dir / "Pulumi.yaml").write_text(
        f"name: langhost-dyn\nruntime:\n  name: python\n  options:\n    virtualenv: {ROOT / '.venv'}\n")
    (dir / "__main__.py").write_text(DYNAMIC_PROGRAM)
    return dir


def policy_pack(dir: Path) -> Path:
    """A pack in its own venv: the project's packages (a .pth) plus pulumi-policy from PyPI (no deps: the
    project's venv has pulumi, grpcio and protobuf)."""
    dir.mkdir(parents=True)
    (dir / "PulumiPolicy.yaml").write_text(
        "description: a tiny pack for the host's RunPlugin\nruntime:\n  name: python\n  options:\n    virtualenv: venv\n")
    (dir / "__main__.py").write_text(POLICY_PACK)
    subprocess.run([str(VENV_BIN / "python"), "-m", "venv", "--without-pip", str(dir / "venv")], check=True)
    site = subprocess.run([str(dir / "venv" / "bin" / "python"), "-c",
                           "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    project_site = subprocess.run([str(VENV_BIN / "python"), "-c",
                                   "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                  capture_output=True, text=True, check=True).stdout.strip()
    Path(site, "rocm-bake-venv.pth").write_text(project_site + "\n")
    pip = subprocess.run([str(VENV_BIN / "python"), "-m", "pip", "install", "--quiet", "--no-deps", "--target", site,
                          POLICY_WHEEL], capture_output=True, text=True, env={**os.environ, "PIP_CONFIG_FILE": os.devnull},
                         timeout=300)
    if pip.returncode != 0:
        pytest.fail(f"could not install {POLICY_WHEEL} from PyPI for the test pack:\n{pip.stderr[-2000:]}")
    return dir


def test_policy_pack_runs_through_the_host_and_refuses_a_violation(tmp_path: Path) -> None:
    pack = policy_pack(tmp_path / "pack")
    project = new_project(dynamic_program(tmp_path / "prog"), tmp_path / "state", stack="pol")

    ok = project.run("preview", "--policy-pack", str(pack), stack="pol")
    # the engine shortens a long path to its first and last parts (/tmp/.../<test dir>/pack): match the end of ours
    assert re.search(r"✅ h5-tiny-pack@v\S+ \(local: /\S*" + re.escape(f"/{pack.parent.name}/{pack.name}") + r"\)",
                     ok.stdout), ok.stdout

    refused = project.run("preview", "--policy-pack", str(pack), stack="pol", check=False,
                          extra_env={"TEXT": "forbidden"})
    assert refused.returncode != 0, refused.stdout
    assert re.search(r"\[mandatory\]\s+no-forbidden-text\s+\(pulumi-python:dynamic:Resource: hello\)", refused.stdout), \
        refused.stdout
    assert "text of hello is 'forbidden' (stack pol, project langhost-dyn)" in refused.stdout, \
        "the pack sees the stack and project (PolicyProxy's configuration)"


# -- --attach-debugger ------------------------------------------------------------------------------


def dap_send(sock: socket.socket, seq: int, command: str, arguments: dict | None = None) -> None:
    """One Debug Adapter Protocol request (what an IDE sends to debugpy)."""
    body = json.dumps({"seq": seq, "type": "request", "command": command, "arguments": arguments or {}}).encode()
    sock.sendall(b"Content-Length: %d\r\n\r\n" % len(body) + body)


def dap_messages(sock: socket.socket) -> Iterator[dict]:
    buffer = b""
    while True:
        while b"\r\n\r\n" not in buffer:
            if not (chunk := sock.recv(65536)):
                return
            buffer += chunk
        head, buffer = buffer.split(b"\r\n\r\n", 1)
        length = int(re.search(rb"Content-Length: (\d+)", head).group(1))  # type: ignore[union-attr]
        while len(buffer) < length:
            if not (chunk := sock.recv(65536)):
                return
            buffer += chunk
        body, buffer = buffer[:length], buffer[length:]
        yield json.loads(body)


def test_attach_debugger_runs_the_program_under_debugpy(tmp_path: Path) -> None:
    project = new_project(dynamic_program(tmp_path / "prog"), tmp_path / "state", stack="dbg")
    cli = subprocess.Popen([str(engine("pulumi")), "preview", "--attach-debugger", "--non-interactive", "-s", "dbg"],
                           cwd=project.dir, env=project.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        assert cli.stdout is not None
        port, head = None, []
        for line in cli.stdout:
            head.append(line)
            if match := re.search(r"Waiting for debugger to attach \(on port (\d+)\)", line):
                port = int(match[1])
                break
        assert port, f"the CLI never said where to attach:\n{''.join(head)}"
        rest: list[str] = []
        reader = threading.Thread(target=lambda: rest.extend(cli.stdout), daemon=True)  # type: ignore[arg-type]
        reader.start()
        seen = []
        with socket.create_connection(("127.0.0.1", port), timeout=120) as sock:
            dap_send(sock, 1, "initialize", {"adapterID": "python", "clientID": "rocm-bake-test"})
            dap_send(sock, 2, "attach", {"justMyCode": True})
            for message in dap_messages(sock):
                kind = message.get("command") or message.get("event")
                seen.append((message["type"], kind, message.get("success")))
                if (message["type"], kind) == ("event", "initialized"):
                    dap_send(sock, 3, "configurationDone")
                if (message["type"], kind) == ("event", "terminated"):
                    break
        assert ("response", "attach", True) in seen and ("event", "process", None) in seen, seen
        assert cli.wait(timeout=300) == 0, "".join(head + rest)
        reader.join(timeout=10)
        assert re.search(r'out: "ok"', "".join(rest)), "".join(head + rest)
    finally:
        if cli.poll() is None:
            cli.kill()
            cli.wait()


# -- the engine dies -------------------------------------------------------------------------------


def test_kill_9_of_the_cli_leaves_no_host_or_program(tmp_path: Path) -> None:
    token = f"ROCM_BAKE_LANGHOST_TEST={secrets.token_hex(8)}"
    marker = tmp_path / "creating"
    project = new_project(dynamic_program(tmp_path / "prog"), tmp_path / "state", stack="k")
    env = {**project.env, token.split("=")[0]: token.split("=")[1], "CREATE_MARKER": str(marker),
           "CREATE_SLEEP": "300"}
    cli = subprocess.Popen([str(engine("pulumi")), "up", "--yes", "--skip-preview", "--non-interactive", "-s", "k"],
                           cwd=project.dir, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while not marker.exists():
            assert cli.poll() is None, "pulumi up ended before the resource's create began"
            assert time.monotonic() < deadline, "the dynamic resource's create never began"
            time.sleep(0.2)
        before = live_processes(token)
        hosts = {pid: cmd for pid, cmd in before.items() if "pulumi-language-python" in cmd}
        assert any(cmd.split()[0].endswith("/pulumi-language-python") for cmd in hosts.values()), before
        assert any("pulumi-language-python-exec" in cmd for cmd in hosts.values()), before
    finally:
        cli.send_signal(signal.SIGKILL)
        cli.wait()

    try:
        deadline = time.monotonic() + 15
        while (left := live_processes(token, "pulumi-language-python")) and time.monotonic() < deadline:
            time.sleep(0.25)
        assert not left, f"still running 15 s after kill -9 of the CLI: {left}"
    finally:
        for pid in live_processes(token):  # whatever else this test started (the engine's dynamic provider)
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


# -- pulumi install on a fresh clone -----------------------------------------------------------------


def test_pulumi_install_on_a_fresh_clone(tmp_path: Path) -> None:
    """`git clone` then `pulumi install`: a new .venv with the program installed, and every plugin its SDKs name.

    Like `make setup`, install takes requirements.lock with its hashes required: a lock whose hashes do not
    match what the index serves makes it fail naming the lock, before anything is installed.
    A plugin of a pinned SDK that no Go module here provides (tools/engines.py NOT_BUILDABLE) cannot be
    installed offline: then install must fail naming exactly those plugins, and nothing else.
    """
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
    # The working tree's program files, so the test judges this checkout, not its last commit.
    for name in ("pyproject.toml", "requirements.txt", "requirements.lock", "Pulumi.yaml"):
        shutil.copy(ROOT / name, clone / name)
    state = tmp_path / "state"
    state.mkdir()
    project = PulumiProject(clone, state, cli_env(state))

    lock = clone / "requirements.lock"
    good_lock = lock.read_text()
    tampered = re.sub(r"(?ms)^(pydantic==\S+ \\\n.*?)(?=^\S)",
                      lambda m: re.sub(r"sha256:\w{64}", "sha256:" + "0" * 64, m[1]), good_lock)
    assert tampered != good_lock, "requirements.lock pins no pydantic to tamper with"
    lock.write_text(tampered)
    refused = project.run("install", check=False, timeout=900)
    output = refused.stdout + refused.stderr
    assert refused.returncode != 0, f"pulumi install accepted a lock with a wrong hash:\n{output[-4000:]}"
    assert "--require-hashes -r requirements.lock" in output and "DO NOT MATCH THE HASHES" in output, (
        f"pulumi install did not refuse the tampered requirements.lock by its hashes:\n{output[-4000:]}")
    venv_pip = [str(clone / ".venv" / "bin" / "python"), "-m", "pip"]
    shown = subprocess.run([*venv_pip, "show", "--quiet", "pydantic"], capture_output=True,
                           env={**os.environ, "PIP_CONFIG_FILE": os.devnull})
    assert shown.returncode != 0, "pydantic was installed from a lock whose hash for it is wrong"

    lock.write_text(good_lock)
    result = project.run("install", check=False, timeout=900)
    venv_python = clone / ".venv" / "bin" / "python"
    assert venv_python.exists(), f"pulumi install made no .venv:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    listed = subprocess.run([str(venv_python), "-m", "pip", "list", "--format", "json"], capture_output=True,
                            text=True, check=True, env={**os.environ, "PIP_CONFIG_FILE": os.devnull})
    installed = {re.sub(r"[-_.]+", "-", p["name"]).lower(): p["version"] for p in json.loads(listed.stdout)}
    for name, version in pinned_dependencies().items():
        assert installed.get(name) == version, f"{name}=={version} not in the new venv: {installed.get(name)}"

    pins = pinned_dependencies()
    unobtainable = sorted(f"{plugin}-{version}" for plugin, version in
                          (key.split(" ", 1) for key in engines_tool.NOT_BUILDABLE)
                          if pins.get(f"pulumi-{plugin}") == version)
    output = result.stdout + result.stderr
    if not unobtainable:
        assert result.returncode == 0, f"pulumi install failed:\n{output[-4000:]}"
        return
    assert result.returncode != 0
    failed = sorted(set(re.findall(r"failed to download plugin: (\S+?):", output)))
    assert failed == unobtainable, (
        f"pulumi install should fail only on the plugins no Go module here provides ({unobtainable}); it failed on "
        f"{failed}:\n{output[-4000:]}")


CONVERT_PCL = """config tag string {
  default = "gfx950"
}
resource img "docker-build:index:Image" {
  push = false
  tags = ["127.0.0.1:1/rocm-bake/x:${tag}"]
}
output ref {
  value = img.ref
}
"""


def test_convert_from_pcl_writes_a_python_project(tmp_path: Path) -> None:
    """`pulumi convert` asks the host for a whole project (GenerateProject) and to link local SDKs (Link)."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "main.pp").write_text(CONVERT_PCL)
    state = tmp_path / "state"
    state.mkdir()
    out = tmp_path / "out"
    result = subprocess.run([str(engine("pulumi")), "convert", "--from", "pcl", "--language", "python", "--out", str(out),
                             "--generate-only", "--non-interactive"], cwd=src, env=cli_env(state), capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    main = (out / "__main__.py").read_text()
    assert "import pulumi_docker_build as docker_build" in main, main
    assert 'img = docker_build.Image("img",' in main and 'tags=[f"127.0.0.1:1/rocm-bake/x:{tag}"]' in main, main
    assert 'pulumi.export("ref", img.ref)' in main, main
    docker_build = next(e for e in engines_tool.ENGINES if e.name == "docker-build")
    assert f"pulumi-docker-build=={docker_build.version}" in (out / "requirements.txt").read_text().splitlines()
    assert re.search(r"^runtime: python$", (out / "Pulumi.yaml").read_text(), re.M)


def test_package_gen_sdk_writes_the_python_sdk_of_docker_build(tmp_path: Path) -> None:
    """`pulumi package gen-sdk` reads the plugin's schema and asks the host for the SDK (GeneratePackage)."""
    docker_build = next(e for e in engines_tool.ENGINES if e.name == "docker-build")
    state = tmp_path / "state"
    state.mkdir()
    result = subprocess.run([str(engine("pulumi")), "package", "gen-sdk", f"docker-build@{docker_build.version}",
                             "--language", "python", "--out", str(tmp_path / "sdk")], cwd=tmp_path, env=cli_env(state),
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    package = tmp_path / "sdk" / "python" / "pulumi_docker_build"
    assert json.loads((package / "pulumi-plugin.json").read_text()) == {
        "resource": True, "name": "docker-build", "version": docker_build.version}
    assert re.search(r"^class Image\(pulumi\.CustomResource\):$", (package / "image.py").read_text(), re.M)
    compiled = subprocess.run([str(VENV_BIN / "python"), "-m", "compileall", "-q", str(package)], capture_output=True,
                              text=True)
    assert compiled.returncode == 0, compiled.stdout + compiled.stderr
