"""Registry logins the Docker way, against a real ``docker-registry`` asking for one (htpasswd, over TLS).

The login lives where ``docker login`` puts it: ``$DOCKER_CONFIG/config.json``
(``auths``), or a credential helper it names (``credsStore``,
``credHelpers``): here a fake ``docker-credential-fake`` on PATH that answers
the helper protocol and records how it was called. ``rocm-bake wheels
fetch`` runs as a subprocess; the wheels provider's ``create`` and ``diff``
in process. Every output is searched for any fragment of the password.
"""

from __future__ import annotations

import base64
import json
import os
import secrets
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from components.wheels_provider import FetchedWheelsProvider
from rocm_bake.errors import RocmBakeError
from rocm_bake.registry.client import RegistryClient, parse_ref
from rocm_bake.registry.credentials import Credential, config_path, lookup
from rocm_bake.registry.tls import RegistryTls, ensure_tls

from tests.registry_fixtures import Entry, Layer, push_image, running_registry, wheel, write_htpasswd

ROOT = Path(__file__).resolve().parent.parent
TAG = "gfx950-rocm10.1.0"
REPO = "rocm-bake/private-torch"
USER = "ci"
SECRET = f"pw-{secrets.token_hex(12)}"
WRONG = f"no-{secrets.token_hex(12)}"
WHEEL = wheel("torch", "2.15.0")


@dataclass
class LoginRegistry:
    address: str
    tls: RegistryTls
    digest: str

    @property
    def ref(self) -> str:
        return f"{self.address}/{REPO}:{TAG}"


#: This module's fixture that starts docker-registry (tests/conftest.py marks its tests ``services``).
SERVICE_FIXTURES = {"login_registry"}


@pytest.fixture(scope="module")
def login_registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LoginRegistry]:
    """The image is pushed while the registry is open; then it restarts on the same storage asking for a login."""
    tls = ensure_tls(tmp_path_factory.mktemp("tls"))
    root = tmp_path_factory.mktemp("login-registry")
    with pytest.MonkeyPatch.context() as env:
        env.setenv("SSL_CERT_FILE", str(tls.bundle))
        for address in running_registry(root, tls):
            digest = push_image(address, REPO, TAG, [Layer([Entry("wheels", kind="dir"),
                                                             Entry(f"wheels/{WHEEL}", b"private" * 50)])]).digest
        htpasswd = write_htpasswd(root / "htpasswd", USER, SECRET)
        for address in running_registry(root, tls, htpasswd):
            yield LoginRegistry(address, tls, digest)


FAKE_HELPER = '''#!{python}
"""docker-credential-fake: the helper protocol's ``get``, answering from logins.json beside it."""
import json, sys
from pathlib import Path
here = Path(__file__).resolve().parent
server = sys.stdin.read()
with open(here / "calls.log", "a") as log:
    log.write(json.dumps({{"argv": sys.argv[1:], "stdin": server}}) + "\\n")
logins = json.loads((here / "logins.json").read_text())
if sys.argv[1:] != ["get"] or server not in logins:
    print("credentials not found in native keychain")
    sys.exit(1)
print(json.dumps({{"ServerURL": server, "Username": logins[server][0], "Secret": logins[server][1]}}))
'''


@pytest.fixture
def docker_home(tmp_path: Path, login_registry: LoginRegistry) -> Path:
    """An empty DOCKER_CONFIG dir, and the fake helper on PATH (bin/ beside it)."""
    (tmp_path / "docker").mkdir()
    helper = tmp_path / "bin" / "docker-credential-fake"
    helper.parent.mkdir()
    helper.write_text(FAKE_HELPER.format(python=sys.executable))
    helper.chmod(0o755)
    (helper.parent / "logins.json").write_text(json.dumps({login_registry.address: [USER, SECRET]}))
    return tmp_path


def write_config(home: Path, config: dict) -> Path:
    path = home / "docker" / "config.json"
    path.write_text(json.dumps(config))
    return path


def basic(user: str, password: str) -> str:
    return base64.b64encode(f"{user}:{password}".encode()).decode()


