"""Can this `pulumi` run reach the checkout's own builder and registry? One line naming the fix when not.

``make`` and ``.tools/bin/pulumi`` give the engine two things of the
checkout's: ``BUILDX_CONFIG`` (where ``make builder`` registered the
checkout's builder: the docker-build plugin looks there, or in
``~/.docker/buildx`` when it is unset) and ``SSL_CERT_FILE`` (a bundle with
the CA the checkout's registry serves TLS from). A user's own ``pulumi up``
has neither, and its build would fail with "no builder found" or an unknown
authority. The plugin inherits the CLI's environment, as the program does, so
the program sees what the plugin will see, and stops before anything is
declared, naming the export line that works (or ``.tools/bin/pulumi``).

A stack whose builder and registry are the team's (named in its stack file)
needs neither: nothing here applies to it.

The salt: the CLI (3.274) writes the state's ``encryptionsalt`` into a stack
file that has none whenever it loads the stack's config (``stack init``, and
before the program starts on ``up``, ``preview``, ``refresh``, ``destroy``:
``getAndSaveSecretsManager`` in pkg/cmd/pulumi/config/io.go), fallback to the
state's secrets manager or not. The salt belongs to the state, never to the
tracked stack files, so the program takes it back out before it declares
anything (:func:`strip_salt`): one place, for ``make up``/``demo``/``preview``,
``.tools/bin/pulumi`` and a plain ``pulumi`` alike. A command that runs no
program (``stack init``, ``destroy``, ``refresh``, ``config set``) leaves the
line until the next ``up`` or ``preview`` takes it out.
"""

from __future__ import annotations

import os
from pathlib import Path

from rocm_bake.builder_check import buildx_config_dir
from rocm_bake.checkout import load_checkout

#: The checkout's own buildx config and registry TLS directory (the Makefile's BUILDX_CONFIG and TLS_DIR).
BUILDX_DIR = Path(".rocm-bake") / "buildx"
TLS_DIR = Path(".rocm-bake") / "tls"


#: The line the CLI writes into a stack file (``encryptionsalt: v1:...``).
SALT_LINE = "encryptionsalt: "
#: How an encrypted config value starts in a stack file (``key:`` then ``  secure: v1:...``).
SECURE_VALUE = "secure: "


def strip_salt(root: Path, env: dict[str, str] | os._Environ[str] | None = None) -> list[Path]:
    """Take the salt line out of checkout ``root``'s stack files (``stacks/Pulumi.*.yaml``); the files changed.

    A file keeps its salt only when it holds ``secure:`` values and the run
    does not take the secrets manager from the state
    (``PULUMI_FALLBACK_TO_STATE_SECRETS_MANAGER=true``, as ``.tools/bin/pulumi``,
    the workflows and the export lines set): such a run could mint a salt of
    its own next time, and those values would no longer decrypt. A file with
    no ``secure:`` value loses nothing by it (the state's secrets are read
    with the state's own record), so a plain ``pulumi`` run leaves it as
    tracked.
    """
    env = os.environ if env is None else env
    from_state = env.get("PULUMI_FALLBACK_TO_STATE_SECRETS_MANAGER") == "true"
    changed = []
    for stack_file in sorted((root / "stacks").glob("Pulumi.*.yaml")):
        try:
            text = stack_file.read_text(encoding="utf-8")
        except OSError:
            continue
        lines = text.splitlines(keepends=True)
        if not from_state and any(line.lstrip().startswith(SECURE_VALUE) for line in lines):
            continue
        kept = [line for line in lines if not line.startswith(SALT_LINE)]
        if len(kept) != len(lines):
            stack_file.write_text("".join(kept), encoding="utf-8")
            changed.append(stack_file)
    return changed


def trusts_ca(cert_file: str | None, ca: Path) -> bool:
    """Does the bundle ``cert_file`` hold the CA certificate ``ca``?"""
    if not cert_file:
        return False
    try:
        return ca.read_bytes().strip() in Path(cert_file).read_bytes()
    except OSError:
        return False


def missing_environment(root: Path, builder: str, registry: str,
                        env: dict[str, str] | os._Environ[str] | None = None) -> str | None:
    """None when this run reaches checkout ``root``'s builder and registry as the stack uses them; else the fix.

    Only the checkout's own builder and registry are judged (its record,
    .rocm-bake/checkout.json): a copy of the program has none, and a stack
    naming the team's farm and registry takes them from the user's setup.
    """
    env = os.environ if env is None else env
    checkout = load_checkout(root)
    if checkout is None:
        return None
    buildx = root / BUILDX_DIR
    tls = root / TLS_DIR
    wrong_buildx = builder == checkout.builder and buildx_config_dir(dict(env)).resolve() != buildx.resolve()
    untrusted = (registry == checkout.registry and (tls / "ca.pem").is_file()
                 and not trusts_ca(env.get("SSL_CERT_FILE"), tls / "ca.pem"))
    if not (wrong_buildx or untrusted):
        return None
    from rocm_bake.registry.tls import trust_bundle

    lacks = " and ".join(what for what, lacking in (
        (f"builder {builder!r} is registered in {buildx}", wrong_buildx),
        (f"registry {registry} serves TLS from {tls / 'ca.pem'}", untrusted)) if lacking)
    bundle = trust_bundle(tls) if (tls / "ca.pem").is_file() else None
    line = f"export BUILDX_CONFIG={buildx}" + (f" SSL_CERT_FILE={bundle}" if bundle else "")
    return (f"this checkout's {lacks}, which this pulumi run is not given: run `{line}` in this shell first, "
            f"or use {root / '.tools' / 'bin' / 'pulumi'}")
