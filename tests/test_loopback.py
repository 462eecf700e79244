"""Loopback is an IP literal in 127.0.0.0/8, ``::1``, or exactly ``localhost``: one function, used everywhere.

Plain http carries a credential, an install line or a page link only to
loopback; a name that merely starts with ``127.`` (``127.0.0.1.evil.example``)
is whoever owns it in DNS.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from rocm_bake import loopback
from rocm_bake.errors import RocmBakeError
from rocm_bake.gpu.which import check_index_base
from rocm_bake.http_waits import check_service_url
from rocm_bake.publish.github import GitHubEndpoints
from rocm_bake.publish.landing import safe_link
from rocm_bake.registry.scheme import scheme_for

ROOT = Path(__file__).resolve().parent.parent
IMPOSTORS = ["127.0.0.1.evil.example", "127.evil.example", "localhost.evil.example", "127.0.0.1.nip.io",
             "::ffff:7f00:1", "0.0.0.0", "127.1"]


def load_script(path: Path, name: str):  # noqa: ANN201 - a module
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("host", ["127.0.0.1", "127.255.0.9", "::1", "[::1]", "localhost", "LOCALHOST"])
def test_loopback_hosts(host: str) -> None:
    assert loopback.is_loopback(host)


@pytest.mark.parametrize("host", IMPOSTORS + ["", "10.0.0.1", "example.com"])
def test_names_that_only_look_like_loopback_are_not(host: str) -> None:
    assert not loopback.is_loopback(host)


@pytest.mark.parametrize("registry, loop", [
    ("127.0.0.1:5000", True), ("127.0.0.2", True), ("localhost:5000", True), ("[::1]:5000", True),
    ("127.0.0.1.evil.example:5000", False), ("ghcr.io", False), ("[2001:db8::1]:443", False),
])
def test_a_registry_is_loopback_by_its_host(registry: str, loop: bool) -> None:
    assert loopback.is_loopback_registry(registry) is loop


@pytest.mark.parametrize("host", IMPOSTORS[:4])
def test_every_gate_refuses_plain_http_to_a_name_that_starts_with_127(host: str) -> None:
    url = f"http://{host}:8080/api"
    with pytest.raises(ValueError, match="plain http is allowed only to loopback"):
        check_service_url(url)
    with pytest.raises(ValueError, match="plain http is allowed only to loopback"):
        GitHubEndpoints(api_url=url)
    with pytest.raises(RocmBakeError, match="--index-base: plain http is refused off loopback"):
        check_index_base(url)
    assert safe_link(url) is None, "a landing page links plain http only to loopback"
    assert scheme_for(f"{host}:5000") == "https", "off loopback a registry is always https, never probed"


def test_the_deploy_script_and_the_builder_use_the_same_function() -> None:
    stack_publish = load_script(ROOT / ".github" / "scripts" / "stack_publish.py", "stack_publish_loopback")
    from rocm_bake.local import builder
    assert stack_publish.is_loopback_registry is loopback.is_loopback_registry
    assert "[registry.\"127.0.0.2:5001\"]" in builder.config_text(["127.0.0.2:5001"]), "127.0.0.0/8 is loopback"
    with pytest.raises(SystemExit, match="not a loopback registry"):
        builder.config_text(["127.0.0.1.evil.example:5000"])
