"""Stack config: every shipped stack loads; bad keys and values name the key; the arch is parsed once."""

import re

import pytest

from rocm_bake.archset import Arch, ArchSet
from rocm_bake.config import KEYS, STACKS_DIR, StackConfig, from_engine_values, load_stack_config, read_stack_file
from rocm_bake.config import stack_config_from_mapping
from rocm_bake.errors import RocmBakeError


@pytest.mark.parametrize("stack", ["gfx950", "gfx1201", "gfx1151", "gfx1250"])
def test_one_stack_per_default_arch(stack):
    config = load_stack_config(stack)
    assert config.arches == [stack] and not config.is_fat
    assert config.image_tag == f"{stack}-rocm10.1.0"
    assert config.publish is False  # publishing is a separate decision


def test_fat_stack_is_one_build_one_tag_set():
    config = load_stack_config("fat-gfx950-gfx1201")
    assert config.is_fat and config.arches == ["gfx950", "gfx1201"]
    assert config.image_tag == "gfx950_gfx1201-rocm10.1.0"


@pytest.mark.parametrize(
    ("overrides", "words"),
    [
        ({"rocm-bake:pubish": "true"}, "unknown config key 'rocm-bake:pubish'"),
        ({"rocm-bake:prebuildKernels": "2"}, "rocm-bake:prebuildKernels: PREBUILD_KERNELS=2 refused for gfx1201"),
        ({"rocm-bake:pytorchRocmArch": "GFX1201"}, "rocm-bake:pytorchRocmArch: malformed"),
        ({"rocm-bake:publish": "maybe"}, "rocm-bake:publish"),
        ({"rocm-bake:rocmVersion": "10.1"}, "rocm-bake:rocmVersion"),
    ],
)
def test_bad_config_names_the_key(overrides, words):
    with pytest.raises(RocmBakeError, match=words):
        load_stack_config("gfx1201", overrides)


def test_other_namespaces_are_left_to_their_providers():
    assert load_stack_config("gfx950", {"github:owner": "x"}).stack == "gfx950"


def test_missing_stack_lists_known(tmp_path):
    with pytest.raises(RocmBakeError, match="no stack 'gfx9000'.*gfx950"):
        load_stack_config("gfx9000")
    assert (STACKS_DIR / "Pulumi.gfx950.yaml").exists()


@pytest.mark.parametrize(
    ("registry", "words"),
    [
        ("bad host:99999", "rocm-bake:registry: not a registry host"),
        ("http://x", "rocm-bake:registry: not a registry host"),
        ("reg.example:99999", "rocm-bake:registry: the port is not in 1..65535"),
        ("reg.example:0", "the port is not in 1..65535"),
        ("a b.example", "rocm-bake:registry"),
        ("myregistry", "Docker Hub namespace"),
        ("reg.example/path", "no scheme, path or spaces"),
        ("", "rocm-bake:registry"),
    ],
)
def test_bad_registry_is_refused_at_config_naming_the_key(registry, words):
    with pytest.raises(RocmBakeError, match=re.escape(words)):
        load_stack_config("gfx950", {"rocm-bake:registry": registry})


@pytest.mark.parametrize("registry", ["127.0.0.1:5000", "localhost:5000", "localhost", "ghcr.io", "[::1]:5000",
                                      "registry-1.example.com:443"])
def test_good_registries(registry):
    assert load_stack_config("gfx950", {"rocm-bake:registry": registry}).registry == registry


