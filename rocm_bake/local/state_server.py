#!/usr/bin/env python3
"""An S3 bucket on loopback for team Pulumi state: versitygw's POSIX gateway (``make state-server``).

The team path (docs/team-and-farm.md) keeps state in a bucket named by
``PULUMI_BACKEND_URL``; this serves one on this host, so several checkouts
(and several people on one machine) share stacks, locks included, exactly
as they would through a real S3 bucket. versitygw is built from the Go
module pinned in ``tools/versitygw`` (``make setup``); a bucket is a
directory under its data dir.

Everything lives under ``.rocm-bake/state-server/``: ``data/`` (the
buckets), ``versitygw.pid``, ``versitygw.log``, ``port`` (chosen once from
the free ports and kept, so two checkouts never collide and the printed URL
stays valid) and ``credentials`` (the root user's keys, made once at random,
0600). The keys reach versitygw through its environment, never its argv
(``/proc/PID/cmdline`` is world-readable), and the terminal of the user who
runs ``start``; no log or error message carries them.

``start`` is idempotent: a second one finds the server running and says so.

Usage: ``python -m rocm_bake.local start|stop|status state-server`` (``start`` takes ``--bucket NAME``).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import secrets
import shlex
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from rocm_bake.local import daemons
from rocm_bake.ports import free_port

ROOT = Path(__file__).resolve().parents[2]

TOOLS_BIN = ROOT / ".tools" / "bin"
STATE = ROOT / ".rocm-bake" / "state-server"
DEFAULT_BUCKET = "rocm-bake-state"
#: versitygw's default region; the Go SDK the CLI uses signs for it.
REGION = "us-east-1"
#: S3's bucket naming rules (lower case, 3-63 characters, no leading/trailing dot or dash).
BUCKET_NAME = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")


class StateServerError(Exception):
    """One line for the user: what is wrong and what to do."""


@dataclass(frozen=True)
class Credentials:
    """The root user's keys. ``repr`` never shows the secret (a traceback or log of the object stays clean)."""

    access_key_id: str
    secret_access_key: str = field(repr=False)


@dataclass(frozen=True)
class StateServer:
    """A running versitygw and the bucket it serves."""

    state: Path
    port: int
    bucket: str
    pid: int
    credentials: Credentials = field(repr=False)

    @property
    def data(self) -> Path:
        return self.state / "data"

    @property
    def bucket_dir(self) -> Path:
        return self.data / self.bucket

    @property
    def backend_url(self) -> str:
        """Pulumi's DIY S3 backend URL: this endpoint, path-style (no bucket DNS names on loopback)."""
        return (f"s3://{self.bucket}?endpoint=http://127.0.0.1:{self.port}"
                f"&use_path_style=true&region={REGION}")

    def env(self) -> dict[str, str]:
        """What a pulumi process needs to share stacks through this bucket.

        A checkout whose stack file has no ``encryptionsalt`` (every one but
        the checkout that ran ``stack init``) would mint a salt of its own;
        ``PULUMI_FALLBACK_TO_STATE_SECRETS_MANAGER`` makes it take the one in
        the bucket's checkpoint instead.
        """
        return {
            "PULUMI_BACKEND_URL": self.backend_url,
            "AWS_ACCESS_KEY_ID": self.credentials.access_key_id,
            "AWS_SECRET_ACCESS_KEY": self.credentials.secret_access_key,
            "PULUMI_FALLBACK_TO_STATE_SECRETS_MANAGER": "true",
        }

    def export_lines(self) -> list[str]:
        return [f"export {name}={shlex.quote(value)}" for name, value in self.env().items()]


def say(message: str) -> None:
    print(f"state-server: {message}", flush=True)


def versitygw() -> Path:
    path = TOOLS_BIN / "versitygw"
    if not (path.exists() and os.access(path, os.X_OK)):
        raise StateServerError(f"{path} is missing: run `make setup` (it builds versitygw from tools/versitygw)")
    return path


def checked_bucket(name: str) -> str:
    if not BUCKET_NAME.match(name) or ".." in name:
        raise StateServerError(f"bucket {name[:80]!r} is not an S3 bucket name (3-63 of a-z, 0-9, '.', '-')")
    return name


