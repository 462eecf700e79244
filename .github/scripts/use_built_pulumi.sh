#!/usr/bin/env bash
# Put the Pulumi CLI `make setup` built (.tools/bin) first on the job's PATH, and give its bare version as the
# step output `version`.
#
# Usage (a workflow step; GITHUB_PATH and GITHUB_OUTPUT are the runner's): .github/scripts/use_built_pulumi.sh
#
# pulumi/actions runs the `pulumi` it finds on PATH when that one's version satisfies its pulumi-version input,
# so with this version it downloads no other CLI. The action compares a bare semver, so a `pulumi version`
# that prints anything else fails here, naming what it printed, rather than making the action fetch a CLI.
set -euo pipefail
bin="$(cd "$(dirname "$0")/../.." && pwd)/.tools/bin"
if [ ! -x "$bin/pulumi" ]; then
  echo "::error title=pulumi CLI::$bin/pulumi is missing: make setup builds it"
  exit 1
fi
version=$("$bin/pulumi" version)
if ! [[ $version =~ ^v[0-9]+\.[0-9]+\.[0-9]+$ ]]; then
  echo "::error title=pulumi CLI::$bin/pulumi version printed '$version', not v<major>.<minor>.<patch>"
  exit 1
fi
: "${GITHUB_PATH:?GITHUB_PATH: this runs as a workflow step}" "${GITHUB_OUTPUT:?GITHUB_OUTPUT: this runs as a workflow step}"
echo "$bin" >> "$GITHUB_PATH"
echo "version=${version#v}" >> "$GITHUB_OUTPUT"
echo "pulumi $version from $bin"
