"""Manifests: the shipped ones load; broken ones fail naming file and field."""

import pytest

from rocm_bake.errors import RocmBakeError
from rocm_bake.manifests import load_fleet, load_targets


def test_shipped_fleet():
    fleet = load_fleet()
    assert fleet.nodes_for("gfx1151") == ["snoc-strix"]
    assert fleet.nodes_for("gfx950") == [] and fleet.nodes_for("gfx1250") == []
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
    assert "torch" in targets.wheel_projects()


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
