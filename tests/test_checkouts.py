"""Checkouts on one host never collide: their own registry port, builder and buildx config; `make down`.

The real thing first: two fresh ``git clone``s of this repository (its
HEAD) run a plain ``make demo`` at the same time, each with its own venv
(``make setup``; the engines come from the shared cache) and both pass.
Then ``make down`` in one stops its registry and builder and leaves no
process of it (checked by its recorded pids and by scanning ``/proc`` for a
cwd or command line inside it), while the other's ``pulumi preview
--expect-no-changes`` still passes; neither clone has a changed tracked file.
The quick tests below pin the parts: the record, port claims, the refused
builder name and the refused registry port.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import ssl
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from rocm_bake.checkout import Checkout, claim, ensure_checkout, load_checkout, local_defaults
from rocm_bake.errors import RocmBakeError
from rocm_bake.local.daemons import alive
from tests.engine_fixtures import MANIFEST_TYPES, ROOT, builder_tool, engine

DEMO_STACK = "demo-gfx950"
#: Variables of the calling shell (or of `make test`) that would steer a clone's make.
STEERING = ("PULUMI_", "ROCM_BAKE_", "BUILDX_CONFIG", "REGISTRY_PORT", "BUILDER", "VENV", "MAKEFLAGS", "MAKELEVEL",
            "MFLAGS", "GITHUB_")


@dataclass
class Clone:
    dir: Path
    log: Path

    def make(self, *targets: str, timeout: float = 900) -> subprocess.CompletedProcess:
        with self.log.open("a") as out:
            out.write(f"\n$ make {' '.join(targets)}\n")
            out.flush()
            return subprocess.run(["make", *targets], cwd=self.dir, env=clean_env(), stdout=out,
                                  stderr=subprocess.STDOUT, timeout=timeout)

    def tail(self) -> str:
        return self.log.read_text(errors="replace")[-6000:]

    def pulumi(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run([str(self.dir / ".tools" / "bin" / "pulumi"), *args, "--non-interactive"],
                              cwd=self.dir, env=clean_env(), capture_output=True, text=True, timeout=600)

    def checkout(self) -> Checkout:
        record = load_checkout(self.dir)
        assert record is not None, f"{self.dir}: make wrote no .rocm-bake/checkout.json"
        return record

    def registry_ca(self) -> ssl.SSLContext:
        """Trust the clone's own registry CA only (make registry serves https from it)."""
        return ssl.create_default_context(cafile=str(self.dir / ".rocm-bake" / "tls" / "ca.pem"))

    def tracked_changes(self) -> str:
        return subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=self.dir,
                              capture_output=True, text=True, check=True).stdout


def clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(STEERING)}


def recorded_pids(clone: Clone) -> dict[str, int]:
    pids = {}
    for name, pidfile in (("registry", clone.dir / ".registry" / "registry.pid"),
                          ("buildkitd", clone.dir / ".rocm-bake" / "buildkit" / "buildkitd.pid")):
        assert pidfile.exists(), f"{clone.dir}: no {name} pidfile {pidfile} after make demo"
        pids[name] = int(pidfile.read_text())
    return pids


def processes_inside(directory: Path) -> list[str]:
    """Every live process whose cwd is inside ``directory`` or whose command line names it."""
    needle = str(directory)
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
            cwd = os.readlink(entry / "cwd")
        except OSError:
            continue
        if (cwd == needle or cwd.startswith(needle + "/") or needle in cmdline) and alive(int(entry.name)):
            found.append(f"pid {entry.name} cwd {cwd}: {cmdline[:200]}")
    return found


@pytest.fixture(scope="module")
def clones(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Clone, Clone]]:
    """Two clones of HEAD that ran a plain `make demo` at the same time; both are brought down at the end."""
    engine("pulumi"), engine("buildkitd"), engine("buildx")
    work = tmp_path_factory.mktemp("checkouts")
    logs = tmp_path_factory.mktemp("checkout-logs")  # kept: the clones go, their make logs stay
    pair = []
    for name in ("a", "b"):
        dest = work / name
        subprocess.run(["git", "clone", "-q", str(ROOT), str(dest)], check=True, timeout=120)
        pair.append(Clone(dest, logs / f"{name}.log"))
    a, b = pair
    started = time.monotonic()
    try:
        with ThreadPoolExecutor(2) as pool:
            results = list(pool.map(lambda clone: clone.make("demo"), pair))
        for clone, result in zip(pair, results):
            assert result.returncode == 0, f"make demo failed in {clone.dir}:\n{clone.tail()}"
        print(f"two concurrent make demo (setup included): {time.monotonic() - started:.0f} s")
        yield a, b
    finally:
        for clone in pair:
            clone.make("down", timeout=120)
        shutil.rmtree(work, ignore_errors=True)


