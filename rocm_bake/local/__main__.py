"""``python -m rocm_bake.local start|stop|status [SERVICE ...]``: the one way this checkout's daemons start and stop.

Services: ``builder``, ``registry``, ``state-server`` and ``farm``. ``start`` takes one service and that
service's own options (``make builder``, ``make registry``, ``make state-server``, ``make farm``). ``stop``
and ``status`` take any of them, or none for all (``make down`` is ``stop`` of all; each ``*-stop``
target is ``stop`` of one). A stop ends only what this checkout started, each daemon known by its pidfile
and its own path in its command line (``rocm_bake.local.daemons``); their data stays. One service that
cannot be stopped is said, and the others are stopped all the same.

Standard library only: ``make down`` runs it with the system Python, before or without the venv.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: In the order ``stop`` takes them down: what pushes before what it pushes to.
SERVICES = ("builder", "farm", "registry", "state-server")


def start(service: str, argv: list[str]) -> int:
    """Start ``service`` with its own options (``argv``: a farm's ``--root`` among them)."""
    if service == "builder":
        from rocm_bake.local import builder
        return builder.start_main(argv)
    if service == "registry":
        from rocm_bake.local import registry
        return registry.start_main(argv)
    if service == "state-server":
        from rocm_bake.local import state_server
        return state_server.start_main(argv)
    from rocm_bake.local.farm import cli
    return cli.start_main(argv, ROOT)


def stop(service: str, args: argparse.Namespace) -> None:
    root = args.root
    if service == "builder":
        from rocm_bake.local import builder
        builder.stop(args.name or builder.recorded_name(root), root / ".rocm-bake" / "buildkit",
                     env=builder.buildx_env(root))
    elif service == "registry":
        from rocm_bake.local import registry
        print(registry.stop_registry(args.registry_dir or root / ".registry"))
    elif service == "state-server":
        from rocm_bake.local import state_server
        state_server.stop(root / ".rocm-bake" / "state-server")
    else:
        from rocm_bake.local.farm.farm import down
        down(root)


def status(service: str, args: argparse.Namespace) -> None:
    root = args.root
    if service == "builder":
        from rocm_bake.local import builder
        print(builder.status(root / ".rocm-bake" / "buildkit"))
    elif service == "registry":
        from rocm_bake.local import registry
        print(registry.status(args.registry_dir or root / ".registry"))
    elif service == "state-server":
        from rocm_bake.local import state_server
        print(state_server.status(root / ".rocm-bake" / "state-server"))
    else:
        from rocm_bake.local.farm.cli import status as farm_status
        print(farm_status(root))


def each(action: Callable[[str, argparse.Namespace], None], args: argparse.Namespace) -> int:
    """``action`` on every service asked for, the rest still done when one fails; 1 when any failed."""
    failed = 0
    for service in args.services or SERVICES:
        try:
            action(service, args)
        except (Exception, SystemExit) as exc:  # one line per service: a stop must not leave the others running
            print(f"rocm-bake: error: {service}: {exc}", file=sys.stderr)
            failed = 1
    return failed


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["start"]:
        parser = argparse.ArgumentParser(prog="python -m rocm_bake.local start", description=__doc__.splitlines()[0])
        parser.add_argument("service", choices=SERVICES)
        service = parser.parse_args(argv[1:2]).service  # the rest are the service's own options
        return start(service, argv[2:])
    parser = argparse.ArgumentParser(prog="python -m rocm_bake.local", description=__doc__.splitlines()[0])
    parser.add_argument("action", choices=("start", "stop", "status"))
    parser.add_argument("services", nargs="*", metavar="SERVICE",
                        help=f"any of {', '.join(SERVICES)} (none: all)")
    parser.add_argument("--root", type=Path, default=ROOT, help="the checkout (default: this one)")
    parser.add_argument("--name", default=None, help="the builder's buildx name (default: the checkout's record)")
    parser.add_argument("--registry-dir", type=Path, default=None, help="the registry's storage (default: .registry)")
    args = parser.parse_args(argv)
    unknown = [name for name in args.services if name not in SERVICES]
    if unknown:
        parser.error(f"no service {unknown[0]!r}: the services are {', '.join(SERVICES)}")
    args.root = args.root.resolve()
    return each(stop if args.action == "stop" else status, args)


if __name__ == "__main__":
    sys.exit(main())
