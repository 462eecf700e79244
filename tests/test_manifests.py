"""Manifests: the shipped ones load; broken ones fail naming file and field."""

import re
from pathlib import Path

import pytest

from rocm_bake.archset import Arch
from rocm_bake.errors import RocmBakeError
from rocm_bake.manifests import load_fleet, load_targets


def test_shipped_fleet():
    fleet = load_fleet()
    assert fleet.nodes_for(Arch("gfx1151")) == ["snoc-strix"]
    assert fleet.nodes_for(Arch("gfx950")) == [] and fleet.nodes_for(Arch("gfx1250")) == []
    assert fleet.gpu_host().name == fleet.gpu_node


def test_gpu_host_override(monkeypatch):
    fleet = load_fleet()
    monkeypatch.setenv("GPU_HOST", "snoc-strix")
    assert fleet.gpu_host().name == "snoc-strix"
    assert fleet.gpu_host(fleet.gpu_node).name == fleet.gpu_node  # stack key beats env
    monkeypatch.setenv("GPU_HOST", "nowhere")
    with pytest.raises(RocmBakeError, match="unknown fleet node 'nowhere'"):
        fleet.gpu_host()


def test_shipped_targets():
    targets = load_targets()
    names = [t.name for t in targets.targets]
    for needed in ("pytorch-base", "triton-wheel", "torch", "torchvision", "amd_aiter", "vllm"):
        assert needed in names
    order = [t.name for t in targets.build_order()]
    assert order.index("pytorch-base") < order.index("torch") < order.index("vllm")
    assert targets.target("triton-wheel").device_code is False
    assert targets.default_arches == ["gfx950", "gfx1201", "gfx1151", "gfx1250"]


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("gpu_node: a\nnodes: [{name: a, host: h, gpus: [gfx95]}]\n", r"nodes\.0\.gpus\.0.*malformed"),
        ("gpu_node: b\nnodes: [{name: a, host: h, gpus: [gfx950]}]\n", "gpu_node 'b' is not one of"),
        ("gpu_node: a\nnodes: [{name: a, host: h, gpus: []}, {name: a, host: h, gpus: []}]\n", "unique"),
        ("gpu_node: a\nnodes: [{name: a, host: h, gpu: [gfx950]}]\n", r"nodes\.0\.gpu"),
        ("gpu_node: [\n", "not valid YAML"),
    ],
)
def test_bad_fleet(tmp_path, text, words):
    path = tmp_path / "fleet.yml"
    path.write_text(text)
    with pytest.raises(RocmBakeError, match=words) as info:
        load_fleet(path)
    assert str(path) in str(info.value)


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("default_arches: [gfx950]\ntargets: [{name: a, dockerfile: d, stage: s, depends_on: [b]}]\n", "unknown b"),
        (
            "default_arches: [gfx950]\ntargets: [{name: a, dockerfile: d, stage: s, depends_on: [b]},"
            " {name: b, dockerfile: d, stage: s, depends_on: [a]}]\n",
            "cycle",
        ),
        ("default_arches: [sm_90]\ntargets: []\n", r"default_arches\.0"),
    ],
)
def test_bad_targets(tmp_path, text, words):
    path = tmp_path / "targets.yml"
    path.write_text(text)
    with pytest.raises(RocmBakeError, match=words):
        load_targets(path)


NODE = "gpu_node: a\nnodes: [{{name: a, host: {host}, port: {port}, gpus: [gfx950]}}]\n"


@pytest.mark.parametrize(
    ("host", "port", "words"),
    [
        ("h", "99999", r"nodes\.0\.port: Input should be less than or equal to 65535"),
        ("h", "0", r"nodes\.0\.port: Input should be greater than or equal to 1"),
        ("h", "'ssh'", r"nodes\.0\.port"),
        ("'-oProxyCommand=touch x'", "22", r"nodes\.0\.host"),
        ("'a b'", "22", r"nodes\.0\.host"),
    ],
)
def test_bad_fleet_node_fields(tmp_path, host, port, words):
    path = tmp_path / "fleet.yml"
    path.write_text(NODE.format(host=host, port=port))
    with pytest.raises(RocmBakeError, match=words):
        load_fleet(path)


def test_fleet_port_bounds_are_inclusive(tmp_path):
    path = tmp_path / "fleet.yml"
    for port in (1, 65535):
        path.write_text(NODE.format(host="h", port=port))
        assert load_fleet(path).nodes[0].port == port


TARGET = "default_arches: [gfx950]\ntargets: [{{name: a, dockerfile: '{dockerfile}', stage: s}}]\n"


@pytest.mark.parametrize(
    ("dockerfile", "words"),
    [
        ("/etc/Dockerfile", "is absolute"),
        ("../outside/Dockerfile", r"escapes the repository \(\.\.\)"),
        ("dockerfiles/../../Dockerfile", "escapes the repository"),
        ("C:/Dockerfile", "is absolute"),
        ("dockerfiles\\\\x.Dockerfile", "POSIX separators"),
        ("", "expected a relative path"),
    ],
)
def test_dockerfile_outside_the_repo_is_refused(tmp_path, dockerfile, words):
    path = tmp_path / "targets.yml"
    path.write_text(TARGET.format(dockerfile=dockerfile))
    with pytest.raises(RocmBakeError, match=rf"targets\.0\.dockerfile: .*{words}"):
        load_targets(path)


def test_dockerfile_inside_the_repo_is_kept_as_written(tmp_path):
    path = tmp_path / "targets.yml"
    path.write_text(TARGET.format(dockerfile="dockerfiles/sub/../torch.Dockerfile"))
    assert load_targets(path).targets[0].dockerfile == "dockerfiles/sub/../torch.Dockerfile"


@pytest.mark.parametrize(
    ("content", "words"),
    [
        (b"- gpu_node: a\n", "expected a mapping of Fleet fields at the top level, got list"),
        (b"", "got nothing (empty file)"),
        (b"\x00\x01\x02\xff", "not UTF-8 text"),
        (b"gpu_node: " + b"[" * 100_000, "nested too deeply"),
        (b"gpu_node: a\nnodes: [{name: a, host: h, port: " + b"9" * 5000 + b", gpus: []}]\n", "not usable YAML"),
    ],
)
def test_hostile_manifest_files(tmp_path, content, words):
    path = tmp_path / "fleet.yml"
    path.write_bytes(content)
    with pytest.raises(RocmBakeError, match=re.escape(words)) as info:
        load_fleet(path)
    assert str(path) in str(info.value) and len(str(info.value)) < 1000


def test_a_directory_or_missing_manifest(tmp_path):
    with pytest.raises(RocmBakeError, match="is a directory, expected a YAML manifest"):
        load_fleet(tmp_path)
    with pytest.raises(RocmBakeError, match="manifest not found"):
        load_fleet(tmp_path / "nope.yml")


def test_an_endless_file_is_not_read_whole():
    with pytest.raises(RocmBakeError, match="larger than 1 MiB"):
        load_fleet(Path("/dev/zero"))
