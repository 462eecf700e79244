"""This checkout's own registry port and builder name: chosen once, kept in ``.rocm-bake/checkout.json``.

Several checkouts share a host (a team's clones, CI jobs, agents), so
nothing local may be global: each checkout's registry listens on its own
loopback port and its buildx builder carries the checkout's id. The choice
is made the first time anything asks (every ``make`` run does), written
once, and read by the Makefile, ``rocm_bake/local/builder.py`` and the Pulumi program
(the defaults of ``rocm-bake:registry`` and ``rocm-bake:builder``).

A port is claimed machine-wide in ``$XDG_CACHE_HOME/rocm-bake/ports/``
(the checkout's path), so two checkouts never record the same port even
while one's registry is down; a claim whose checkout is gone is taken over.
Ports come from below the kernel's ephemeral range, where no outgoing
connection can be holding them when the registry starts.

Standard library only: ``make`` runs it with the system Python before the
venv exists. Usage: ``python3 -m rocm_bake.checkout [--make | --forget]``.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import re
import secrets
import socket
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path

from rocm_bake.errors import RocmBakeError

ROOT = Path(__file__).resolve().parent.parent
#: Where a checkout keeps its local state (ignored by git).
STATE_DIR = ".rocm-bake"
RECORD = f"{STATE_DIR}/checkout.json"
#: Builder names: ``rocm-bake-<id>``; the id is 8 hex digits chosen once per checkout.
BUILDER_PREFIX = "rocm-bake-"
LOWEST_PORT = 10000


@dataclass(frozen=True)
class Checkout:
    """What this checkout runs under its own name."""

    id: str
    registry_port: int
    builder: str

    @property
    def registry(self) -> str:
        return f"127.0.0.1:{self.registry_port}"

    def stack_defaults(self) -> dict[str, str]:
        """Defaults for the program's config: the stack's own values win over these."""
        return {"rocm-bake:registry": self.registry, "rocm-bake:builder": self.builder}


def record_path(root: Path) -> Path:
    return root / RECORD


def parse_record(text: str, path: Path) -> Checkout:
    """The record's three fields, checked; anything else is one line naming the file."""
    try:
        raw = json.loads(text)
    except ValueError as exc:
        raise RocmBakeError(f"{path}: not JSON ({exc}); delete it and run make again to choose anew") from None
    if not isinstance(raw, dict) or set(raw) != {"id", "registry_port", "builder"}:
        raise RocmBakeError(f"{path}: expected keys id, registry_port, builder; delete it and run make again")
    cid, port, builder = raw["id"], raw["registry_port"], raw["builder"]
    if not (isinstance(cid, str) and len(cid) == 8 and all(c in "0123456789abcdef" for c in cid)):
        raise RocmBakeError(f"{path}: id must be 8 hex digits, got {str(cid)[:40]!r}")
    if not (isinstance(port, int) and not isinstance(port, bool) and 1 <= port <= 65535):
        raise RocmBakeError(f"{path}: registry_port must be a port number 1..65535, got {str(port)[:40]!r}")
    if not (isinstance(builder, str) and builder.replace("-", "").replace("_", "").isalnum() and len(builder) < 64):
        raise RocmBakeError(f"{path}: builder must be a buildx builder name (letters, digits, '-', '_')")
    return Checkout(cid, port, builder)


def load_checkout(root: Path) -> Checkout | None:
    """This checkout's record, or None before the first ``make``."""
    path = record_path(root)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise RocmBakeError(f"{path}: unreadable ({exc.__class__.__name__})") from None
    return parse_record(text, path)


#: What ``make`` exports for a run (REGISTRY_PORT= / BUILDER= on its command line win over the record).
REGISTRY_ENV = "ROCM_BAKE_REGISTRY"
BUILDER_ENV = "ROCM_BAKE_BUILDER"
#: Builders per stack, ``STACK=BUILDER`` pairs: a build farm's exports put each stack on a builder of its own
#: without editing a tracked stack file.
STACK_BUILDERS_ENV = "ROCM_BAKE_STACK_BUILDERS"
_PAIR = re.compile(r"^(?P<stack>[A-Za-z0-9_][A-Za-z0-9_.-]{0,99})=(?P<builder>[A-Za-z0-9][A-Za-z0-9_.-]{0,99})$")


