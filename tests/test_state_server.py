"""``make state-server``'s own code (rocm_bake/local/state_server.py) against the real versitygw.

Each test gives the server a temp state dir, as two checkouts have two
``.rocm-bake/state-server`` dirs; the pulumi lifecycle on the bucket is
tests/test_team_state.py.
"""

from __future__ import annotations

import os
import socket
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from tests.engine_fixtures import engine
from rocm_bake.local import state_server  # noqa: E402,I001
from rocm_bake.local.daemons import alive


@pytest.fixture
def state(tmp_path: Path):
    engine("versitygw")
    dirs: list[Path] = []

    def make(name: str = "checkout") -> Path:
        dirs.append(tmp_path / name / ".rocm-bake" / "state-server")
        return dirs[-1]

    yield make
    for path in dirs:
        state_server.stop(path)


def test_keys_port_and_bucket_are_made_once_and_a_second_start_says_it_runs(state, capsys) -> None:
    where = state()
    first = state_server.start(where)
    keys = where / "credentials"
    assert stat.S_IMODE(keys.stat().st_mode) == 0o600 and stat.S_IMODE(where.stat().st_mode) == 0o700
    assert (where / "port").read_text().strip() == str(first.port)
    assert first.bucket_dir == where / "data" / "rocm-bake-state" and first.bucket_dir.is_dir()
    assert state_server.listens(first.pid, first.port)
    assert first.backend_url == (f"s3://rocm-bake-state?endpoint=http://127.0.0.1:{first.port}"
                                 "&use_path_style=true&region=us-east-1")
    capsys.readouterr()

    second = state_server.start(where)
    assert (second.pid, second.port, second.credentials) == (first.pid, first.port, first.credentials)
    assert f"already running (pid {first.pid}) on 127.0.0.1:{first.port}" in capsys.readouterr().out

    state_server.stop(where)
    assert not alive(first.pid)
    again = state_server.start(where)
    assert again.pid != first.pid
    assert (again.port, again.credentials) == (first.port, first.credentials), "chosen once, kept across restarts"


def test_two_checkouts_get_their_own_ports_keys_and_servers(state) -> None:
    mine, theirs = state_server.start(state("alice")), state_server.start(state("bob"))
    assert mine.port != theirs.port
    assert mine.credentials != theirs.credentials
    assert alive(mine.pid) and alive(theirs.pid)
    state_server.stop(mine.state)
    assert not alive(mine.pid) and alive(theirs.pid), "stop ends this checkout's server only"


def test_a_recorded_port_another_process_took_is_replaced_and_said(state, capsys) -> None:
    where = state()
    where.mkdir(parents=True)
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        taken = squatter.getsockname()[1]
        (where / "port").write_text(f"{taken}\n")
        server = state_server.start(where)
    assert server.port != taken
    assert (where / "port").read_text().strip() == str(server.port)
    assert f"port {taken} (recorded in {where / 'port'}) is taken by another process" in capsys.readouterr().out


def test_the_keys_reach_versitygw_by_its_environment_never_its_argv(state) -> None:
    server = state_server.start(state())
    secret = server.credentials.secret_access_key
    places = {  # where the secret was found: names only, so a failure never prints the key itself
        "argv": secret.encode() in Path(f"/proc/{server.pid}/cmdline").read_bytes(),
        "environ": f"ROOT_SECRET_KEY={secret}".encode() in Path(f"/proc/{server.pid}/environ").read_bytes(),
        "repr": secret in repr(server),
        "log": secret in (server.state / "versitygw.log").read_text(),
    }
    assert [place for place, found in places.items() if found] == ["environ"]


def test_the_bucket_refuses_a_wrong_key(state, tmp_path: Path) -> None:
    """The keys are enforced: pulumi with the printed keys lists stacks, with a wrong secret it is refused."""
    server = state_server.start(state())
    project = tmp_path / "project"
    project.mkdir()
    (project / "Pulumi.yaml").write_text("name: keycheck\nruntime: python\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PULUMI_", "AWS_"))}
    env.update(server.env(), PULUMI_CONFIG_PASSPHRASE="not-the-point")

    def pulumi(*args: str, **extra: str) -> subprocess.CompletedProcess:
        return subprocess.run([str(engine("pulumi")), *args, "--non-interactive"], cwd=project, env={**env, **extra},
                              capture_output=True, text=True, timeout=120)

    created = pulumi("stack", "init", "dev")
    assert created.returncode == 0, created.stderr
    assert (server.bucket_dir / ".pulumi" / "stacks" / "keycheck" / "dev.json").is_file()
    wrong = "W" * len(server.credentials.secret_access_key)
    refused = pulumi("stack", "ls", AWS_SECRET_ACCESS_KEY=wrong)
    assert refused.returncode != 0
    assert "SignatureDoesNotMatch" in refused.stderr or "403" in refused.stderr, refused.stderr
    leaked = [r.args[1:3] for r in (created, refused) if server.credentials.secret_access_key in r.stdout + r.stderr]
    assert leaked == []