def test_two_clones_run_make_demo_at_once_each_on_its_own_registry_and_builder(clones: tuple[Clone, Clone]) -> None:
    a, b = clones
    ca, cb = a.checkout(), b.checkout()
    assert ca.registry_port != cb.registry_port and ca.builder != cb.builder
    assert ca.builder == f"rocm-bake-{ca.id}" and cb.builder == f"rocm-bake-{cb.id}"
    for clone, record in ((a, ca), (b, cb)):
        assert f"registry on {record.registry} " in clone.log.read_text(), "make registry started its own"
        images = json.loads(clone.pulumi("stack", "output", "--json", "images", "-s", DEMO_STACK).stdout)
        assert images and all(ref.startswith(f"{record.registry}/rocm-bake/") for ref in images.values()), images
        # The builder is in the clone's own buildx config, under its own name, pointing at its own buildkitd.
        inspected = subprocess.run([str(ROOT / ".tools" / "bin" / "buildx"), "inspect", record.builder],
                                   env={**clean_env(), "BUILDX_CONFIG": str(clone.dir / ".rocm-bake" / "buildx")},
                                   capture_output=True, text=True)
        assert f"unix://{clone.dir}/.rocm-bake/buildkit/buildkitd.sock" in inspected.stdout, inspected.stdout
        catalog = httpx.get(f"https://{record.registry}/v2/_catalog", verify=clone.registry_ca()).json()["repositories"]
        assert "rocm-bake/demo-base" in catalog and "rocm-bake/torch" in catalog, catalog


def test_make_demo_after_a_wiped_registry_ends_with_every_output_digest_served(clones: tuple[Clone, Clone]) -> None:
    """The registry loses its storage; the next plain `make demo` (no refresh by hand) must push again what the
    stack's outputs name, not end green with digests that answer 404."""
    _, b = clones
    registry = b.checkout().registry
    shutil.rmtree(b.dir / ".registry" / "storage")
    result = b.make("demo")
    assert result.returncode == 0, f"make demo after a wiped registry failed in {b.dir}:\n{b.tail()}"
    images = json.loads(b.pulumi("stack", "output", "--json", "images", "-s", DEMO_STACK).stdout)
    missing = {}
    with httpx.Client(verify=b.registry_ca(), timeout=30) as client:
        for name, ref in images.items():
            repository, _, digest = ref.removeprefix(f"{registry}/").partition("@")
            answer = client.head(f"https://{registry}/v2/{repository.rsplit(':', 1)[0]}/manifests/{digest}",
                                 headers={"Accept": MANIFEST_TYPES})
            if answer.status_code != 200:
                missing[name] = f"{ref}: HTTP {answer.status_code}"
    assert images and not missing, f"make demo ended green with outputs naming digests the registry lacks: {missing}"


def test_make_down_stops_only_its_own_checkout(clones: tuple[Clone, Clone]) -> None:
    a, b = clones
    a_pids, b_pids = recorded_pids(a), recorded_pids(b)
    result = a.make("down", timeout=120)
    assert result.returncode == 0, a.tail()
    for name, pid in a_pids.items():
        assert not alive(pid), f"{name} (pid {pid}) of {a.dir} still runs after make down"
    assert processes_inside(a.dir) == [], "processes of the stopped checkout remain"
    for name, pid in b_pids.items():
        assert alive(pid), f"make down in {a.dir} stopped the other checkout's {name} (pid {pid})"
    preview = b.pulumi("preview", "-s", DEMO_STACK, "--expect-no-changes")
    assert preview.returncode == 0, preview.stdout[-4000:] + preview.stderr[-4000:]
    with pytest.raises(httpx.HTTPError):
        httpx.get(f"https://{a.checkout().registry}/v2/", timeout=2, verify=a.registry_ca())