def test_keys_are_the_models_aliases_and_pulumi_strings_convert():
    """No hand-written key table or coercion: camelCase aliases, pydantic's own conversions."""
    assert KEYS["pytorchRocmArch"] == "pytorch_rocm_arch" and KEYS["githubApiUrl"] == "github_api_url"
    assert set(KEYS.values()) == set(StackConfig.model_fields) - {"stack", "github_repo_source"}
    config = stack_config_from_mapping("s", from_engine_values({
        "rocm-bake:pytorchRocmArch": "gfx950;gfx942", "rocm-bake:push": "false", "rocm-bake:prebuildKernels": "2",
        "rocm-bake:buildArgs": '{"ROCM_IMAGE": "r.example/rocm:1"}', "rocm-bake:targets": "torch, vllm",
    }, "test"), "test")
    assert (config.push, config.prebuild_kernels, config.targets) == (False, 2, ["torch", "vllm"])
    assert config.build_args == {"ROCM_IMAGE": "r.example/rocm:1"}
    assert type(config.pytorch_rocm_arch) is ArchSet and config.arch_label == "gfx950_gfx942"
    # Python callers may use field names; a stack file only the keys
    assert StackConfig(stack="s", pytorch_rocm_arch="gfx950").registry == "127.0.0.1:5000"
    with pytest.raises(RocmBakeError, match="unknown config key 'rocm-bake:pytorch_rocm_arch'"):
        stack_config_from_mapping("s", {"rocm-bake:pytorch_rocm_arch": "gfx950"}, "test")
    with pytest.raises(RocmBakeError, match="unknown config key 'rocm-bake:stack'"):
        stack_config_from_mapping("s", {"rocm-bake:stack": "x"}, "test")


def test_build_args_text_is_decoded_once_at_the_engines_edge():
    """The engine passes a mapping as JSON text: decoded by ``from_engine_values`` alone; the model takes a mapping."""
    assert from_engine_values({"rocm-bake:buildArgs": '{"A": "b"}', "rocm-bake:push": "false"}, "t") == {
        "rocm-bake:buildArgs": {"A": "b"}, "rocm-bake:push": "false"}
    with pytest.raises(RocmBakeError, match=re.escape("stack s config: rocm-bake:buildArgs: not a JSON object")):
        from_engine_values({"rocm-bake:buildArgs": '{"A": "ghp_fragment'}, "stack s config")
    with pytest.raises(RocmBakeError, match="rocm-bake:buildArgs: Input should be a valid dictionary"):
        # text is never parsed past the edge
        stack_config_from_mapping("s", {"rocm-bake:buildArgs": '{"A": "b"}'}, "test")


@pytest.mark.parametrize(
    ("key", "value", "words"),
    [
        ("buildArgs", {"ROCM_IMAGE": 1}, "rocm-bake:buildArgs.ROCM_IMAGE: Input should be a valid string"),
        ("targets", "torch Torch", "rocm-bake:targets.1"),
        ("dockerfileDir", "../elsewhere", "rocm-bake:dockerfileDir: '…' escapes the repository"),
        ("dockerfileDir", "/srv/dockerfiles", "rocm-bake:dockerfileDir: '…' is absolute"),
        ("cacheArch", "gfx950 gfx1201", "rocm-bake:cacheArch"),
        ("gpuTest", "perhaps", "rocm-bake:gpuTest"),
    ],
)
def test_bad_values_name_the_key(key, value, words):
    with pytest.raises(RocmBakeError, match=re.escape(words)):
        load_stack_config("gfx950", {f"rocm-bake:{key}": value})


@pytest.mark.parametrize("name", ["../gfx950", "gfx950/../../x", "", "a b", "/etc/passwd"])
def test_a_stack_is_named_not_a_path(name):
    with pytest.raises(RocmBakeError, match="stack name"):
        load_stack_config(name)


@pytest.mark.parametrize(
    ("text", "words"),
    [
        (b"- config: {}\n", "top level must be a mapping with a 'config:' key, got a list"),
        (b"config: [1, 2]\n", "'config' must be a mapping"),
        (b"config: {rocm-bake:registry: x\n", "not valid YAML"),
        (b"\xff\xfe\x00", "not UTF-8"),
    ],
)
def test_broken_stack_files(tmp_path, text, words):
    (tmp_path / "Pulumi.gfx950.yaml").write_bytes(text)
    with pytest.raises(RocmBakeError, match=re.escape(words)):
        read_stack_file("gfx950", tmp_path)