def credentials(state: Path) -> Credentials:
    """The keys kept in ``state/credentials``, made once at random (0600) when absent."""
    path = state / "credentials"
    if not path.exists():
        made = {"access_key_id": "rb" + secrets.token_hex(9), "secret_access_key": secrets.token_urlsafe(30)}
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as handle:
            json.dump(made, handle)
        say(f"made random credentials in {path} (0600)")
    os.chmod(path, 0o600)
    try:
        raw = json.loads(path.read_text())
        found = Credentials(str(raw["access_key_id"]), str(raw["secret_access_key"]))
    except (ValueError, KeyError, TypeError):
        raise StateServerError(f"{path} is not the credentials file this tool writes: remove it to make new keys")
    if not found.access_key_id or len(found.secret_access_key) < 16:
        raise StateServerError(f"{path} holds an empty or short key: remove it to make new keys")
    return found


def port_taken(port: int) -> bool:
    """Whether something listens on ``port`` (a closed connection of our own server in TIME_WAIT does not count:
    versitygw binds with SO_REUSEADDR, and so does this probe)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return True
    return False


def recorded_port(state: Path) -> int | None:
    path = state / "port"
    if not path.exists():
        return None
    text = path.read_text().strip()
    if not text.isdigit() or not 1024 <= int(text) <= 65535:
        raise StateServerError(f"{path} holds {text[:20]!r}, not a port in 1024..65535: remove it to choose one")
    return int(text)


def chosen_port(state: Path) -> int:
    """The port recorded in ``state/port``; a free one (recorded) when there is none or it was taken meanwhile."""
    port = recorded_port(state)
    if port is not None and not port_taken(port):
        return port
    if port is not None:
        say(f"port {port} (recorded in {state / 'port'}) is taken by another process; choosing another, "
            "so the export lines change")
    port = free_port()
    (state / "port").write_text(f"{port}\n")
    return port


def running_pid(state: Path) -> int | None:
    """The pid of the versitygw this state dir started, if it still runs (a reused pid is not ours)."""
    return daemons.running_pid(state / "versitygw.pid", "versitygw", state)


def listening_inodes(port: int) -> set[str]:
    """Socket inodes listening on 127.0.0.1:``port`` (``/proc/net/tcp``, state 0A)."""
    inodes = set()
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        parts = line.split()
        local, status, inode = parts[1], parts[3], parts[9]
        if status == "0A" and local == f"0100007F:{port:04X}":
            inodes.add(inode)
    return inodes


def listens(pid: int, port: int) -> bool:
    """True when process ``pid`` itself holds the listening socket (not whoever else took the port)."""
    wanted = {f"socket:[{inode}]" for inode in listening_inodes(port)}
    try:
        return any(os.readlink(f"/proc/{pid}/fd/{fd}") in wanted for fd in os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return False


def log_tail(state: Path, secret: str) -> str:
    """The end of versitygw's log for an error message, the secret struck out should it ever appear."""
    try:
        text = (state / "versitygw.log").read_text(errors="replace")[-1500:]
    except OSError:
        return ""
    return text.replace(secret, "[secret]")


def launch(state: Path, port: int, keys: Credentials) -> int:
    """Start versitygw (own session, keys in its environment only) and wait until it listens on ``port``."""
    env = daemons.daemon_env(also=("ROOT_", "VGW_"))
    env.update({"ROOT_ACCESS_KEY": keys.access_key_id, "ROOT_SECRET_KEY": keys.secret_access_key})
    with (state / "versitygw.log").open("a") as log:
        process = subprocess.Popen(
            [str(versitygw()), "--port", f"127.0.0.1:{port}", "posix", str(state / "data")],
            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True,
        )
    (state / "versitygw.pid").write_text(f"{process.pid}\n")
    deadline = time.monotonic() + 30
    while not listens(process.pid, port):
        if process.poll() is not None or time.monotonic() > deadline:
            stop_daemon(state)
            raise StateServerError(f"versitygw did not start on 127.0.0.1:{port} (log {state / 'versitygw.log'}): "
                                   + log_tail(state, keys.secret_access_key).strip().replace("\n", " | "))
        time.sleep(0.1)
    return process.pid


