"""``make farm`` / ``make farm-down`` (rocm_bake/farm) for real: namespaces, veths, a bridge and five hosts.

Root only, as CI runs: a farm needs ``ip netns``. Each test's farm belongs to
a temp checkout (its own ``.rocm-bake``), so it never touches this
checkout's builders or files; every test takes its farm down, on failure too,
and asserts that nothing of it is left.
"""

from __future__ import annotations

import base64
import contextlib
import datetime
import hashlib
import hmac
import json
import os
import shutil
import socket
import ssl
import subprocess
import tempfile
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from rocm_bake.errors import RocmBakeError
from rocm_bake.farm import farm as farm_mod
from rocm_bake.farm import hosts, net, slots
from rocm_bake.farm.layout import BUCKET, BUILDERS, HOSTS, REGION, REGISTRY_USER, Layout
from rocm_bake.farm.fleet import NO_GPU_STATUS
from tests.engine_fixtures import VENV_BIN, engine

#: This host's own ``net.ipv4.tcp_retries2`` before any farm: a farm may change only its hosts' namespaces.
HOST_TCP_RETRIES2 = Path("/proc/sys/net/ipv4/tcp_retries2").read_text().strip()


BUSYBOX = Path("/bin/busybox")


def need_root_and_engines() -> None:
    if os.geteuid() != 0:
        pytest.fail("the farm tests need root (ip netns, veths), as CI runs them")
    for name in ("buildkitd", "buildx", "versitygw"):
        engine(name)


@pytest.fixture(autouse=True)
def farm_env(monkeypatch: pytest.MonkeyPatch) -> None:
    need_root_and_engines()
    monkeypatch.delenv("BUILDX_CONFIG", raising=False)  # each temp checkout's own .rocm-bake/buildx


@contextlib.contextmanager
def checkouts(*names: str) -> Iterator[list[Path]]:
    """Temp checkout roots outside pytest's basetemp (which a concurrent pytest of this user may prune)."""
    top = Path(tempfile.mkdtemp(prefix="rocm-bake-farm-test-"))
    try:
        roots = [top / name for name in names]
        for root in roots:
            root.mkdir()
        yield roots
    finally:
        shutil.rmtree(top, ignore_errors=True)


def quiet(_: str) -> None:
    pass


def cmdlines() -> dict[str, bytes]:
    """Every process's command line (pid: NUL-joined args); processes that end meanwhile are skipped."""
    found = {}
    for pid in Path("/proc").iterdir():
        if pid.name.isdigit():
            try:
                found[pid.name] = (pid / "cmdline").read_bytes()
            except OSError:
                pass
    return found


def buildx_names(root: Path) -> str:
    return farm_mod.buildx(root, "ls").stdout


def leftovers(layout: Layout) -> list[str]:
    """Anything of ``layout``'s farm still on this machine: namespaces, links, processes, files, claim, builders."""
    found = [line for line in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
             .splitlines() if line.split()[0].startswith(f"{layout.prefix}-")]
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout.splitlines()
    found += [line.split(":")[1].strip() for line in links
              if line.split(":")[1].strip().split("@")[0] in {layout.bridge, *(layout.veth(h) for h in HOSTS)}]
    found += [f"pid {pid}" for pid, args in cmdlines().items() if str(layout.dir).encode() in args]
    found += [str(path) for path in (layout.dir, slots.claims_dir() / str(layout.slot)) if path.exists()]
    found += [f"buildx {name}" for name in ("farm-builder-1", "farm-builder-2") if name in buildx_names(layout.root)]
    return found


def ca_context(layout: Layout) -> ssl.SSLContext:
    return ssl.create_default_context(cafile=str(layout.tls_dir / "ca.pem"))


def registry_status(layout: Layout, auth: str | None) -> int:
    request = urllib.request.Request(f"https://{layout.endpoint('registry')}/v2/")
    if auth:
        request.add_header("Authorization", f"Basic {auth}")
    try:
        with urllib.request.urlopen(request, context=ca_context(layout), timeout=10) as response:
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code


