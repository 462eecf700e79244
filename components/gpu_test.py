"""The GPU test as a resource: re-runs when the tested image's digest (or its node, arch or test) changes.

``GpuTest`` is a dynamic resource whose provider calls the same core as
``rocm-bake gpu-test`` (``rocm_bake.gpu.run_gpu_test``): the node lock, host
keys verified by the system ssh, the test's own exit status. It needs no
plugin beyond the Python SDK's dynamic provider (pulumi-command's plugin
cannot be built from the Go modules this machine reaches). A failing test
fails the update with the test's own output; a passing one records the
node, the exit status and the output's tail. Arches with no node declare
nothing and the stack exports ``gpu_tested: false``: no card means not
covered, never passed.

The fleet is read once, at declaration (``$ROCM_BAKE_FLEET`` or
``manifests/fleet.yml``); the chosen node travels as inputs. How ssh
authenticates (``$ROCM_BAKE_SSH_KNOWN_HOSTS``, ``$ROCM_BAKE_SSH_IDENTITY``,
else ssh's own files and agent) is read by the provider at run time, like
the CLI, so it never lands in state nor forces a re-run.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pulumi
from pulumi.dynamic import CheckResult, CreateResult, DiffResult, ReadResult, ResourceProvider, UpdateResult

from components.dynamic import ProviderInputs, TypedResource, check_inputs, has_unknown
from components.images import TargetImage
from rocm_bake.archset import Arch
from rocm_bake.config import StackConfig
from rocm_bake.errors import RocmBakeError
from rocm_bake.gpu import not_covered_message, select_node
from rocm_bake.manifests import Fleet, Node, load_fleet, load_targets
from rocm_bake.resource_types import GPU_TEST

#: The target whose image (and gpu_test command) the GPU test runs: torch installed
#: on pytorch-base (the wheel images are FROM scratch and cannot run anything).
TESTED_TARGET = "torch-runtime"
#: What was tested, where and how: a change to any of these runs the test again. The image by its
#: digest (the same image pushed to another registry is the same test); how the node is reached
#: (host, port, user, lock path, lock timeout) is not what was tested.
RERUN_KEYS = ("arch", "digest", "node", "test", "run_template")
NODE_KEYS = ("host", "port", "user", "lock_path")
#: As long as the CLI waits for a busy node by default.
LOCK_TIMEOUT = 3600.0


@dataclass(frozen=True)
class GpuTestInputs(ProviderInputs):
    """One arch's test: the image (ref and digest: Outputs in the program), the test, and the node it runs on."""

    arch: Arch
    digest: str
    node: str
    test: str
    run_template: str
    image: str
    host: str
    port: int
    user: str | None
    lock_path: str
    lock_timeout: float = LOCK_TIMEOUT

    OUTPUTS = ("status", "output", "lock_waited")
    EDGE_PARSERS = {"arch": Arch}

    @classmethod
    def on(cls, arch: Arch, image: TargetImage, node: Node, test: str,
           lock_timeout: float = LOCK_TIMEOUT) -> "GpuTestInputs":
        """``image`` tested for ``arch`` on ``node``, whose reach (host, port, user, lock) travels as inputs."""
        return cls(arch=arch, digest=image.digest, node=node.name, test=test,  # type: ignore[arg-type]
                   run_template=node.run_template, image=image.ref,  # type: ignore[arg-type]
                   host=node.host, port=node.port, user=node.user, lock_path=node.lock_path,
                   lock_timeout=lock_timeout)

    def fleet_node(self) -> Node:
        """The node the program chose, rebuilt from the inputs (state is an edge: validated again)."""
        return Node.model_validate({"name": self.node, "gpus": [self.arch], "run_template": self.run_template,
                                    **{k: getattr(self, k) for k in NODE_KEYS if getattr(self, k) is not None}})


def run_test(inputs: GpuTestInputs) -> dict[str, Any]:
    """Run the test through the CLI's core; a test that did not pass raises with its own output."""
    from rocm_bake.gpu import run_gpu_test
    from rocm_bake.gpu.remote_test import require_digest, ssh_files_from_env

    node = inputs.fleet_node()
    known_hosts, identity = ssh_files_from_env()
    result = run_gpu_test(Fleet(gpu_node=node.name, nodes=[node]), inputs.arch, inputs.image, inputs.test,
                          host=node.name, lock_timeout=float(inputs.lock_timeout), known_hosts=known_hosts,
                          identity=identity, on_stdout=lambda _line: None, on_stderr=lambda _line: None)
    if result.status != 0:
        tail = result.output_tail().rstrip()
        shown = f"; the test's output ends:\n{tail}" if tail else "; the test printed nothing"
        raise RocmBakeError(f"gpu-test {inputs.arch}: {result.message} (node {node.name} at {node.host}:{node.port}, "
                            f"image {require_digest(inputs.image)}){shown}")
    return inputs.outputs(status=result.status, output=result.output_tail(), lock_waited=result.lock_waited)


def _pinned(image: Any) -> bool:
    """docker-build shows an image it will rebuild as its bare tag during preview: not yet pinned."""
    return isinstance(image, str) and "@" in image