@pytest.mark.parametrize(("setup", "args", "message"), [
    (None, ["--bucket", "Team_State"], "bucket 'Team_State' is not an S3 bucket name"),
    ("credentials", [], "credentials is not the credentials file this tool writes: remove it to make new keys"),
    ("port", [], "port holds 'eighty', not a port in 1024..65535: remove it to choose one"),
])
def test_bad_input_is_one_line_and_starts_nothing(tmp_path: Path, setup: str | None, args: list[str],
                                                  message: str) -> None:
    engine("versitygw")
    where = tmp_path / "state-server"
    where.mkdir()
    if setup == "credentials":
        (where / "credentials").write_text('{"access_key_id": "x", "secret"')
    if setup == "port":
        (where / "port").write_text("eighty\n")
    result = subprocess.run([sys.executable, "-m", "rocm_bake.local", "start", "state-server", "--state",
                             str(where), *args], capture_output=True, text=True, timeout=60)
    assert result.returncode == 1
    assert message in result.stderr, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.stderr
    assert not (where / "versitygw.pid").exists()


def test_a_port_held_only_by_closing_connections_is_kept(state, capsys) -> None:
    """After a stop, the server's own closed connections sit in TIME_WAIT on its port: the port is still ours."""
    where = state()
    where.mkdir(parents=True)
    with socket.socket() as listener:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as versitygw's (Go's net.Listen) is
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        with socket.create_connection(("127.0.0.1", port)) as client:
            accepted, _ = listener.accept()
            accepted.close()  # the server side closes first: its end waits in TIME_WAIT on `port`
            client.recv(1)
    (where / "port").write_text(f"{port}\n")
    server = state_server.start(where)
    assert server.port == port, f"moved from its recorded port {port} to {server.port}: {capsys.readouterr().out}"


def test_a_deleted_bucket_or_data_dir_is_said_never_silently_remade(state) -> None:
    where = state()
    first = state_server.start(where)
    (first.bucket_dir / "marker").write_text("the team's checkpoints")
    state_server.stop(where)
    for gone in (first.bucket_dir, first.data):
        subprocess.run(["rm", "-rf", str(gone)], check=True)
        with pytest.raises(state_server.StateServerError) as refused:
            state_server.start(where)
        said = str(refused.value)
        assert "team's state" in said and str(first.bucket_dir) in said and "gone" in said, said
        assert not first.bucket_dir.exists(), "an empty bucket was made in place of the team's"
        assert state_server.running_pid(where) is None, "a server was left running for a lost bucket"


def test_the_pasted_aws_keys_reach_no_daemon(state, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The export lines put AWS keys into the user's shell; versitygw, buildkitd and the registry never hold them."""
    from rocm_bake.local.registry import start as start_registry, stop_registry
    from rocm_bake.ports import free_port
    from tests.engine_fixtures import builder_tool

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "rbPASTEDKEYID")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "pasted-secret-must-not-spread")
    server = state_server.start(state())
    registry_root = tmp_path / "registry"
    kit = Path(os.path.realpath("/tmp")) / f"rb-kit-{os.getpid()}"
    try:
        start_registry(registry_root, free_port())
        builder_tool.start("rb-aws-test", kit, ["127.0.0.1:9"], env={"BUILDX_CONFIG": str(tmp_path / "buildx")})
        pids = {"versitygw": server.pid, "registry": int((registry_root / "registry.pid").read_text()),
                "buildkitd": int((kit / "buildkitd.pid").read_text())}
        holding = [name for name, pid in pids.items()
                   if b"pasted-secret-must-not-spread" in Path(f"/proc/{pid}/environ").read_bytes()]
        assert holding == [], f"the pasted AWS secret is in the environment of {holding}"
    finally:
        builder_tool.stop("rb-aws-test", kit, env={"BUILDX_CONFIG": str(tmp_path / "buildx")})
        stop_registry(registry_root)
        subprocess.run(["rm", "-rf", str(kit)], check=False)