def s3_list(layout: Layout, access_key: str, secret_key: str) -> tuple[int, str]:
    """A SigV4-signed ListObjectsV2 of the farm bucket (path style), as Pulumi's S3 backend sends."""
    host, now = layout.endpoint("state"), datetime.datetime.now(datetime.timezone.utc)
    stamp, day = now.strftime("%Y%m%dT%H%M%SZ"), now.strftime("%Y%m%d")
    payload = hashlib.sha256(b"").hexdigest()
    canonical = "\n".join(["GET", f"/{BUCKET}", "list-type=2", f"host:{host}", f"x-amz-content-sha256:{payload}",
                           f"x-amz-date:{stamp}", "", "host;x-amz-content-sha256;x-amz-date", payload])
    scope = f"{day}/{REGION}/s3/aws4_request"
    to_sign = "\n".join(["AWS4-HMAC-SHA256", stamp, scope, hashlib.sha256(canonical.encode()).hexdigest()])
    key = f"AWS4{secret_key}".encode()
    for part in (day, REGION, "s3", "aws4_request"):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    signature = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
    request = urllib.request.Request(f"http://{host}/{BUCKET}?list-type=2", headers={
        "x-amz-date": stamp, "x-amz-content-sha256": payload,
        "Authorization": f"AWS4-HMAC-SHA256 Credential={access_key}/{scope}, "
                         f"SignedHeaders=host;x-amz-content-sha256;x-amz-date, Signature={signature}"})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def ssh(layout: Layout, known_hosts: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["ssh", "-T", "-F", "/dev/null", "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=yes",
         "-o", f"UserKnownHostsFile={known_hosts}", "-o", "ConnectTimeout=10", "-i", str(layout.ssh_identity),
         "-o", "IdentitiesOnly=yes", "-l", "root", layout.address("gpu-node"), "echo on-$(hostname -I)"],
        capture_output=True, text=True, timeout=30)


def build_on(farm: farm_mod.Farm, host: str, context: Path) -> tuple[subprocess.CompletedProcess[str], str]:
    """buildx builds ``context`` on ``host`` and pushes it to the farm registry with the farm login: (run, ref@digest)."""
    layout = farm.layout
    ref = f"{layout.endpoint('registry')}/farm-test/{host}:gfx1201"
    metadata = context / f"metadata-{host}.json"
    result = subprocess.run(
        [hosts.tool("buildx"), "--builder", layout.buildx_name(host), "build", "--progress", "plain",
         "--metadata-file", str(metadata), "--output", f"type=image,name={ref},push=true", str(context)],
        capture_output=True, text=True, timeout=300,
        env={**os.environ, "BUILDX_CONFIG": farm.exports["BUILDX_CONFIG"], "DOCKER_CONFIG": farm.exports["DOCKER_CONFIG"]})
    digest = json.loads(metadata.read_text())["containerimage.digest"] if result.returncode == 0 else ""
    return result, f"{ref}@{digest}"


@pytest.fixture(scope="module")
def farm() -> Iterator[farm_mod.Farm]:
    """One farm for the host checks; taking it down must leave nothing (checked at teardown)."""
    need_root_and_engines()
    with pytest.MonkeyPatch.context() as patch, checkouts("checkout") as (root,):
        patch.delenv("BUILDX_CONFIG", raising=False)
        made = farm_mod.up(root, quiet)
        try:
            yield made
        finally:
            farm_mod.down(root, quiet)
        assert leftovers(made.layout) == []