def fetch(home: Path, login_registry: LoginRegistry, **extra: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ROCM_BAKE_REGISTRY_")}
    env.update(DOCKER_CONFIG=str(home / "docker"), SSL_CERT_FILE=str(login_registry.tls.bundle),
               PATH=f"{home / 'bin'}:{env['PATH']}", **extra)
    return subprocess.run([sys.executable, "-m", "rocm_bake", "wheels", "fetch", "--arch", "gfx950", "--image",
                           login_registry.ref, "--out", str(home / "dist")], capture_output=True, text=True,
                          cwd=ROOT, env=env, timeout=120)


def assert_no_fragment(text: str, *secrets_: str) -> None:
    """No 5-character piece of any secret (nor the secret's base64 pair) appears in ``text``."""
    for secret in secrets_:
        for piece in (secret, basic(USER, secret)):
            found = [piece[i:i + 5] for i in range(len(piece) - 4) if piece[i:i + 5] in text]
            assert not found, f"fragments of a secret in the output: {found}"


def fetched(home: Path) -> bytes:
    return (home / "dist" / "wheels" / "gfx950" / WHEEL).read_bytes()


def test_a_docker_login_in_auths_is_used(docker_home: Path, login_registry: LoginRegistry) -> None:
    write_config(docker_home, {"auths": {login_registry.address: {"auth": basic(USER, SECRET)}}})
    result = fetch(docker_home, login_registry)
    assert result.returncode == 0, result.stderr
    assert fetched(docker_home) == b"private" * 50
    assert_no_fragment(result.stdout + result.stderr, SECRET)


def test_a_url_key_with_username_and_password_is_used(docker_home: Path, login_registry: LoginRegistry) -> None:
    write_config(docker_home, {"auths": {f"https://{login_registry.address}/v2/":
                                         {"username": USER, "password": SECRET}}})
    result = fetch(docker_home, login_registry)
    assert result.returncode == 0, result.stderr
    assert fetched(docker_home) == b"private" * 50


def helper_calls(home: Path) -> list[dict]:
    return [json.loads(line) for line in (home / "bin" / "calls.log").read_text().splitlines()]


def test_the_creds_store_helper_is_called_as_docker_calls_it(docker_home: Path, login_registry: LoginRegistry) -> None:
    # credsStore wins over auths: the entry docker login leaves beside a store holds no login
    write_config(docker_home, {"credsStore": "fake", "auths": {login_registry.address: {}}})
    result = fetch(docker_home, login_registry)
    assert result.returncode == 0, result.stderr
    assert fetched(docker_home) == b"private" * 50
    # `docker-credential-fake get`, the server address alone on stdin (no newline), once for the whole fetch
    assert helper_calls(docker_home) == [{"argv": ["get"], "stdin": login_registry.address}]
    assert_no_fragment(result.stdout + result.stderr, SECRET)


def test_cred_helpers_win_over_the_creds_store(docker_home: Path, login_registry: LoginRegistry) -> None:
    write_config(docker_home, {"credsStore": "absent", "credHelpers": {login_registry.address: "fake"}})
    result = fetch(docker_home, login_registry)
    assert result.returncode == 0, result.stderr
    assert helper_calls(docker_home) == [{"argv": ["get"], "stdin": login_registry.address}]


def test_a_wrong_password_is_one_line_naming_the_registry_and_the_file(docker_home: Path,
                                                                       login_registry: LoginRegistry) -> None:
    path = write_config(docker_home, {"auths": {login_registry.address: {"auth": basic(USER, WRONG)}}})
    result = fetch(docker_home, login_registry)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr == (f"rocm-bake: error: manifest {login_registry.ref}: {login_registry.address} answered "
                             f"HTTP 401: authentication required: it refused the login from {path} (auths)\n")
    assert not (docker_home / "dist" / "wheels").exists()
    assert_no_fragment(result.stdout + result.stderr, WRONG, SECRET)


def test_no_login_is_one_line_naming_the_registry_and_where_it_looked(docker_home: Path,
                                                                      login_registry: LoginRegistry) -> None:
    result = fetch(docker_home, login_registry)
    path = docker_home / "docker" / "config.json"
    assert result.returncode == 2
    assert result.stderr == (f"rocm-bake: error: manifest {login_registry.ref}: {login_registry.address} answered "
                             f"HTTP 401: authentication required: no login for {login_registry.address} in {path} "
                             f"(docker login {login_registry.address}, or set "
                             f"ROCM_BAKE_REGISTRY_USERNAME/ROCM_BAKE_REGISTRY_PASSWORD)\n")


def test_a_helper_missing_from_path_is_named(docker_home: Path, login_registry: LoginRegistry) -> None:
    path = write_config(docker_home, {"credsStore": "nowhere"})
    result = fetch(docker_home, login_registry)
    assert result.returncode == 2
    assert result.stderr == (f"rocm-bake: error: registry {login_registry.address}: credential helper "
                             f"docker-credential-nowhere is not on PATH (credsStore in {path} names it)\n")


def test_a_helper_without_the_login_is_no_login(docker_home: Path, login_registry: LoginRegistry) -> None:
    (docker_home / "bin" / "logins.json").write_text("{}")
    path = write_config(docker_home, {"credHelpers": {login_registry.address: "fake"}})
    result = fetch(docker_home, login_registry)
    assert result.returncode == 2
    assert (f"no login for {login_registry.address} in docker-credential-fake (credHelpers['{login_registry.address}'] "
            f"in {path}) (docker login") in result.stderr


def test_the_environment_overrides_the_docker_config(docker_home: Path, login_registry: LoginRegistry) -> None:
    write_config(docker_home, {"auths": {login_registry.address: {"auth": basic(USER, WRONG)}}})
    result = fetch(docker_home, login_registry, ROCM_BAKE_REGISTRY_USERNAME=USER, ROCM_BAKE_REGISTRY_PASSWORD=SECRET)
    assert result.returncode == 0, result.stderr
    assert_no_fragment(result.stdout + result.stderr, SECRET, WRONG)


def test_the_wheels_provider_reads_the_docker_login(docker_home: Path, login_registry: LoginRegistry,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("ROCM_BAKE_REGISTRY_USERNAME", "ROCM_BAKE_REGISTRY_PASSWORD"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("DOCKER_CONFIG", str(docker_home / "docker"))
    monkeypatch.setenv("SSL_CERT_FILE", str(login_registry.tls.bundle))
    monkeypatch.setenv("PATH", f"{docker_home / 'bin'}:{os.environ['PATH']}")
    write_config(docker_home, {"credsStore": "fake"})
    props = {"arch": "gfx950", "image_refs": [login_registry.ref], "dist": str(docker_home / "dist"),
             "wheel_dir": "/wheels/"}
    provider = FetchedWheelsProvider()
    created = provider.create(props)  # resolves the tag and fetches, logged in through the helper
    assert created.outs["manifest_digests"] == [login_registry.digest]
    (docker_home / "bin" / "logins.json").write_text(json.dumps({login_registry.address: [USER, WRONG]}))
    with pytest.raises(RocmBakeError, match=r"authentication required: it refused the login from "
                                            r"docker-credential-fake \(credsStore in "):
        provider.update(created.id, created.outs, props)
    assert_no_fragment(json.dumps(created.outs), SECRET)


# -- the reader alone --------------------------------------------------------------------------------------


def test_reader_order_and_keys(tmp_path: Path) -> None:
    env = {"DOCKER_CONFIG": str(tmp_path)}
    assert config_path(env) == tmp_path / "config.json" and lookup("r.example", env) is None
    (tmp_path / "config.json").write_text(json.dumps({"auths": {
        "https://index.docker.io/v1/": {"auth": basic("hub", "h")},
        "http://r.example:5000/": {"identitytoken": "itok"},
        "other.example": {"email": "only@example"},
    }}))
    hub = lookup("docker.io", env)
    assert (hub.username, hub.secret, hub.source) == ("hub", "h", f"{tmp_path / 'config.json'} (auths)")
    token = lookup("r.example:5000", env)
    assert token.is_token and token.secret == "itok"
    assert lookup("other.example", env) is None and lookup("r.example", env) is None
    both = {**env, "ROCM_BAKE_REGISTRY_USERNAME": "u", "ROCM_BAKE_REGISTRY_PASSWORD": "p"}
    assert lookup("docker.io", both) == Credential("u", "p", "$ROCM_BAKE_REGISTRY_USERNAME/$ROCM_BAKE_REGISTRY_PASSWORD")
    assert "h'" not in repr(hub) and "secret" not in repr(hub)


@pytest.mark.parametrize(("text", "line"), [
    ("{", "config.json: not JSON (line 1)"),
    ("[]", "config.json: the top level must be an object"),
    ('{"auths": {"r.example": {"auth": "bm90LWEtcGFpcg=="}}}',
     "config.json (auths): the 'auth' of r.example is not base64 of USER:PASSWORD"),
    ('{"credHelpers": ["x"]}', "config.json: 'credHelpers' must be an object of registry -> helper name"),
])
def test_a_bad_config_file_is_one_line_naming_it(tmp_path: Path, text: str, line: str) -> None:
    (tmp_path / "config.json").write_text(text)
    with pytest.raises(RocmBakeError) as caught:
        lookup("r.example", {"DOCKER_CONFIG": str(tmp_path)})
    assert str(caught.value) == f"{tmp_path}/{line}"


def test_an_identity_token_is_not_sent_as_basic_auth(docker_home: Path, login_registry: LoginRegistry,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOCKER_CONFIG", str(docker_home / "docker"))
    monkeypatch.setenv("SSL_CERT_FILE", str(login_registry.tls.bundle))
    for name in ("ROCM_BAKE_REGISTRY_USERNAME", "ROCM_BAKE_REGISTRY_PASSWORD"):
        monkeypatch.delenv(name, raising=False)
    path = write_config(docker_home, {"auths": {login_registry.address: {"identitytoken": SECRET}}})
    with RegistryClient(login_registry.address) as client, pytest.raises(RocmBakeError) as caught:
        client.resolve_digest(parse_ref(login_registry.ref))
    assert str(caught.value) == (f"manifest {login_registry.ref}: {login_registry.address} asks for a username and "
                                 f"password, and the login from {path} (auths) is an identity token")