def start(state: Path = STATE, bucket: str = DEFAULT_BUCKET) -> StateServer:
    """Start versitygw on this checkout's port unless it runs already; make sure the bucket exists."""
    bucket = checked_bucket(bucket)
    refuse_a_lost_bucket(state, bucket)
    (state / "data").mkdir(parents=True, exist_ok=True)
    state.chmod(0o700)  # the checkpoints are the team's: only through the S3 API, never by another local user
    keys = credentials(state)
    pid = running_pid(state)
    if pid is not None:
        port = recorded_port(state)
        if port is None or not listens(pid, port):
            raise StateServerError(f"versitygw (pid {pid}) runs but not on the port in {state / 'port'}: "
                                   "run `make state-server-stop`, then start it again")
        say(f"already running (pid {pid}) on 127.0.0.1:{port}, data in {state / 'data'}")
    else:
        port = chosen_port(state)
        try:
            pid = launch(state, port, keys)
        except StateServerError:
            if not port_taken(port):
                raise
            port = chosen_port(state)  # another process bound it between our check and versitygw's bind
            pid = launch(state, port, keys)
        say(f"versitygw started (pid {pid}) on 127.0.0.1:{port}, data in {state / 'data'}, "
            f"log {state / 'versitygw.log'}")
    server = StateServer(state, port, bucket, pid, keys)
    if not server.bucket_dir.is_dir():
        server.bucket_dir.mkdir()
        say(f"made bucket {bucket} ({server.bucket_dir})")
    made = made_buckets(state)
    if bucket not in made:
        (state / "buckets").write_text("".join(f"{name}\n" for name in sorted({*made, bucket})))
    return server


def made_buckets(state: Path) -> set[str]:
    """The buckets this state dir has served (``state/buckets``): one that is missing now was lost, not new."""
    try:
        return set((state / "buckets").read_text().split())
    except OSError:
        return set()


def refuse_a_lost_bucket(state: Path, bucket: str) -> None:
    """A bucket served here before whose directory (or the whole data dir) is gone is said, never remade empty."""
    where = state / "data" / bucket
    if bucket in made_buckets(state) and not where.is_dir():
        gone = "the data directory" if not (state / "data").is_dir() else "the bucket's directory"
        raise StateServerError(
            f"bucket {bucket} is gone ({gone} was deleted): the team's state it held (every stack's checkpoints) was "
            f"in {where}. Restore it there; to start an empty bucket on purpose, remove the line {bucket!r} from "
            f"{state / 'buckets'}")


def stop(state: Path = STATE) -> None:
    said = stop_daemon(state)
    print(f"{said}; the buckets stay in {state / 'data'}" if "stopped" in said else said, flush=True)


def stop_daemon(state: Path) -> str:
    """SIGTERM to its session, up to 10 s to finish writes in flight, then SIGKILL (``rocm_bake.local.daemons``)."""
    return daemons.stop(state / "versitygw.pid", "versitygw", state, "state-server", grace_s=10.0)


def print_exports(server: StateServer) -> None:
    """The lines to paste, for this user's terminal only: the keys are this checkout's own."""
    print("\nPaste these into the shell that runs pulumi (make up/demo/preview and .tools/bin/pulumi use them):\n")
    for line in server.export_lines():
        print(line)
    passphrase = ROOT / ".rocm-bake" / "passphrase"
    where = f"here it is in {passphrase}" if passphrase.exists() else "PULUMI_CONFIG_PASSPHRASE(_FILE)"
    print(f"\nEvery checkout sharing the bucket needs the passphrase that made its stacks ({where}).")


def status(state: Path = STATE) -> str:
    pid = running_pid(state)
    return f"state-server: running, pid {pid}, 127.0.0.1:{recorded_port(state)}" if pid else "state-server: not running"


def start_main(argv: list[str]) -> int:
    """``python -m rocm_bake.local start state-server [--bucket NAME]``: start it and print the export lines."""
    parser = argparse.ArgumentParser(prog="python -m rocm_bake.local start state-server",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--state", type=Path, default=STATE)
    parser.add_argument("--bucket", default=DEFAULT_BUCKET)
    args = parser.parse_args(argv)
    try:
        print_exports(start(args.state, args.bucket))
    except StateServerError as exc:
        print(f"state-server: {exc}", file=sys.stderr)
        return 1
    return 0
