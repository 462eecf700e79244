"""One typed echo for every dynamic provider: ``ProviderInputs`` (components/dynamic.py).

Each provider's inputs are one frozen dataclass; what the program declares,
what state hands back and what create/update return all go through it, so an
input is echoed into the outputs the same way by every provider.
"""

from __future__ import annotations

import dataclasses

import pytest

from components.dynamic import ProviderInputs
from components.gpu_test import GpuTestInputs
from components.index_provider import IndexInputs
from components.publish import IndexPublishInputs, ReleaseInputs
from components.wheels_provider import FetchInputs
from rocm_bake.archset import Arch, ArchSet

ENDPOINTS = {"api_url": "https://api.github.com", "uploads_url": "https://uploads.github.com",
             "web_url": "https://github.com", "pages_url": "https://{owner}.github.io/{repo}"}
EXAMPLES: list[ProviderInputs] = [
    FetchInputs(arch=ArchSet("gfx950;gfx1201"), image_refs=["r.example/rocm-bake/torch:gfx950_gfx1201-rocm10.1.0"],
                dist="dist"),
    IndexInputs(arch=ArchSet("gfx950"), wheels_dir="dist/wheels/gfx950", dist="dist"),
    GpuTestInputs(arch=Arch("gfx1201"), digest="sha256:" + "0" * 64, node="n", test="python -c 1",
                  run_template="docker run {image} {test}", image="r.example/t@sha256:" + "0" * 64,
                  host="127.0.0.1", port=22, user=None, lock_path="/tmp/l"),
    ReleaseInputs(arch=ArchSet("gfx950"), dist="dist", repo="o/r", rocm_version="10.1.0",
                  tag="wheels-gfx950-rocm10.1.0", **ENDPOINTS),
    IndexPublishInputs(arch=ArchSet("gfx950"), dist="dist", repo="o/r", rocm_version="10.1.0",
                       tag="wheels-gfx950-rocm10.1.0", index_sha256="abc", **ENDPOINTS),
]


@pytest.mark.parametrize("inputs", EXAMPLES, ids=lambda i: type(i).__name__)
def test_inputs_round_trip_through_state_as_their_types(inputs: ProviderInputs) -> None:
    """State holds plain strings: read back, the arch is its type again and every other input is unchanged."""
    declared = inputs.declared()
    assert set(inputs.keys()) <= set(declared) and all(declared[name] is None for name in inputs.OUTPUTS)
    plain = {key: str(value) if key == "arch" else value for key, value in declared.items()}  # as the engine stores it
    back = type(inputs).from_props(plain)
    assert back == inputs
    assert type(back.arch) is type(inputs.arch)  # ArchSet or Arch, not str


@pytest.mark.parametrize("inputs", EXAMPLES, ids=lambda i: type(i).__name__)
def test_outputs_echo_every_input_then_what_the_provider_made(inputs: ProviderInputs) -> None:
    outs = inputs.outputs(made=1)
    assert outs == {**dataclasses.asdict(inputs), "made": 1}
    assert list(outs)[: len(inputs.keys())] == list(inputs.keys())


def test_an_input_missing_from_old_state_reads_as_none() -> None:
    """State recorded without an input (a PagesIndex without ``tag``) reads back, not KeyError."""
    props = {k: v for k, v in EXAMPLES[-1].to_props().items() if k != "tag"}
    assert IndexPublishInputs.from_props(props).tag is None
