"""Say which repository secrets a workflow job lacks, before it touches anything.

Usage (standard library only: it runs before ``make setup``)::

    python3 .github/scripts/check_secrets.py deploy    # exit 1 naming every missing secret
    python3 .github/scripts/check_secrets.py preview   # writes available=true|false to $GITHUB_OUTPUT

Why a step of its own: a missing secret otherwise surfaces an hour later as
an engine error about an empty URL, or, worse, as a preview against empty
state that says "create everything". The rules here are the table in docs/team-and-farm.md
("CI, deploy and where state lives") in code:

* ``PULUMI_BACKEND_URL`` is where the team's state lives: a bucket the team
  manages (``s3://``, ``gs://``, ``azblob://``) or Pulumi Cloud
  (``https://``). Never ``file://``: a runner's disk is gone when the job
  ends, and with it the record of every release the run created.
* each backend needs its own credentials (the cloud SDK's usual names);
* ``PULUMI_CONFIG_PASSPHRASE`` encrypts the stacks' secrets;
* deploy also needs the build farm (``BUILDKIT_HOST``; over ``tcp://`` only
  with mutual TLS, since BuildKit runs any build step for whoever reaches
  it) and the credentials of the registry the stack config names.

A pull request without ``PULUMI_BACKEND_URL`` (a fork's: GitHub gives forks
no secrets) skips the preview and says so; one that has the URL but lacks
another secret is a misconfiguration and fails.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import urlsplit

README = "docs/team-and-farm.md: CI, deploy and where state lives"

#: State backend scheme -> the secrets its credentials come from.
BACKEND_CREDENTIALS: dict[str, tuple[str, ...]] = {
    "s3": ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"),  # AWS S3, or MinIO/R2/Ceph via ?endpoint=
    "gs": ("GOOGLE_CREDENTIALS",),
    "azblob": ("AZURE_STORAGE_ACCOUNT", "AZURE_STORAGE_KEY"),
    "https": ("PULUMI_ACCESS_TOKEN",),  # Pulumi Cloud, or a self-hosted Pulumi service
}

#: BUILDKIT_HOST scheme -> the secrets it needs beyond the host itself.
FARM_CREDENTIALS: dict[str, tuple[str, ...]] = {
    "tcp": ("BUILDKIT_CA_CERT", "BUILDKIT_CLIENT_CERT", "BUILDKIT_CLIENT_KEY"),
    "unix": (),  # a self-hosted runner on the farm's own host
    "kube-pod": (),  # a BuildKit pod, reached with the runner's kubeconfig
    "ssh": (),  # a farm host reached with the runner's ssh agent
}

REGISTRY_CREDENTIALS = ("REGISTRY_USERNAME", "REGISTRY_PASSWORD")

#: Every secret name this project's workflows may read (the table in docs/team-and-farm.md).
ALL_SECRETS = sorted({
    "PULUMI_BACKEND_URL", "PULUMI_CONFIG_PASSPHRASE", "BUILDKIT_HOST", "GITHUB_TOKEN", *REGISTRY_CREDENTIALS,
    *(name for names in BACKEND_CREDENTIALS.values() for name in names),
    *(name for names in FARM_CREDENTIALS.values() for name in names),
})


class SecretsError(Exception):
    """A secret is missing or says something the workflows cannot use."""


def scheme(url: str) -> str:
    return urlsplit(url).scheme.lower() if "://" in url else ""


def backend_secrets(url: str) -> tuple[str, ...]:
    """The credential secrets the state backend at ``url`` needs."""
    kind = scheme(url)
    if kind == "file":
        raise SecretsError(
            f"PULUMI_BACKEND_URL is {url!r}, a directory on the runner: it is gone when the job ends, and with it "
            "the record of every release and image the run made; give a bucket (s3://, gs://, azblob://) "
            "or Pulumi Cloud (https://api.pulumi.com)"
        )
    if kind not in BACKEND_CREDENTIALS:
        raise SecretsError(
            f"PULUMI_BACKEND_URL has scheme {kind or '(none)'!r}; expected one of "
            f"{', '.join(k + '://' for k in BACKEND_CREDENTIALS)}"
        )
    return BACKEND_CREDENTIALS[kind]


def farm_secrets(host: str) -> tuple[str, ...]:
    """The secrets the build farm at ``host`` needs beyond BUILDKIT_HOST itself."""
    kind = scheme(host)
    if kind not in FARM_CREDENTIALS:
        raise SecretsError(
            f"BUILDKIT_HOST has scheme {kind or '(none)'!r}; expected one of "
            f"{', '.join(k + '://' for k in FARM_CREDENTIALS)} (a buildx remote-driver endpoint)"
        )
    return FARM_CREDENTIALS[kind]


def required(job: str, env: Mapping[str, str]) -> list[str]:
    """Every secret ``job`` needs, given what the set ones say (scheme-dependent credentials)."""
    names = ["PULUMI_BACKEND_URL", "PULUMI_CONFIG_PASSPHRASE"]
    if env.get("PULUMI_BACKEND_URL"):
        names += backend_secrets(env["PULUMI_BACKEND_URL"])
    if job == "deploy":
        names.append("BUILDKIT_HOST")
        if env.get("BUILDKIT_HOST"):
            names += farm_secrets(env["BUILDKIT_HOST"])
        names += REGISTRY_CREDENTIALS
    return names


def missing(job: str, env: Mapping[str, str]) -> list[str]:
    return [name for name in required(job, env) if not env.get(name)]


def append(path: str | None, text: str) -> None:
    if path:
        with Path(path).open("a") as out:
            out.write(text)


def main(argv: list[str] | None = None, env: Mapping[str, str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("job", choices=("deploy", "preview"))
    args = parser.parse_args(argv)
    env = os.environ if env is None else env
    output, summary = env.get("GITHUB_OUTPUT"), env.get("GITHUB_STEP_SUMMARY")
    if args.job == "preview" and not env.get("PULUMI_BACKEND_URL"):
        why = ("no PULUMI_BACKEND_URL secret reaches this pull request (GitHub gives a fork's pull request no "
               "secrets): skipping the preview rather than showing one against empty state, which would say "
               "\"create everything\"")
        print(f"::notice title=pulumi preview skipped::{why}")
        append(summary, f"**pulumi preview skipped**: {why}.\n")
        append(output, "available=false\n")
        return 0
    try:
        lacking = missing(args.job, env)
    except SecretsError as exc:
        print(f"::error title=bad secret::{exc} ({README})")
        return 1
    if lacking:
        print(f"::error title=missing secrets::{args.job} needs the repository secrets "
              f"{', '.join(lacking)} ({README})")
        return 1
    append(output, "available=true\n")
    print(f"{args.job}: every secret it needs is set ({', '.join(required(args.job, env))})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
