#!/usr/bin/env bash
# `pulumi up` of one stack, with the CLI `make setup` built, against the team's state in PULUMI_BACKEND_URL.
#
# Usage (in the checkout: the program and stacks/ are the working directory's): pulumi_up.sh STACK
#
# * The state is the backend PULUMI_BACKEND_URL names, never a default: .tools/bin/pulumi falls back to the
#   checkout's own file backend when the URL is empty, which on a runner is gone when the job ends.
# * The first deploy of a stack creates it in that state, with the passphrase secrets provider
#   (PULUMI_CONFIG_PASSPHRASE); later ones select it.
# * The arch rules (policy/) judge the update, as they do `make up` and the pull request's preview: a
#   mandatory violation stops it, naming the rule.
# * `--refresh`, as `make up` and `rocm-bake arches up`: a wiped registry or a deleted image is rebuilt, not
#   trusted from the state. The arguments after the CLI are `rocm-bake arches up`'s (UP_FLAGS in
#   rocm_bake/commands/arches.py; tests/test_workflows.py holds the two to one list).
# * GITHUB_TOKEN reaches the engine only when PUBLISH is true (rocm-bake:publish in the stack config, read by
#   stack_publish.py): a stack that does not opt in cannot publish, even by accident.
set -euo pipefail
stack=${1:?usage: pulumi_up.sh STACK}
root="$(cd "$(dirname "$0")/../.." && pwd)"
cli="$root/.tools/bin/pulumi"
if [ -z "${PULUMI_BACKEND_URL:-}" ]; then
  echo "::error title=state::PULUMI_BACKEND_URL is empty: pulumi up would write state on the runner (docs/team-and-farm.md: CI, deploy and where state lives)"
  exit 1
fi
if [ "${PUBLISH:-}" = true ]; then
  echo "stack $stack publishes: GITHUB_TOKEN goes to the engine"
else
  unset GITHUB_TOKEN
  echo "stack $stack does not publish: GITHUB_TOKEN withheld from the engine"
fi
"$cli" stack select --create --secrets-provider passphrase --non-interactive "$stack"
exec "$cli" up --stack "$stack" --non-interactive --policy-pack "$root/policy" --yes --refresh