def _check_image(props: dict[str, Any]) -> None:
    from rocm_bake.gpu.remote_test import require_digest

    if _pinned(props["image"]):  # a bare tag (preview of a rebuild) is checked once it is pinned
        require_digest(props["image"], props["arch"])


class GpuTestProvider(ResourceProvider):
    """check validates the image ref; create/update run the test; diff says when to run it again."""

    def check(self, _olds: dict[str, Any], news: dict[str, Any]) -> CheckResult:
        return check_inputs(news, {"image": lambda _image: _check_image(news)})

    def create(self, props: dict[str, Any]) -> CreateResult:
        inputs = GpuTestInputs.from_props(props)
        return CreateResult(id_=f"{inputs.arch}@{inputs.node}", outs=run_test(inputs))

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        if has_unknown(news, RERUN_KEYS) or not _pinned(news.get("image")):
            return DiffResult(changes=True)  # preview: the image is rebuilt, so the test would run
        return DiffResult(changes=any(olds.get(k) != news.get(k) for k in RERUN_KEYS))

    def update(self, _id: str, _olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        return UpdateResult(outs=run_test(GpuTestInputs.from_props(news)))

    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        """Refresh: a test run leaves nothing on the node to read back; what was recorded stands."""
        return ReadResult(id_=id_, outs=props)

    def delete(self, _id: str, _props: dict[str, Any]) -> None:
        """A test run leaves nothing behind to remove."""


class GpuTest(TypedResource, module=GPU_TEST.module, name=GPU_TEST.name):
    """One arch's image tested on one node. Outputs: ``node``, ``status`` (0: passed), ``output`` (its tail)."""

    node: pulumi.Output[str]
    status: pulumi.Output[int]
    output: pulumi.Output[str]
    lock_waited: pulumi.Output[bool]

    def __init__(self, name: str, inputs: GpuTestInputs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(GpuTestProvider(), name, inputs.declared(), opts)


@dataclass(frozen=True)
class GpuTestRunArgs:
    """The tested image, its test command, and the node chosen for each arch a node can test."""

    image: TargetImage
    test: str
    nodes: Mapping[Arch, Node]


class GpuTestRun(pulumi.ComponentResource):
    """One ``GpuTest`` per covered arch of the build, children of this component.

    Each test keeps its name (``gpu-test-<arch>``) and an alias at the stack's
    root, so a stack whose state holds them there (declared without this
    component) adopts its recorded tests instead of running them again.
    """

    tests: dict[Arch, GpuTest]
    passed: pulumi.Output[bool]

    def __init__(self, name: str, args: GpuTestRunArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("rocm-bake:gpu:GpuTestRun", name, None, opts)
        self.tests = {
            arch: GpuTest(f"gpu-test-{arch}", GpuTestInputs.on(arch, args.image, node, args.test),
                          opts=pulumi.ResourceOptions(parent=self, depends_on=[args.image],
                                                      aliases=[pulumi.Alias(parent=pulumi.ROOT_STACK_RESOURCE)]))
            for arch, node in args.nodes.items()
        }
        # A test that did not pass fails the update, so every recorded status is a pass.
        self.passed = pulumi.Output.all(*[t.status for t in self.tests.values()]).apply(
            lambda statuses: all(status == 0 for status in statuses))
        self.register_outputs({"passed": self.passed, "nodes": {a: t.node for a, t in self.tests.items()},
                               "outputs": {a: t.output for a, t in self.tests.items()}})


def declare_gpu_test(config: StackConfig, images: dict[str, TargetImage]) -> dict[str, Any]:
    """A GpuTestRun over the build's arches that a node can test; exports say what is covered."""
    if not config.gpu_test:
        return {"gpu_tested": False, "gpu_test": "not declared: rocm-bake:gpuTest is false"}
    if TESTED_TARGET not in images:
        return {"gpu_tested": False, "gpu_test": f"not declared: target {TESTED_TARGET} is not built"}
    fleet = load_fleet()
    test = load_targets().target(TESTED_TARGET).gpu_test
    if not test:
        raise RocmBakeError(f"target {TESTED_TARGET} has no gpu_test command in manifests/targets.yml")
    # a gpuHost without the card is an error
    chosen = {arch: select_node(fleet, arch, config.gpu_host) for arch in config.arches}
    nodes = {arch: node for arch, node in chosen.items() if node is not None}
    uncovered = [arch for arch, node in chosen.items() if node is None]
    exports: dict[str, Any] = {}
    if nodes:
        run = GpuTestRun(f"gpu-tests-{config.index_name}",
                         GpuTestRunArgs(image=images[TESTED_TARGET], test=test, nodes=nodes))
        exports["gpu_tested"] = run.passed
        exports["gpu_test_node"] = {a: t.node for a, t in run.tests.items()}
        exports["gpu_test_output"] = {a: t.output for a, t in run.tests.items()}
    if uncovered:
        exports["gpu_tested"] = False
        exports["gpu_test"] = "; ".join(not_covered_message(a) for a in uncovered)
    return exports