def test_a_directory_as_stack_file(tmp_path):
    (tmp_path / "Pulumi.gfx950.yaml").mkdir()
    with pytest.raises(RocmBakeError, match="is a directory"):
        read_stack_file("gfx950", tmp_path)


def test_empty_stack_file_is_the_default_config(tmp_path):
    (tmp_path / "Pulumi.gfx950.yaml").write_text("")
    assert read_stack_file("gfx950", tmp_path) == {}


def test_the_stack_pipeline_parses_the_arch_once(monkeypatch):
    """One arch is parsed once between define_stack and the GPU test, not once per step.

    The stack config parses it, and the policy, the image plan, the fleet
    lookup and the GPU test's node choice take the typed value as it is.
    """
    from rocm_bake.gpu import select_node
    from rocm_bake.image_plan import image_specs
    from rocm_bake.manifests import load_fleet, load_targets

    targets, fleet = load_targets(), load_fleet()  # the manifests' own arches parse at their edge
    calls = []
    for kind in (Arch, ArchSet):
        original = kind.__dict__["_normalised"].__func__
        monkeypatch.setattr(kind, "_normalised", classmethod(lambda cls, v, o=original: (calls.append(v), o(cls, v))[1]))
    config = load_stack_config("fat-gfx950-gfx1201")
    assert calls == ["gfx950;gfx1201", "gfx950", "gfx1201"]  # once, at the edge
    calls.clear()
    specs = image_specs(config, targets)
    policy = config.policy()
    nodes = [select_node(fleet, arch, config.gpu_host) for arch in config.arches]
    assert (config.arch_label, config.index_name, config.image_tag) == (
        "gfx950_gfx1201", "gfx950-gfx1201", "gfx950_gfx1201-rocm10.1.0")
    assert specs and policy.arches == ["gfx950", "gfx1201"] and [n and n.name for n in nodes] == [None, "snoc-navi"]
    assert fleet.coverage(config.pytorch_rocm_arch).gpu_testable is False
    assert calls == []


def test_build_args_name_the_stacks_own_registry_once_parsed():
    """The demo stacks' base image follows rocm-bake:registry; an unknown placeholder names the arg."""
    config = load_stack_config("demo-gfx950", {"rocm-bake:registry": "127.0.0.1:41234"})
    assert config.build_args["ROCM_IMAGE"] == "127.0.0.1:41234/rocm-bake/demo-base:bookworm-1"
    assert config.build_args["PYTHON_IMAGE"] == "127.0.0.1:41234/rocm-bake/demo-base:bookworm-1"
    for stack in ("demo-gfx950", "demo-gfx1201"):
        assert "127.0.0.1:5000" not in (STACKS_DIR / f"Pulumi.{stack}.yaml").read_text()
    with pytest.raises(RocmBakeError, match=r"rocm-bake:buildArgs: X: unknown placeholder \{reg\}"):
        load_stack_config("gfx950", {"rocm-bake:buildArgs": {"X": "{reg}/base:1"}})


def test_no_fragment_of_a_planted_token_in_any_config_message():
    """The CLI path (``rocm-bake plan``) renders through the same formatter as the program: never the input."""
    from tests.test_config_engine import BAD_VALUES, TOKEN, fragments

    for key, (value, _secret) in BAD_VALUES.items():
        if key == "githubToken":  # refused by the program when not secret; the CLI never validates its value
            continue
        with pytest.raises(RocmBakeError) as caught:
            stack_config_from_mapping("gfx950", {f"rocm-bake:{key}": value}, "test")
        message = str(caught.value)
        assert f"rocm-bake:{key}" in message and "\n" not in message
        assert not [f for f in fragments(TOKEN) if f in message], message


def test_scrub_cuts_every_run_of_the_input_and_keeps_the_rule():
    from rocm_bake.problems import scrub

    assert scrub("'http://x:ghp_secret@h' has credentials", ["http://x:ghp_secret@h"]) == "'…' has credentials"
    assert scrub("cut ghp_sec and keep", ["xx ghp_secret"]) == "cut… and keep"
    assert scrub("short ab stays", ["ab"]) == "short ab stays"