def test_no_tracked_file_changed_in_either_clone(clones: tuple[Clone, Clone]) -> None:
    for clone in clones:
        assert clone.tracked_changes() == "", f"{clone.dir}: make demo changed tracked files"
        removed = clone.pulumi("stack", "rm", "--yes", "--force", "-s", DEMO_STACK)
        assert removed.returncode == 0, removed.stdout + removed.stderr
        assert (clone.dir / "stacks" / f"Pulumi.{DEMO_STACK}.yaml").exists(), "stack rm deleted the stack file"
        assert clone.tracked_changes() == "", f"{clone.dir}: stack rm changed tracked files"


# --- the parts, without an engine -------------------------------------------------------------------------


def test_the_record_is_chosen_once_and_parsed_at_the_edge(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    first, made = ensure_checkout(tmp_path)
    again, made_again = ensure_checkout(tmp_path)
    assert made and not made_again and first == again
    assert local_defaults(tmp_path, {}) == {"rocm-bake:registry": first.registry, "rocm-bake:builder": first.builder}
    assert local_defaults(tmp_path, {"ROCM_BAKE_REGISTRY": "127.0.0.1:7"})["rocm-bake:registry"] == "127.0.0.1:7"
    (tmp_path / ".rocm-bake" / "checkout.json").write_text('{"id": "zz", "registry_port": 1, "builder": "x"}')
    with pytest.raises(RocmBakeError, match="checkout.json: id must be 8 hex digits"):
        load_checkout(tmp_path)


def test_a_port_another_checkout_holds_is_never_claimed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    holder, _ = ensure_checkout(tmp_path / "one")
    assert not claim(holder.registry_port, tmp_path / "two")
    assert claim(holder.registry_port, tmp_path / "one")
    shutil.rmtree(tmp_path / "one")  # the holder is gone: once its claim is old, it is stale
    claim_file = tmp_path / "cache" / "rocm-bake" / "ports" / str(holder.registry_port)
    os.utime(claim_file, (time.time() - 120, time.time() - 120))
    assert claim(holder.registry_port, tmp_path / "two")


def test_make_builder_refuses_a_name_another_checkout_registered(tmp_path: Path) -> None:
    env = {"BUILDX_CONFIG": str(tmp_path / "buildx")}
    other = Path(tempfile.mkdtemp(prefix="rb-other-", dir="/tmp"))  # a unix socket path has 107 bytes at most
    (other / ".rocm-bake" / "buildkit").mkdir(parents=True)
    endpoint = f"unix://{other}/.rocm-bake/buildkit/buildkitd.sock"
    created = builder_tool.buildx("create", "--name", "shared-name", "--driver", "remote", endpoint, env=env,
                                  check=False)
    assert created.returncode == 0, created.stderr
    try:
        with pytest.raises(SystemExit) as refused:
            builder_tool.start("shared-name", tmp_path / "mine" / "buildkit", ["127.0.0.1:9"], env=env)
        assert f"registered by checkout {other}" in str(refused.value) and "not re-pointed" in str(refused.value)
        assert not (tmp_path / "mine" / "buildkit" / "buildkitd.pid").exists(), "nothing may start when refused"
    finally:
        builder_tool.stop("shared-name", tmp_path / "mine" / "buildkit", env=env)  # also a wrongly started one
    assert builder_tool.registered_endpoint("shared-name", env) == endpoint, "stop removed another's builder"
    shutil.rmtree(other)


def test_make_registry_never_adopts_a_port_it_did_not_start(tmp_path: Path) -> None:
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        port = squatter.getsockname()[1]
        result = subprocess.run([sys.executable, "-m", "rocm_bake.local", "start", "registry", "--port", str(port),
                                 "--root", str(tmp_path / "registry")], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 2, result.stdout + result.stderr
    assert f"127.0.0.1:{port} is in use by a process that is not this checkout's registry" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and not (tmp_path / "registry" / "registry.pid").exists()


# --- make down finds its daemons whatever else is missing ---------------------------------------------------


def tracked_copy(dest: Path) -> Path:
    """A checkout made of this working tree's tracked files: no venv, no .tools (as after `make clean`)."""
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    for name in filter(None, listed.split(b"\0")):
        source = ROOT / os.fsdecode(name)
        if source.is_file():
            target = dest / os.fsdecode(name)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
    return dest


def without_tools(env: dict[str, str]) -> dict[str, str]:
    """``env`` with no PATH entry that reaches the engines (buildx, buildkitd): what a clone without .tools sees."""
    path = [entry for entry in env.get("PATH", "").split(":") if ".tools" not in entry and entry]
    return {**env, "PATH": ":".join(path)}


def start_daemons(checkout: Path, env: dict[str, str]) -> dict[str, int]:
    """This checkout's registry (plain http) and builder, started as `make registry builder` would; their pids."""
    record = subprocess.run([sys.executable, "-m", "rocm_bake.checkout", "--make"], cwd=checkout, env=env,
                            capture_output=True, text=True, check=True).stdout.split()
    port, builder = record
    subprocess.run([sys.executable, "-m", "rocm_bake.local", "start", "registry", "--port", port, "--root",
                    str(checkout / ".registry")], cwd=checkout, env=env, check=True, capture_output=True)
    subprocess.run([sys.executable, "-m", "rocm_bake.local", "start", "builder", "--name", builder,
                    "--registry", f"127.0.0.1:{port}"], cwd=checkout, check=True, capture_output=True,
                   env={**env, "BUILDX_CONFIG": str(checkout / ".rocm-bake" / "buildx"),
                        "PATH": f"{ROOT / '.tools' / 'bin'}:{env.get('PATH', '')}"})
    return {"registry": int((checkout / ".registry" / "registry.pid").read_text()),
            "buildkitd": int((checkout / ".rocm-bake" / "buildkit" / "buildkitd.pid").read_text())}


def kill_leftovers(pids: dict[str, int]) -> None:
    for pid in pids.values():
        if alive(pid):
            os.killpg(pid, 9)


@pytest.fixture
def checkout_dir(tmp_path: Path) -> Iterator[Path]:
    """A directory under /tmp (a unix socket path holds 107 bytes at most), removed after."""
    work = Path(tempfile.mkdtemp(prefix="rb-down-", dir="/tmp"))
    yield work
    shutil.rmtree(work, ignore_errors=True)


def test_make_down_stops_a_moved_checkouts_daemons_without_buildx(checkout_dir: Path, tmp_path: Path) -> None:
    engine("buildkitd"), engine("buildx")
    env = {**clean_env(), "XDG_CACHE_HOME": str(tmp_path / "cache")}
    before = tracked_copy(checkout_dir / "before")
    pids = start_daemons(before, env)
    try:
        moved = before.rename(checkout_dir / "moved")
        down = subprocess.run(["make", "down"], cwd=moved, env=without_tools(env), capture_output=True, text=True,
                              timeout=120)
        said = down.stdout + down.stderr
        assert down.returncode == 0, f"make down in a moved checkout without buildx failed:\n{said}"
        for name, pid in pids.items():
            assert not alive(pid), f"make down in the moved checkout left its {name} (pid {pid}) running:\n{said}"
        assert f"registry: stopped (pid {pids['registry']})" in said and \
            f"builder: stopped (pid {pids['buildkitd']})" in said, said
    finally:
        kill_leftovers(pids)


def test_make_down_in_two_checkouts_at_once_leaves_nothing_of_either(checkout_dir: Path, tmp_path: Path) -> None:
    """Both stop through `python -m rocm_bake.local stop` at the same moment: each ends only its own daemons,
    and afterwards no process of either checkout runs."""
    engine("buildkitd"), engine("buildx")
    env = {**clean_env(), "XDG_CACHE_HOME": str(tmp_path / "cache")}
    checkouts = [tracked_copy(checkout_dir / name) for name in ("one", "two")]
    pids = [start_daemons(checkout, env) for checkout in checkouts]
    try:
        def down(checkout: Path) -> subprocess.CompletedProcess[str]:
            return subprocess.run(["make", "down"], cwd=checkout, env=env, capture_output=True, text=True, timeout=120)

        with ThreadPoolExecutor(2) as pool:
            results = list(pool.map(down, checkouts))
        for checkout, result, started in zip(checkouts, results, pids):
            said = result.stdout + result.stderr
            assert result.returncode == 0, f"make down in {checkout} failed:\n{said}"
            assert f"registry: stopped (pid {started['registry']})" in said and \
                f"builder: stopped (pid {started['buildkitd']})" in said, said
            assert processes_inside(checkout) == [], f"make down left processes of {checkout}"
    finally:
        for started in pids:
            kill_leftovers(started)


def test_make_clean_stops_the_daemons_first_and_make_down_then_says_nothing_runs(checkout_dir: Path,
                                                                                 tmp_path: Path) -> None:
    engine("buildkitd"), engine("buildx")
    env = {**clean_env(), "XDG_CACHE_HOME": str(tmp_path / "cache")}
    checkout = tracked_copy(checkout_dir / "c")
    pids = start_daemons(checkout, env)
    try:
        clean = subprocess.run(["make", "clean"], cwd=checkout, env=without_tools(env), capture_output=True,
                               text=True, timeout=120)
        assert clean.returncode == 0, clean.stdout + clean.stderr
        for name, pid in pids.items():
            assert not alive(pid), f"make clean left the checkout's {name} (pid {pid}) running:\n{clean.stdout}"
        down = subprocess.run(["make", "down"], cwd=checkout, env=without_tools(env), capture_output=True,
                              text=True, timeout=120)
        assert down.returncode == 0, f"make down with nothing running failed:\n{down.stdout}{down.stderr}"
        assert [line for line in down.stdout.splitlines() if "not running" in line] == \
            ["builder: not running", "registry: not running", "state-server: not running"], down.stdout
    finally:
        kill_leftovers(pids)


def test_a_pidfile_whose_process_is_alive_is_never_deleted(tmp_path: Path) -> None:
    """A live ``sleep`` named by the pidfile but not recognisably this checkout's: not signalled, file kept."""
    from rocm_bake.local.daemons import stop

    stranger = subprocess.Popen(["sleep", "60"], start_new_session=True)
    while not Path(f"/proc/{stranger.pid}/cmdline").read_bytes():  # vfork: Popen may return mid-exec
        time.sleep(0.01)
    try:
        pidfile = tmp_path / "sleep.pid"
        pidfile.write_text(f"{stranger.pid}\n")
        said = stop(pidfile, "sleep", tmp_path / "config.yml", "sleeper", grace_s=1)
        assert stranger.poll() is None, "stop signalled a process that is not this checkout's"
        assert pidfile.exists(), f"stop deleted the pidfile of a live process ({said!r})"
        assert f"pid {stranger.pid}" in said and "left alone" in said, said
    finally:
        stranger.kill()
        stranger.wait()


def test_make_help_and_make_down_in_a_fresh_clone_write_nothing(checkout_dir: Path, tmp_path: Path) -> None:
    """No checkout record, no machine-wide port claim: only targets that start something choose those."""
    env = without_tools({**clean_env(), "XDG_CACHE_HOME": str(tmp_path / "cache")})
    checkout = tracked_copy(checkout_dir / "fresh")
    for target in ("help", "down"):
        result = subprocess.run(["make", target], cwd=checkout, env=env, capture_output=True, text=True, timeout=120)
        assert result.returncode == 0, f"make {target} in a fresh clone failed:\n{result.stdout}{result.stderr}"
        written = sorted(str(p.relative_to(checkout)) for p in (checkout / ".rocm-bake").rglob("*")) \
            if (checkout / ".rocm-bake").exists() else []
        assert written == [], f"make {target} wrote {written}"
        assert not (tmp_path / "cache" / "rocm-bake" / "ports").exists() or \
            list((tmp_path / "cache" / "rocm-bake" / "ports").iterdir()) == [], f"make {target} claimed a port"


def test_image_home_refuses_only_another_checkouts_defaults() -> None:
    from components.image_home import HomeInputs, takeover

    recorded = HomeInputs("s", "127.0.0.1:1111", "rocm-bake-aaaaaaaa", "checkout aaaaaaaa")
    other = HomeInputs("s", "127.0.0.1:2222", "rocm-bake-bbbbbbbb", "checkout bbbbbbbb")
    refused = takeover(recorded, other)
    assert refused is not None and all(v in refused for v in ("127.0.0.1:1111", "rocm-bake-aaaaaaaa",
                                                              "127.0.0.1:2222", "rocm-bake-bbbbbbbb"))
    assert takeover(recorded, HomeInputs("s", "127.0.0.1:3333", "rocm-bake-aaaaaaaa", "checkout aaaaaaaa")) is None, \
        "the same checkout may move its own stack (REGISTRY_PORT= on the make line)"
    assert takeover(recorded, HomeInputs("s", "reg.team:5000", "farm", None)) is None, "a stack file's names win"
    assert takeover(HomeInputs("s", "reg.team:5000", "farm", None), other) is not None, \
        "dropping the names from a stack file does not hand it to whoever runs next"
    assert takeover(recorded, HomeInputs("s", "127.0.0.1:1111", "rocm-bake-aaaaaaaa", "checkout bbbbbbbb")) is None


def test_a_recorded_port_another_checkout_claimed_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A hand-edited registry_port is checked against the machine-wide claims like a chosen one."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    holder, _ = ensure_checkout(tmp_path / "one")
    mine, _ = ensure_checkout(tmp_path / "two")
    record = tmp_path / "two" / ".rocm-bake" / "checkout.json"
    record.write_text(json.dumps({"id": mine.id, "registry_port": holder.registry_port, "builder": mine.builder}))
    with pytest.raises(RocmBakeError) as refused:
        ensure_checkout(tmp_path / "two")
    said = str(refused.value)
    assert f"registry_port {holder.registry_port}" in said and str(tmp_path / "one") in said, said
    record.write_text(json.dumps({"id": mine.id, "registry_port": 80, "builder": mine.builder}))
    assert ensure_checkout(tmp_path / "two")[0].registry_port == 80, "a free port is claimed for it"
    assert claim(80, tmp_path / "one") is False, "the edited port was not claimed machine-wide"


def test_a_claim_file_with_a_nul_byte_is_stale_not_a_traceback(tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    claims = tmp_path / "cache" / "rocm-bake" / "ports"
    claims.mkdir(parents=True)
    (claims / "12345").write_bytes(b"/some\0where\n")
    os.utime(claims / "12345", (time.time() - 120, time.time() - 120))
    assert claim(12345, tmp_path / "mine")


def test_make_forget_removes_this_checkouts_port_claim_and_pulumi_workspace_only(checkout_dir: Path,
                                                                                  tmp_path: Path) -> None:
    """The way back: what a checkout left outside itself (its port claim, Pulumi's workspace file) goes with it."""
    import hashlib

    env = without_tools({**clean_env(), "XDG_CACHE_HOME": str(tmp_path / "cache"),
                         "PULUMI_HOME": str(tmp_path / "pulumi-home")})
    mine, other = tracked_copy(checkout_dir / "mine"), tracked_copy(checkout_dir / "other")
    workspaces = tmp_path / "pulumi-home" / "workspaces"
    workspaces.mkdir(parents=True)
    left = {}
    for checkout in (mine, other):
        port = subprocess.run([sys.executable, "-m", "rocm_bake.checkout", "--make"], cwd=checkout, env=env,
                              capture_output=True, text=True, check=True).stdout.split()[0]
        digest = hashlib.sha1(str(checkout / "Pulumi.yaml").encode()).hexdigest()
        workspace = workspaces / f"rocm-bake-{digest}-workspace.json"
        workspace.write_text('{"stacks": {}}')
        left[checkout] = [tmp_path / "cache" / "rocm-bake" / "ports" / port, workspace]
    forgot = subprocess.run(["make", "forget"], cwd=mine, env=env, capture_output=True, text=True, timeout=60)
    assert forgot.returncode == 0, forgot.stdout + forgot.stderr
    assert [str(p) for p in left[mine] if p.exists()] == [], f"make forget left these behind:\n{forgot.stdout}"
    assert all(p.exists() for p in left[other]), "make forget removed another checkout's claim or workspace"
    for path in left[mine]:
        assert f"forget: removed {path}" in forgot.stdout, forgot.stdout
