"""Every command, every argument, hostile input: exit 2 and one ``rocm-bake: error:`` line, never a traceback.

"Every error goes through the CLI's error path: ``rocm-bake: error: ...``
naming the input, exit 2, never a traceback." The commands are discovered
from the CLI's own parser, and the cases from each argument's kind (a path,
a number, an arch, any other string), so a new command or argument is covered
without editing this file. Each case runs the real CLI in its own process with
the other required arguments set to harmless values, one argument hostile:
a fork of one interpreter that imported the CLI once (``tests/cli_forks.py``),
and, for each command's first case, also a fresh ``python -m rocm_bake``,
which must give the same exit code and stderr.

The environment keeps every case on this machine: HTTP goes to a closed
loopback port, there is no GitHub token, and the Pulumi CLI is absent.
"""

from __future__ import annotations

import argparse
import http.server
import json
import os
import re
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from rocm_bake.cli import build_parser

ROOT = Path(__file__).resolve().parent.parent
CLOSED = "127.0.0.1:9"  # discard port, nothing listens: a connection is refused at once
ERROR_LINE = re.compile(r"^rocm-bake(?: [\w-]+)*: error: \S", re.MULTILINE)

# -- hostile values, by the kind of argument they go to ------------------------------------------------------------


def _files(root: Path) -> dict[str, Path]:
    """Files and directories a path argument may be pointed at by a careless or hostile user."""
    made = {
        "missing": root / "no-such-file",
        "directory": root / "a-directory",
        "empty-file": root / "empty.yml",
        "binary": root / "garbage.bin",
        "not-utf8": root / "latin1.yml",
        "yaml-list": root / "list.yml",
        "huge-number": root / "huge.yml",
        "deep-nesting": root / "deep.yml",
    }
    made["directory"].mkdir()
    (made["directory"] / "properties").write_bytes(os.urandom(512))
    made["empty-file"].write_bytes(b"")
    made["binary"].write_bytes(bytes(range(256)) * 16 + os.urandom(4096))
    made["not-utf8"].write_bytes(b"gpu_node: caf\xe9\nnodes: [{name: \xff\xfe, host: h, gpus: [gfx950]}]\n")
    made["yaml-list"].write_text("- gpu_node: a\n- nodes: []\n")
    made["huge-number"].write_text("gpu_node: a\nnodes: [{name: a, host: h, port: " + "9" * 5000 + ", gpus: [gfx950]}]\n")
    made["deep-nesting"].write_text("gpu_node: " + "[" * 100_000 + "\n")
    return made


PATH_CASES = ("missing", "directory", "empty-file", "binary", "not-utf8", "yaml-list", "huge-number", "deep-nesting",
              "/dev/zero")
NUMBER_CASES = {"huge": "9" * 5000, "negative": "-1", "nan": "nan", "overflow": "1e999", "hex": "0x10"}
STRING_CASES = {
    "empty": "",
    "traversal": "../../../../../../etc/passwd",
    "not-utf8": os.fsdecode(b"gfx\xff\xfe950"),
    "huge-number": "9" * 5000,
    "long": "a" * 100_000,
    "option-like": "-oProxyCommand=touch /tmp/rocm-bake-pwned",
}
ARCH_CASES = {"gfx9999": "gfx9999", "GFX950;": "GFX950;", "repeat": "gfx950;gfx950", "empty": ""}
#: Extra hostile values for arguments whose syntax is richer than a word.
BY_DEST: dict[str, dict[str, str]] = {
    "overrides": {
        "bad-registry": "rocm-bake:registry=bad host:99999",
        "registry-url": "rocm-bake:registry=http://x",
        "bad-arch": "rocm-bake:pytorchRocmArch=GFX950;",
        "bad-json": "rocm-bake:buildArgs={",
        "dockerfile-dir-escapes": "rocm-bake:dockerfileDir=../../etc",
        "unknown-key": "rocm-bake:nope=1",
    },
    "images": {
        "latest": f"{CLOSED}/rocm-bake/torch:latest",
        "no-registry": "rocm-bake/torch:gfx1151-rocm10.1.0",
        "closed-port": f"{CLOSED}/rocm-bake/torch:gfx1151-rocm10.1.0",
    },
    "repo": {"traversal-repo": "../../x", "three-parts": "a/b/c"},
    "api_url": {"credentials": "https://user:secret@example.invalid", "plain-http": "http://example.invalid"},
}

#: Harmless values for the other required arguments (by dest; else by kind).
BENIGN_BY_DEST = {
    "arch": "gfx1151",
    "arches": "gfx1151",
    "stacks": "gfx1151",
    "repo": "owner/name",
    "images": f"{CLOSED}/rocm-bake/torch:gfx1151-rocm10.1.0",
}