@pytest.fixture(scope="module")
def pushed(farm: farm_mod.Farm, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """A FROM-scratch image built on each builder through mutual TLS and pushed with the farm login: host -> ref@digest."""
    context = tmp_path_factory.mktemp("context")
    if not BUSYBOX.is_file():
        pytest.fail(f"{BUSYBOX} missing: install the Debian package busybox-static (make setup does)")
    shutil.copy(BUSYBOX, context / "busybox")
    # A RUN step too: runc must work in a builder's namespace (cgroups visible), not only COPY.
    (context / "Dockerfile").write_text('FROM scratch\nCOPY busybox /bin/busybox\nCOPY hello /hello\n'
                                        'RUN ["/bin/busybox", "sh", "-c", "/bin/busybox cat /hello > /ran"]\n')
    refs = {}
    for host in BUILDERS:
        (context / "hello").write_text(f"hello from {host}\n")
        result, ref = build_on(farm, host, context)
        assert result.returncode == 0, result.stderr[-2000:]
        refs[host] = ref
    return refs


def test_each_builder_builds_through_mutual_tls_and_pushes_with_the_login(farm: farm_mod.Farm,
                                                                         pushed: dict[str, str]) -> None:
    layout = farm.layout
    assert layout.subnet.startswith("198.18.") and len(layout.bridge) <= 15
    constraints = subprocess.run(["openssl", "x509", "-in", str(layout.tls_dir / "ca.pem"), "-noout", "-ext",
                                  "nameConstraints"], capture_output=True, text=True, check=True).stdout
    assert f"IP:198.18.{layout.slot}.0/255.255.255.0" in constraints, "the farm CA vouches for its subnet only"
    for host in BUILDERS:
        assert farm_mod.registered_endpoint(layout.root, layout.buildx_name(host)) == f"tcp://{layout.endpoint(host)}"
        assert f"/farm-test/{host}:gfx1201@sha256:" in pushed[host]
    # A client without the farm's client certificate is refused by buildkitd.
    with socket.create_connection(layout.endpoint("builder-1").split(":"), timeout=10) as raw:
        with ca_context(layout).wrap_socket(raw, server_hostname=layout.address("builder-1")) as tls:
            with pytest.raises(ssl.SSLError, match="CERTIFICATE_REQUIRED|certificate required"):
                tls.sendall(b"\0")
                tls.recv(1)


def test_the_registry_refuses_without_the_login_and_accepts_it(farm: farm_mod.Farm) -> None:
    layout = farm.layout
    config = json.loads((layout.docker_config / "config.json").read_text())
    auth = config["auths"][layout.endpoint("registry")]["auth"]
    assert base64.b64decode(auth).decode().startswith(f"{REGISTRY_USER}:")
    assert (layout.docker_config / "config.json").stat().st_mode & 0o077 == 0
    assert registry_status(layout, None) == 401
    assert registry_status(layout, base64.b64encode(b"farm:wrong").decode()) == 401
    assert registry_status(layout, auth) == 200
    password = base64.b64decode(auth).decode().split(":", 1)[1]
    for pid, args in cmdlines().items():
        assert password.encode() not in args and farm.exports["AWS_SECRET_ACCESS_KEY"].encode() not in args, \
            f"a secret in pid {pid}'s command line"


def test_the_bucket_answers_the_printed_keys_only(farm: farm_mod.Farm) -> None:
    layout = farm.layout
    keys = farm.exports["AWS_ACCESS_KEY_ID"], farm.exports["AWS_SECRET_ACCESS_KEY"]
    status, body = s3_list(layout, *keys)
    assert status == 200 and f"<Name>{BUCKET}</Name>" in body, body[:300]
    assert s3_list(layout, keys[0], "not-the-secret-key-at-all")[0] == 403
    assert farm.exports["ROCM_BAKE_STACK_BUILDERS"] == "demo-gfx950=farm-builder-1,demo-gfx1201=farm-builder-2"
    assert farm.exports["PULUMI_BACKEND_URL"].startswith(f"s3://{BUCKET}?endpoint=http://{layout.endpoint('state')}")


def test_each_host_gives_up_on_a_silent_peer_sooner_and_this_hosts_setting_is_untouched(farm: farm_mod.Farm) -> None:
    def retries(*prefix: str) -> str:
        return subprocess.run([*prefix, "sysctl", "-n", "net.ipv4.tcp_retries2"], capture_output=True, text=True,
                              check=True).stdout.strip()

    assert {host: retries("ip", "netns", "exec", farm.layout.netns(host)) for host in HOSTS} == \
        {host: str(net.TCP_RETRIES2) for host in HOSTS}
    assert retries() == HOST_TCP_RETRIES2


def test_the_gpu_node_answers_ssh_with_the_pinned_host_key_only(farm: farm_mod.Farm, tmp_path: Path) -> None:
    layout = farm.layout
    answered = ssh(layout, layout.known_hosts)
    assert answered.returncode == 0 and layout.address("gpu-node") in answered.stdout, answered.stderr
    empty = tmp_path / "empty_known_hosts"
    empty.write_text("")
    refused = ssh(layout, empty)
    assert refused.returncode != 0 and "Host key verification failed" in refused.stderr


def gpu_test(farm: farm_mod.Farm, image: str, **env: str) -> subprocess.CompletedProcess[str]:
    """``rocm-bake gpu-test`` of gfx1201 with the farm's exports (its fleet, known_hosts and key)."""
    return subprocess.run([str(VENV_BIN / "rocm-bake"), "gpu-test", "--arch", "gfx1201", "--image", image],
                          capture_output=True, text=True, timeout=120,
                          env={**{k: v for k, v in os.environ.items() if k != "GPU_HOST"}, **farm.exports, **env})


def test_the_gpu_test_runs_on_gpu_node_over_ssh_and_gpu_host_moves_it(farm: farm_mod.Farm, pushed: dict[str, str],
                                                                      tmp_path: Path) -> None:
    layout, image = farm.layout, pushed["builder-1"]
    runs = layout.host_dir("gpu-node") / "runs.log"
    default = gpu_test(farm, image)
    assert default.returncode == NO_GPU_STATUS, default.stdout + default.stderr
    digest = image.split("@", 1)[1]
    assert f"farm node {layout.fleet_address('gpu-node')}: farm-test/builder-1@{digest} is in the registry" \
        in default.stdout, default.stdout + default.stderr
    assert "no GPU on a farm node, so the test was not run: python3 -c" in default.stdout + default.stderr
    assert runs.read_text().splitlines() == [f"{layout.fleet_address('gpu-node')} {image}"]

    moved = gpu_test(farm, image, GPU_HOST="gpu-node-2")
    assert moved.returncode == NO_GPU_STATUS, moved.stdout + moved.stderr
    assert runs.read_text().splitlines()[-1] == f"{layout.fleet_address('gpu-node-2')} {image}"

    missing = gpu_test(farm, image.split("@")[0] + "@sha256:" + "0" * 64)
    assert missing.returncode == 1 and "is not in the registry" in missing.stdout + missing.stderr

    empty = tmp_path / "known_hosts"
    empty.write_text("")
    unpinned = gpu_test(farm, image, ROCM_BAKE_SSH_KNOWN_HOSTS=str(empty))
    assert unpinned.returncode == 2 and "ssh said: Host key verification failed" in unpinned.stderr, unpinned.stderr
    assert "gpu-node" in unpinned.stderr and str(empty) in unpinned.stderr
    assert len(runs.read_text().splitlines()) == 3, "a node whose host key is not pinned runs nothing"


def test_two_checkouts_run_farms_at_once() -> None:
    with checkouts("alice", "bob") as roots:
        two_farms_at_once(roots)


def two_farms_at_once(roots: list[Path]) -> None:
    farms: dict[Path, farm_mod.Farm] = {}
    errors: list[BaseException] = []

    def bring_up(root: Path) -> None:
        try:
            farms[root] = farm_mod.up(root, quiet)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=bring_up, args=(root,)) for root in roots]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert not errors, errors
        alice, bob = farms[roots[0]].layout, farms[roots[1]].layout
        assert alice.slot != bob.slot and alice.bridge != bob.bridge
        for layout in (alice, bob):
            for host in HOSTS:
                socket.create_connection(layout.endpoint(host).split(":"), timeout=5).close()
            assert registry_status(layout, None) == 401
        farm_mod.down(roots[0], quiet)
        assert leftovers(alice) == []
        assert registry_status(bob, None) == 401, "taking one farm down leaves the other running"
        shutil.rmtree(bob.dir)  # its files gone (a temp cleaner, a stray rm): down still finds it by its claim
        farm_mod.down(roots[1], quiet)
    finally:
        for root in roots:
            farm_mod.down(root, quiet)
    assert leftovers(alice) == [] and leftovers(bob) == []


def test_a_failure_mid_setup_leaves_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    with checkouts("checkout") as (root,):
        failed_up(root, monkeypatch)


def failed_up(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    made: list[Layout] = []
    real_state = hosts.start_state

    def state_fails(layout: Layout, access_key: str, secret_key: str) -> int:
        made.append(layout)
        real_state(layout, access_key, secret_key)  # really running, so the undo has a process to stop
        raise RocmBakeError("state host: simulated failure after versitygw started")

    monkeypatch.setattr(hosts, "start_state", state_fails)
    with pytest.raises(RocmBakeError, match="simulated failure"):
        farm_mod.up(root, quiet)
    assert made, "setup reached the state host"
    assert leftovers(made[0]) == []


def test_cli_down_without_a_farm_says_so(tmp_path: Path) -> None:
    result = subprocess.run(["python3", "-m", "rocm_bake.farm", "down", "--root", str(tmp_path)],
                            capture_output=True, text=True, cwd=Path(__file__).resolve().parents[1])
    assert result.returncode == 0 and result.stdout.strip() == "farm: none"
