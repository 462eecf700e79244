"""Print what the deploy workflow takes from a stack's config: publish, registry, builder.

Usage: python .github/scripts/stack_publish.py [--deploy] STACK

Prints ``publish=true|false``, ``registry=HOST[:PORT]`` and ``builder=NAME``,
and appends them to ``$GITHUB_OUTPUT`` when set (the step's outputs):

* the deploy workflow hands the GitHub token to ``pulumi up`` only where
  ``publish`` is true: publishing "is a separate decision from building",
  made in the stack's config, so a stack that does not opt in cannot publish
  even by accident;
* the registry to log in to is the one the stack config names (the
  workflow has no registry of its own);
* the farm is registered under the builder name the stack config gives.

``--deploy`` refuses a loopback registry (the local default,
``127.0.0.1:5000``): on a runner, loopback is the runner itself, which the
build farm cannot push to and which is gone when the job ends.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from rocm_bake.config import StackConfig, read_stack_file, stack_config_from_mapping, stack_file  # noqa: E402
from rocm_bake.errors import RocmBakeError  # noqa: E402
from rocm_bake.loopback import is_loopback_registry  # noqa: E402


def facts(config: StackConfig, deploy: bool) -> dict[str, str]:
    if deploy and is_loopback_registry(config.registry):
        raise RocmBakeError(
            f"stack {config.stack}: rocm-bake:registry is {config.registry}, a loopback address; on a CI runner "
            "that is the runner itself, which the build farm cannot push to and which is gone after the job: "
            f"set rocm-bake:registry in stacks/Pulumi.{config.stack}.yaml to the team's registry"
        )
    return {"publish": "true" if config.publish else "false", "registry": config.registry, "builder": config.builder}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("stack")
    parser.add_argument("--deploy", action="store_true", help="refuse what cannot work from a CI runner")
    parser.add_argument("--stacks-dir", type=Path, default=None)
    args = parser.parse_args(argv)
    try:
        path = stack_file(args.stack, args.stacks_dir)
        config = stack_config_from_mapping(args.stack, read_stack_file(args.stack, args.stacks_dir), str(path))
        lines = "".join(f"{key}={value}\n" for key, value in facts(config, args.deploy).items())
    except RocmBakeError as exc:
        print(f"stack_publish: error: {exc}", file=sys.stderr)
        print(f"::error title=stack {args.stack}::{exc}")
        return 2
    print(lines, end="")
    if os.environ.get("GITHUB_OUTPUT"):
        with open(os.environ["GITHUB_OUTPUT"], "a") as out:
            out.write(lines)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