@pytest.mark.parametrize("dist", ["/", "//", "/etc", "/usr/local/dist", "/var/lib/x", "/tmp", "/home", "/proc/1"])
def test_dist_refuses_root_shared_and_system_directories(dist):
    with pytest.raises(RocmBakeError, match="rocm-bake:dist: is"):
        load_stack_config("gfx950", {"rocm-bake:dist": dist})


ESCAPE = "../" * 40  # more than any checkout's depth: from the project directory up to /


@pytest.mark.parametrize("dist", [ESCAPE + "usr/local/x", ESCAPE.rstrip("/"), ESCAPE + "etc",
                                  "dist/" + ESCAPE + "var/lib/x"])
def test_a_relative_dist_is_resolved_before_it_is_judged(dist):
    with pytest.raises(RocmBakeError, match="rocm-bake:dist: is"):
        load_stack_config("gfx950", {"rocm-bake:dist": dist})


def test_a_dist_through_a_symlink_is_judged_where_it_leads(tmp_path):
    (tmp_path / "usr-local").symlink_to("/usr/local")
    with pytest.raises(RocmBakeError, match="rocm-bake:dist: is or lies under a system directory"):
        load_stack_config("gfx950", {"rocm-bake:dist": str(tmp_path / "usr-local" / "x")})


@pytest.mark.parametrize("dist", ["dist", "build/dist", "../dist", "/tmp/rocm-bake/dist", "/srv/wheels",
                                  "/home/me/dist"])
def test_dist_accepts_a_directory_of_its_own(dist):
    assert load_stack_config("gfx950", {"rocm-bake:dist": dist}).dist == dist


@pytest.mark.parametrize("key, right", [("rocm_bake:registry", "rocm-bake:registry"),
                                        ("Rocm-Bake:publish", "rocm-bake:publish"),
                                        ("rocmbake:targets", "rocm-bake:targets"),
                                        ("rocm-bak:registy", "rocm-bake:registry")])
def test_a_key_in_a_mistyped_namespace_is_refused_with_the_right_one(key, right):
    with pytest.raises(RocmBakeError, match=re.escape(f"{key!r} is not in the rocm-bake namespace; did you mean "
                                                      f"{right}?")):
        load_stack_config("gfx950", {key: "true"})


def test_other_namespaces_stay_theirs():
    assert load_stack_config("gfx950", {"docker-build:x": "1", "github:token": "t", "aws:region": "r"})


def test_the_program_sees_keys_of_a_mistyped_namespace():
    from components.stack import given_config
    from pulumi.runtime.config import CONFIG

    token = CONFIG.set({"rocm_bake:registry": "r.example:5000", "aws:region": "x", "rocm-bake:dist": "d"})
    try:
        assert given_config() == {"rocm_bake:registry": "r.example:5000", "rocm-bake:dist": "d"}
    finally:
        CONFIG.reset(token)


def test_targets_on_a_published_stack_is_refused_saying_it_would_shrink_the_index_and_release():
    config = {"rocm-bake:targets": "torch", "rocm-bake:githubRepo": "octo/rocm-bake"}
    assert load_stack_config("gfx950", config).targets == ["torch"]
    with pytest.raises(RocmBakeError, match=r"rocm-bake:targets: .*shrink the published index and release to "
                                            r"torch.*rocm-bake arches up --arches gfx950 --target torch"):
        load_stack_config("gfx950", {**config, "rocm-bake:publish": "true"})


def test_unknown_key_suggests_the_nearest_known_key():
    with pytest.raises(RocmBakeError, match=re.escape("'rocm-bake:registy'; did you mean rocm-bake:registry?")):
        load_stack_config("gfx950", {"rocm-bake:registy": "127.0.0.1:5001"})
    with pytest.raises(RocmBakeError, match=re.escape("did you mean rocm-bake:githubPagesUrl?")):
        load_stack_config("gfx950", {"rocm-bake:githubpagesurl": "https://x.example"})