def stack_builders(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """$ROCM_BAKE_STACK_BUILDERS parsed: ``demo-gfx950=builder-1,demo-gfx1201=builder-2`` (commas or spaces)."""
    env = os.environ if environ is None else environ
    found: dict[str, str] = {}
    for pair in env.get(STACK_BUILDERS_ENV, "").replace(",", " ").split():
        match = _PAIR.match(pair)
        if match is None:
            raise RocmBakeError(f"${STACK_BUILDERS_ENV}: {pair!r} is not STACK=BUILDER "
                                f"(e.g. demo-gfx950=builder-1,demo-gfx1201=builder-2)")
        found[match["stack"]] = match["builder"]
    return found


def local_defaults(root: Path, environ: Mapping[str, str] | None = None, stack: str | None = None) -> dict[str, str]:
    """The program's defaults for ``rocm-bake:registry`` and ``rocm-bake:builder`` in checkout ``root``.

    What ``make`` exported for this run, else the checkout's record; nothing
    when neither exists (a copy of the program, CI), leaving the built-in
    defaults. ``stack``'s entry in $ROCM_BAKE_STACK_BUILDERS wins over
    $ROCM_BAKE_BUILDER. A stack file that names either key wins over all of these.
    """
    env = os.environ if environ is None else environ
    checkout = load_checkout(root)
    defaults = checkout.stack_defaults() if checkout is not None else {}
    if env.get(REGISTRY_ENV):
        defaults["rocm-bake:registry"] = env[REGISTRY_ENV]
    if env.get(BUILDER_ENV):
        defaults["rocm-bake:builder"] = env[BUILDER_ENV]
    per_stack = stack_builders(env).get(stack or "")
    if per_stack:
        defaults["rocm-bake:builder"] = per_stack
    return defaults


def defaults_owner(root: Path) -> str:
    """Who the defaults of :func:`local_defaults` belong to: ``checkout <id>`` (before it has a record, an id
    made from its path: a path may hold any text, an arch name included, and this value is a resource input)."""
    try:
        checkout = load_checkout(root)
    except RocmBakeError:
        checkout = None
    cid = checkout.id if checkout is not None else hashlib.sha1(str(root.resolve()).encode()).hexdigest()[:8]
    return f"checkout {cid}"


#: The builder a stack runs on when nothing names one (the program's built-in default).
DEFAULT_BUILDER = "rocm-bake"


def stack_builder(stack: str, stack_config: Mapping[str, object], root: Path,
                  environ: Mapping[str, str] | None = None) -> str:
    """The buildx builder ``stack`` runs on, as the program resolves it: its stack file's ``rocm-bake:builder``
    (``stack_config``), else ``local_defaults``, else the built-in default."""
    named = stack_config.get("rocm-bake:builder")
    return str(named or local_defaults(root, environ, stack).get("rocm-bake:builder") or DEFAULT_BUILDER)


def claims_dir() -> Path:
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "rocm-bake" / "ports"


def claim_is_live(claim: Path, port: int) -> bool:
    """A claim holds while the checkout it names records that port, or for a minute after it was made
    (its checkout may be writing its record right now)."""
    try:
        if time.time() - claim.stat().st_mtime < 60:
            return True
        held = load_checkout(Path(claim.read_text(encoding="utf-8").strip()))
    except (OSError, ValueError, RocmBakeError):  # unreadable, not UTF-8, a NUL byte: not a claim we wrote
        return False
    return held is not None and held.registry_port == port


def claim_owner(claim: Path) -> Path | None:
    try:
        text = claim.read_text(encoding="utf-8").strip()
    except (OSError, ValueError):
        return None
    return Path(text) if text and "\0" not in text else None


def claim(port: int, root: Path) -> bool:
    """Take ``port`` for ``root`` unless a live checkout holds it (a dead one's claim is taken over)."""
    return claim_in(claims_dir(), str(port), root, lambda path: claim_is_live(path, port))


def claim_in(directory: Path, key: str, root: Path, live: Callable[[Path], bool]) -> bool:
    """Take ``directory/key`` for checkout ``root`` unless ``live`` says its holder still holds it.

    The claim file names its checkout; ``os.link`` makes it atomically, so of
    two checkouts racing for one key exactly one wins. A claim ``live``
    rejects (its checkout gone or moved on) is taken over.
    """
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / key
    mine = directory / f".{key}.{os.getpid()}.{secrets.token_hex(4)}"
    mine.write_text(f"{root}\n", encoding="utf-8")
    try:
        for _ in range(2):
            try:
                os.link(mine, path)  # atomic: exactly one checkout creates the claim
                return True
            except FileExistsError:
                if claim_owner(path) == root:
                    return True
                if live(path):
                    return False
                path.unlink(missing_ok=True)  # its checkout is gone or chose another: stale
        return False
    finally:
        mine.unlink(missing_ok=True)


def bindable(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def port_range() -> range:
    """Below the ephemeral range (``ip_local_port_range``), so no outgoing connection holds the port."""
    try:
        low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768
    return range(LOWEST_PORT, low) if low - LOWEST_PORT >= 1000 else range(LOWEST_PORT, 65536)


def choose_port(root: Path) -> int:
    candidates = port_range()
    for _ in range(200):
        port = random.choice(candidates)
        if bindable(port) and claim(port, root):
            return port
    raise RocmBakeError(f"no free registry port in {candidates.start}..{candidates.stop - 1} after 200 tries")


def ensure_checkout(root: Path) -> tuple[Checkout, bool]:
    """The record, made on first use; True when this call made it. Two racing makes agree (atomic link)."""
    existing = load_checkout(root)
    if existing is not None:
        if not claim(existing.registry_port, root):  # a hand-edited port is held to the same rule
            owner = claim_owner(claims_dir() / str(existing.registry_port))
            raise RocmBakeError(
                f"{record_path(root)}: registry_port {existing.registry_port} is claimed by checkout {owner} "
                f"({claims_dir() / str(existing.registry_port)}); choose another port there, or delete the record "
                "to choose anew")
        return existing, False
    cid = secrets.token_hex(4)
    chosen = Checkout(cid, choose_port(root), f"{BUILDER_PREFIX}{cid}")
    path = record_path(root)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".checkout.{os.getpid()}.json")
    partial.write_text(json.dumps(asdict(chosen), indent=2) + "\n", encoding="utf-8")
    try:
        os.link(partial, path)
    except FileExistsError:  # another make of this checkout chose first: its record stands
        loaded = load_checkout(root)
        assert loaded is not None
        return loaded, False
    finally:
        partial.unlink(missing_ok=True)
    return chosen, True


def pulumi_workspace(root: Path) -> Path:
    """The Pulumi CLI's per-project file for this checkout (its selected stacks):
    ``$PULUMI_HOME/workspaces/<project>-<sha1 of Pulumi.yaml's path>-workspace.json``."""
    project_file = root / "Pulumi.yaml"
    name = "rocm-bake"
    try:
        for line in project_file.read_text(encoding="utf-8").splitlines():
            if line.startswith("name:"):
                name = line.partition(":")[2].strip().strip("'\"")
                break
    except OSError:
        pass
    home = Path(os.environ.get("PULUMI_HOME") or Path.home() / ".pulumi")
    digest = hashlib.sha1(str(project_file).encode()).hexdigest()
    return home / "workspaces" / f"{name}-{digest}-workspace.json"


def forget(root: Path) -> list[Path]:
    """Remove what this checkout left outside itself: its port claim (only if it names this checkout) and
    Pulumi's workspace file for it. The record stays; the next ``make`` that needs the port claims it again."""
    removed = []
    checkout = load_checkout(root)
    if checkout is not None:
        held = claims_dir() / str(checkout.registry_port)
        if claim_owner(held) == root:
            held.unlink(missing_ok=True)
            removed.append(held)
    workspace = pulumi_workspace(root)
    if workspace.exists():
        workspace.unlink()
        removed.append(workspace)
    return removed


def describe(checkout: Checkout, root: Path) -> str:
    return (f"checkout {checkout.id}: registry {checkout.registry}, buildx builder {checkout.builder!r} "
            f"(BUILDX_CONFIG {root / STATE_DIR / 'buildx'}; recorded in {record_path(root)})")


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    root = ROOT
    if args == ["--forget"]:
        try:
            removed = forget(root)
        except RocmBakeError as exc:
            print(f"rocm-bake: error: {exc}", file=sys.stderr)
            return 2
        for path in removed:
            print(f"forget: removed {path}")
        if not removed:
            print("forget: nothing of this checkout's outside it (no port claim, no Pulumi workspace file)")
        return 0
    try:
        checkout, created = ensure_checkout(root)
    except RocmBakeError as exc:
        print(f"rocm-bake: error: {exc}", file=sys.stderr)
        return 2
    if args == ["--make"]:
        # For the Makefile's $(shell): the words it needs on stdout; a new choice is said on stderr.
        if created:
            print(f"chose {describe(checkout, root)}", file=sys.stderr)
        print(checkout.registry_port, checkout.builder)
    else:
        print(describe(checkout, root))
    return 0


if __name__ == "__main__":
    sys.exit(main())