#: Hostile-looking values a command rightly accepts, each with the outcome it gives and why.
#: Keyed (command, dest, case).
ACCEPTED: dict[tuple[str, str, str], tuple[int, str]] = {
    ("which-index", "sysfs_root", "directory"): (
        1, "a root without sys/class/kfd is a host without the amdgpu driver: 'no AMD GPU found', exit 1"),
}

#: Cases that still traceback or exit wrongly, owned by another module: strict, so a fix is noticed.
KNOWN: dict[tuple[str, str, str], str] = {}

# -- discovery -----------------------------------------------------------------------------------------------------


def leaf_commands(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    """``("index build", parser)`` for every runnable command, walking nested subcommands."""
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        yield " ".join(path), parser
        return
    for name, sub in subs[0].choices.items():
        yield from leaf_commands(sub, path + (name,))


def kind(action: argparse.Action) -> str:
    if action.choices is not None:
        return "choice"
    if action.type is not None and getattr(action.type, "__name__", "") in ("Path", "PosixPath"):
        return "path"
    if "arch" in action.dest:  # parsed by its argparse type (an ArchSet or Arch), still an arch
        return "arch"
    if action.type not in (None, str):
        return "number"
    return "string"


def valued_actions(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    """Arguments that take a value (not flags, help or version)."""
    return [a for a in parser._actions if a.nargs != 0 and not isinstance(a, (argparse._HelpAction, argparse._VersionAction))]


def hostile_values(action: argparse.Action) -> dict[str, str]:
    what = kind(action)
    if what == "choice":
        values = {"empty": "", "not-a-choice": "nope"}
    elif what == "path":
        values = {case: case for case in PATH_CASES}
    elif what == "number":
        values = dict(NUMBER_CASES)
    elif what == "arch":
        values = {**STRING_CASES, **ARCH_CASES}
    else:
        values = dict(STRING_CASES)
    return {**values, **BY_DEST.get(action.dest, {})}


@dataclass(frozen=True)
class Case:
    command: str
    dest: str
    case: str
    value: str

    @property
    def id(self) -> str:
        return f"{self.command} {self.dest}={self.case}"


def discover() -> list[Case]:
    cases = []
    for command, parser in leaf_commands(build_parser()):
        for action in valued_actions(parser):
            for case, value in hostile_values(action).items():
                cases.append(Case(command, action.dest, case, value))
    return cases


CASES = discover()
PARSERS = dict(leaf_commands(build_parser()))

# -- running -------------------------------------------------------------------------------------------------------


def argv_for(case: Case, files: dict[str, Path], scratch: Path) -> list[str]:
    parser = PARSERS[case.command]
    argv = case.command.split()
    for action in valued_actions(parser):
        if action.dest == case.dest:
            value = str(files[case.value]) if kind(action) == "path" and case.value in files else case.value
        elif action.required:
            if action.dest in BENIGN_BY_DEST:
                value = BENIGN_BY_DEST[action.dest]
            elif kind(action) == "choice":
                value = str(list(action.choices)[0])
            elif kind(action) == "path":
                value = str(scratch / action.dest)
                Path(value).mkdir()
            else:
                value = "1" if kind(action) == "number" else "x"
        else:
            continue
        if action.option_strings:
            # --opt=VALUE, so a value starting with '-' is still this option's value
            argv.append(f"{action.option_strings[-1]}={value}")
        else:
            argv += ["--", value] if value.startswith("-") else [value]
    return argv


def environment(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("GITHUB_TOKEN", "GPU_HOST", "ARCHES", "NO_PROXY", "no_proxy")
           and not k.startswith("ROCM_BAKE_")}
    proxy = f"http://{CLOSED}"
    env.update(HOME=str(home), HTTP_PROXY=proxy, HTTPS_PROXY=proxy, ALL_PROXY=proxy, http_proxy=proxy,
               https_proxy=proxy, ROCM_BAKE_PULUMI=str(home / "no-pulumi"), PYTHONPATH=str(ROOT))
    return env


@dataclass(frozen=True)
class Outcome:
    argv: list[str]
    returncode: int | None  # None: still running after the timeout
    stderr: str
    scratch: Path  # the case's own directory (its HOME and cwd are inside): stderr may name it

    def seen(self) -> tuple[int | None, str]:
        """Exit code and stderr with the scratch directory named alike, to compare two runs of a case."""
        return self.returncode, self.stderr.replace(str(self.scratch), "<scratch>")


#: Cases run a few at a time.
WORKERS = 3
TIMEOUT_S = 120


def prepare(case: Case, files: dict[str, Path], scratch: Path) -> tuple[list[str], Path, dict[str, str]]:
    """The case's argv, and the fresh working directory and environment (its own HOME) it runs in."""
    home, work = scratch / "home", scratch / "work"
    home.mkdir(parents=True)
    work.mkdir()
    return argv_for(case, files, work), work, environment(home)


def run_case(case: Case, files: dict[str, Path], scratch: Path) -> Outcome:
    """The case through the real entry point: a fresh ``python -m rocm_bake`` process."""
    argv, work, env = prepare(case, files, scratch)
    try:
        done = subprocess.run([sys.executable, "-m", "rocm_bake", *argv], capture_output=True, cwd=work, env=env,
                              timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return Outcome(argv, None, "", scratch)
    return Outcome(argv, done.returncode, done.stderr.decode("utf-8", "backslashreplace"), scratch)


def run_forked(cases: list[Case], files: dict[str, Path], root: Path) -> list[Outcome]:
    """Every case as its own process forked from one that imported the CLI once (``tests/cli_forks.py``)."""
    prepared = [prepare(case, files, root / f"case-{n}") for n, case in enumerate(cases)]
    jobs = [{"argv": argv, "cwd": str(work), "env": env, "stderr": str(work.parent / "stderr")}
            for argv, work, env in prepared]
    server_home = root / "fork-server-home"
    server_home.mkdir()
    done = subprocess.run([sys.executable, "-m", "tests.cli_forks"], cwd=ROOT, env=environment(server_home),
                          input=json.dumps({"workers": WORKERS, "timeout_s": TIMEOUT_S, "jobs": jobs}).encode(),
                          capture_output=True, check=False, timeout=TIMEOUT_S * len(jobs))
    assert done.returncode == 0, f"tests/cli_forks.py failed\n{done.stderr.decode()[-3000:]}"
    codes = {line["index"]: line["returncode"] for line in map(json.loads, done.stdout.decode().splitlines())}
    return [Outcome(argv, codes[n], Path(job["stderr"]).read_bytes().decode("utf-8", "backslashreplace"),
                    work.parent) for n, ((argv, work, _), job) in enumerate(zip(prepared, jobs))]


@pytest.fixture(scope="session")
def hostile_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("hostile-files")
    return {**_files(root), "/dev/zero": Path("/dev/zero")}


@pytest.fixture(scope="session")
def outcomes(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory,
             hostile_files: dict[str, Path]) -> dict[str, Outcome]:
    """Every selected case, run before the first assertion (in parallel); each test then checks its own."""
    selected = [item.callspec.params["case"] for item in request.session.items
                if getattr(item, "originalname", "") == "test_hostile_input_is_a_clear_error"]
    chosen = {case.id for case in selected}
    selected += [case for case in FIRST_PER_COMMAND if case.id not in chosen]  # what the entry-point test compares
    done = run_forked(selected, hostile_files, tmp_path_factory.mktemp("hostile"))
    return {case.id: outcome for case, outcome in zip(selected, done)}


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_hostile_input_is_a_clear_error(case: Case, outcomes: dict[str, Outcome], request: pytest.FixtureRequest) -> None:
    key = (case.command, case.dest, case.case)
    if key in KNOWN:
        request.applymarker(pytest.mark.xfail(strict=True, reason=KNOWN[key]))
    result = outcomes[case.id]
    shown = " ".join(a[:60] for a in result.argv)
    assert result.returncode is not None, f"rocm-bake {shown} hung for {TIMEOUT_S} s"
    stderr = result.stderr
    assert "Traceback" not in stderr, f"rocm-bake {shown}\n{stderr[-3000:]}"
    if key in ACCEPTED:
        status, why = ACCEPTED[key]
        assert result.returncode == status, f"rocm-bake {shown}: {why}; got {result.returncode}\n{stderr[-1500:]}"
        return
    assert result.returncode == 2, f"rocm-bake {shown} exited {result.returncode}\n{stderr[-1500:]}"
    assert ERROR_LINE.search(stderr), f"rocm-bake {shown}: no 'rocm-bake: error:' line\n{stderr[-1500:]}"
    assert len(stderr) < 20_000, f"rocm-bake {shown}: {len(stderr)} bytes of stderr (the input echoed whole?)"


#: One case per command, also run through the real entry point (a fresh ``python -m rocm_bake``).
FIRST_PER_COMMAND = list({case.command: case for case in reversed(CASES)}.values())


def test_forks_behave_as_the_real_entry_point(outcomes: dict[str, Outcome], tmp_path: Path,
                                              hostile_files: dict[str, Path]) -> None:
    """The fork runner changes nothing a case sees: each command's first case, run as its own
    ``python -m rocm_bake`` process, gives the same exit code and the same stderr, byte for byte."""
    with ThreadPoolExecutor(max_workers=WORKERS) as pool:
        real = list(pool.map(lambda n_case: run_case(n_case[1], hostile_files, tmp_path / f"case-{n_case[0]}"),
                             enumerate(FIRST_PER_COMMAND)))
    for case, outcome in zip(FIRST_PER_COMMAND, real):
        assert outcome.returncode is not None and "Traceback" not in outcome.stderr, (case.id, outcome.stderr)
        assert outcome.seen() == outcomes[case.id].seen(), case.id


def test_every_command_is_covered() -> None:
    """Discovery reached every command the parser has, nested ones included."""
    assert {c.command for c in CASES} == set(PARSERS)
    assert {"arch show", "index build", "index check", "plan", "gpu-test", "wheels fetch", "publish"} <= set(PARSERS)


# -- inputs a generic case cannot reach ----------------------------------------------------------------------------


def test_stack_file_whose_top_level_is_a_list(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from rocm_bake import config
    from rocm_bake.errors import RocmBakeError

    (tmp_path / "Pulumi.gfx950.yaml").write_text("- config:\n    rocm-bake:pytorchRocmArch: gfx950\n")
    with pytest.raises(RocmBakeError, match=r"top level must be a mapping with a 'config:' key, got a list"):
        config.read_stack_file("gfx950", tmp_path)
    (tmp_path / "Pulumi.gfx950.yaml").write_bytes(b"\x00\xff" * 64)
    with pytest.raises(RocmBakeError, match="not UTF-8"):
        config.read_stack_file("gfx950", tmp_path)


def test_a_list_stack_file_through_the_cli(tmp_path: Path) -> None:
    """``plan`` reads stacks from the repository's stacks/: a copy of the project with a broken one."""
    project = tmp_path / "project"
    (project / "stacks").mkdir(parents=True)
    for name in ("rocm_bake", "components", "manifests"):  # copies: the stacks dir is found beside the package
        shutil.copytree(ROOT / name, project / name, ignore=shutil.ignore_patterns("__pycache__"))
    (project / "stacks" / "Pulumi.gfx950.yaml").write_text("- rocm-bake:pytorchRocmArch: gfx950\n")
    result = subprocess.run([sys.executable, "-m", "rocm_bake", "plan", "gfx950"], capture_output=True, text=True,
                            cwd=project, env={**os.environ, "PYTHONPATH": str(project)}, timeout=120)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    assert "Pulumi.gfx950.yaml: the top level must be a mapping" in result.stderr


def test_binary_kfd_properties_is_named_not_no_gpu(tmp_path: Path) -> None:
    node = tmp_path / "sys/class/kfd/kfd/topology/nodes/1"
    node.mkdir(parents=True)
    (node / "properties").write_bytes(b"\x7fELF\x02\x01\x01\x00" + os.urandom(256))
    result = subprocess.run([sys.executable, "-m", "rocm_bake", "which-index", "--sysfs-root", str(tmp_path),
                             "--index-base", "https://wheels.example/w"],
                            capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert result.returncode == 2, result.stdout + result.stderr
    assert f"{node / 'properties'}: binary data" in result.stderr and "no AMD GPU" not in result.stdout


class _ManifestWithoutConfig(http.server.BaseHTTPRequestHandler):
    """A registry that answers every manifest GET with an OCI image manifest lacking ``config``."""

    body = json.dumps({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
                       "layers": []}).encode()

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        if self.path == "/v2/":
            self.send_response(200)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"{}")
            return
        self.send_response(200)
        self.send_header("Content-Type", "application/vnd.oci.image.manifest.v1+json")
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)

    do_HEAD = do_GET

    def log_message(self, *args: object) -> None:
        pass


def test_image_manifest_without_config_is_named(tmp_path: Path) -> None:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _ManifestWithoutConfig)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        ref = f"127.0.0.1:{server.server_address[1]}/rocm-bake/torch:gfx950-rocm10.1.0"
        result = subprocess.run(
            [sys.executable, "-m", "rocm_bake", "wheels", "fetch", "--arch", "gfx950", "--image", ref,
             "--out", str(tmp_path / "dist"), "--quiet"],
            capture_output=True, text=True, cwd=ROOT, timeout=120,
            env={k: v for k, v in os.environ.items() if "proxy" not in k.lower()},
        )
    finally:
        server.shutdown()
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    assert "needs a 'config' descriptor" in result.stderr and "'config'\n" not in result.stderr
