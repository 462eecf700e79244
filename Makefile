# Fresh machine: `make demo` runs the main job here (engines, registry,
# BuildKit, `pulumi up` of the demo stack); `make up ARCH=...` runs a real
# stack (real ROCm bases); `make test` runs every test. `make setup` is the
# step they share: apt packages, the venv, and the engines (installed ones that fit the pins, else built from Go).
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
ARCH ?= gfx950
ARCHES ?=
# The arch rules (policy/, a pulumi-policy pack) judge every preview and up.
POLICY_PACK = --policy-pack $(CURDIR)/policy
# This checkout's own registry port and buildx builder name (`rocm-bake-<id>`),
# chosen once and kept in .rocm-bake/checkout.json (rocm_bake/checkout.py), so
# checkouts on one host never share a registry or a builder. `make builder`
# registers a local buildkitd under that name with the remote driver, the same
# path a build farm takes (remote or kubernetes driver). REGISTRY_PORT= and
# BUILDER= on the make line override them for that run; the stacks get them
# as the defaults of rocm-bake:registry and rocm-bake:builder. The choice is
# made (once, then kept) only when a recipe uses them: `make help` and
# `make down` write nothing and claim no port.
CHECKOUT = $(eval CHECKOUT := $(shell $(PYTHON) -m rocm_bake.checkout --make))$(if $(filter 2,$(words $(CHECKOUT))),$(CHECKOUT),$(error .rocm-bake/checkout.json: no registry port and builder name (the line above says why)))
REGISTRY_PORT ?= $(word 1,$(CHECKOUT))
BUILDER ?= $(word 2,$(CHECKOUT))
# BUILDER= given on the make line or in the environment (else: the checkout's record, read by the tool).
BUILDER_GIVEN = $(if $(filter-out file undefined,$(origin BUILDER)),--name $(BUILDER))
# buildx keeps builders in this checkout's own config, never ~/.docker/buildx.
export BUILDX_CONFIG ?= $(CURDIR)/.rocm-bake/buildx
# What the Pulumi program takes as this run's registry and builder (rocm_bake/checkout.py).
PULUMI_TARGETS := up preview demo demo-destroy
$(PULUMI_TARGETS): export ROCM_BAKE_REGISTRY = 127.0.0.1:$(REGISTRY_PORT)
$(PULUMI_TARGETS): export ROCM_BAKE_BUILDER = $(BUILDER)
REGISTRY_DIR ?= $(CURDIR)/.registry
# The local registry serves TLS from this checkout's own CA (made once here,
# key 0600): the docker-build provider reads registries over https only, so
# `refresh` sees a wiped registry only if it can read it. .tools/bin/pulumi and
# the targets below export SSL_CERT_FILE as a bundle there: the roots your
# SSL_CERT_FILE (or the system) names, plus that CA.
TLS_DIR ?= $(CURDIR)/.rocm-bake/tls
TRUST_REGISTRY = if [ -f $(TLS_DIR)/ca.pem ]; then SSL_CERT_FILE=$$($(BIN)/python -m rocm_bake.registry.tls --trust $(TLS_DIR)) && export SSL_CERT_FILE; fi;
# Debian packages the project needs: the registry, sshd for the GPU tests,
# runc for BuildKit, debootstrap for the demo base, skopeo for the extract
# benchmark, chromium for the landing-page test, openssl for the registry's TLS.
APT_PACKAGES ?= docker-registry openssl openssh-server openssh-client curl runc debootstrap skopeo busybox-static chromium zstd

.PHONY: help setup apt venv lock engines builder builder-stop farm farm-demo farm-down down status forget test test-fast test-host check-dockerfiles up preview registry registry-tls list-nodes plan arches-list wheel-index wheel-index-check wheels-publish-dry wheels-publish gpu-test bench clean

setup: apt $(BIN)/rocm-bake .tools/bin/rocm-bake engines ## everything the rest needs: Debian packages, the venv from requirements.lock, the engines (first time ~12 min)

# Installs what is missing (a second run checks and does nothing).
apt: ## install the Debian packages the project needs (APT_PACKAGES), only those missing
	@missing=$$(for p in $(APT_PACKAGES); do dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "ok installed" || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	  if ! command -v apt-get >/dev/null; then echo "missing packages: $$missing (install them; this is not a Debian system)" >&2; exit 1; fi; \
	  SUDO=""; [ "$$(id -u)" = 0 ] || SUDO=sudo; \
	  echo "apt: installing $$missing"; \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing >/dev/null; \
	fi

# The venv from requirements.lock (every file checked against its hash; `make
# lock` writes it from pyproject.toml), then this project, editable, with no
# dependency of its own to resolve. $(BIN)/rocm-bake is the stamp: it is
# removed first and re-made last, so a step that fails leaves no stamp and the
# next `make setup` runs every step again.
$(BIN)/rocm-bake: pyproject.toml requirements.lock
	@rm -f $@
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --require-hashes -r requirements.lock
	$(BIN)/python -m pip install --quiet --no-deps --no-build-isolation -e . || { rm -f $@; exit 1; }
	$(BIN)/rocm-bake --version >/dev/null || { rm -f $@; exit 1; }
	touch $@

# `rocm-bake` beside the engines: one PATH entry (.tools/bin) reaches them all.
.tools/bin/rocm-bake: $(BIN)/rocm-bake
	@mkdir -p $(@D)
	ln -sfn $(abspath $(BIN))/rocm-bake $@

# requirements.lock: every dependency of pyproject.toml (the test and bench
# extras and the build backend included) with its hashes, resolved for every
# Python and platform rocm-bake supports (markers such as backports.zstd's
# python_version < "3.14" kept). Run it after changing a pin.
lock: $(BIN)/rocm-bake ## rewrite requirements.lock from pyproject.toml with hashes (after changing a pin)
	$(BIN)/python -c 'import tomllib; print(*tomllib.load(open("pyproject.toml", "rb"))["build-system"]["requires"], sep="\n")' \
	  | $(BIN)/uv pip compile pyproject.toml - --extra test --extra bench --universal --python-version 3.11 \
	      --generate-hashes --custom-compile-command "make lock" --quiet --output-file requirements.lock

# The Pulumi CLI, its Python language host, the docker-build plugin, BuildKit,
# buildx, versitygw and actionlint: the ones installed here when compatible
# with the pins in tools/ (same major version, not older; the plugin at exactly
# its pin), else built from the Go modules pinned there and cached by version
# outside the work tree (tools/engines.py). One line per engine says which.
# ENGINES=build builds every one. The CLI is .tools/bin/pulumi either way.
ENGINES ?= installed
engines: ## take the installed engines that fit the pins, build the rest from Go (ENGINES=build: all); link .tools/bin
	$(PYTHON) tools/engines.py --engines $(ENGINES)

builder: engines registry-tls ## start this checkout's buildkitd and register it as the buildx builder (BUILDER)
	$(PYTHON) -m rocm_bake.local start builder --name $(BUILDER) --registry 127.0.0.1:$(REGISTRY_PORT) --registry-ca $(TLS_DIR)/ca.pem

builder-stop: ## stop that buildkitd and unregister the builder
	$(PYTHON) -m rocm_bake.local stop builder $(BUILDER_GIVEN)

# A build farm on this machine (rocm_bake/local/farm): builder-1 and builder-2
# (buildkitd over mutual TLS, registered with buildx in BUILDX_CONFIG), an
# authenticated TLS registry, a state bucket and a GPU node (sshd), each in
# its own network namespace on 198.18.<slot>.0/24; it prints the export lines
# and each host's address. Root only (namespaces). farm-down removes all of it.
farm: setup ## start a build farm of network-namespace hosts (2 builders, registry, state, gpu-node); print its exports
	$(BIN)/python -m rocm_bake.local start farm

# Both demo stacks `up` at once on this checkout's farm (made first when it has none): demo-gfx950 on
# builder-1, demo-gfx1201 on builder-2 (the exports' ROCM_BAKE_STACK_BUILDERS), pushing to the farm registry
# with its login, state in its bucket; then preview --expect-no-changes and index check of both, the
# install lines, and each stack's wall time and the total (rocm_bake/local/farm/demo.py).
farm-demo: setup passphrase ## on the farm: both demo stacks up at once, each on its own builder; previews, index check, install lines, wall times
	$(BIN)/python -m rocm_bake.local.farm demo

farm-down: ## remove this checkout's farm: its processes, namespaces, veths, bridge, builders and files
	$(PYTHON) -m rocm_bake.local stop farm

# Stops what this checkout started, and nothing else: its builder, its farm,
# its registry and its state server, each known by its pidfile and its own
# path in its command line (rocm_bake/local/daemons.py). Their data stays (the
# farm's, made for it alone, goes with it). `make down`, every *-stop target
# and `make status` take the one path: python -m rocm_bake.local (rocm_bake/local/).
down: ## stop this checkout's builder, registry, state server and farm, nothing else (their data stays)
	$(PYTHON) -m rocm_bake.local stop $(BUILDER_GIVEN) --registry-dir $(REGISTRY_DIR)

status: ## whether this checkout's builder, farm, registry and state server run (changes nothing)
	@$(PYTHON) -m rocm_bake.local status --registry-dir $(REGISTRY_DIR)

# The way back, before removing .rocm-bake: what this checkout left outside itself.
forget: down ## stop the daemons, then remove this checkout's port claim (~/.cache/rocm-bake/ports) and Pulumi workspace file (~/.pulumi/workspaces)
	$(PYTHON) -m rocm_bake.checkout --forget

# The two loops (tests/conftest.py): tests marked `services` start the engine,
# BuildKit, a registry, sshd, versitygw or a farm; the rest need only the venv.
venv: .tools/bin/rocm-bake ## the venv from requirements.lock, rocm-bake in .tools/bin: all test-fast needs (no apt, no engines)

# The fast part runs on TEST_JOBS pytest-xdist workers (auto: one per core): its tests share no daemon, port
# or checkout state. The services part runs on SERVICE_JOBS workers, a module to a worker (--dist loadscope: a
# module's daemons and farm are its own): its tests mostly wait on engines and networks, so more workers than
# cores; each starts its own daemons, as two checkouts on one host do, and leaves none behind.
TEST_JOBS ?= auto
SERVICE_JOBS ?= 3

test-fast: venv ## the tests that start no engine or daemon (-m "not services"): the loop while you edit
	$(BIN)/python -m pytest -m "not services" -n $(TEST_JOBS)

test: setup ## every test, the fast ones first, then the services (the real-engine lifecycle included): what CI runs
	$(BIN)/python -m pytest -m "not services" -n $(TEST_JOBS)
	$(BIN)/python -m pytest -m services -n $(SERVICE_JOBS) --dist loadscope --durations=15

# Go tests of our own language host (tools/pulumi-language-python), with the Go caches
# tools/engines.py shares; `make test` runs them too (tests/test_language_host.py).
test-host: ## Go tests of our own language host (tools/pulumi-language-python)
	$(PYTHON) tools/engines.py --go-test pulumi-language-python

# buildx build --check of every dockerfiles/*.Dockerfile on a private buildkitd
# that reaches no registry: stand-in bases and named contexts, the real build
# args (tests/test_check_dockerfiles.py runs the same code in make test).
check-dockerfiles: setup ## buildx build --check of every real Dockerfile, offline (no registry reached)
	$(BIN)/python dockerfiles/check_dockerfiles.py

include mk/pulumi.mk

# A real stack: real ROCm bases from stack config, the local registry and
# builder unless the stack names others. `--refresh` reads what the registry
# really holds first: an image it lost is built and pushed again, so the
# stack's outputs never name a digest the registry lacks.
up: setup registry builder stack-$(ARCH) ## pulumi up --refresh of stack ARCH on real ROCm bases (make up ARCH=gfx1151)
	$(ENGINE_RUN) --log $(STATE_DIR)/logs/up-$(ARCH).log --stack $(ARCH) -- $(PULUMI_RUN) up -s $(ARCH) --yes --refresh $(POLICY_PACK)

preview: setup stack-$(ARCH) ## pulumi preview of stack ARCH: the dry run
	$(ENGINE_RUN) --log $(STATE_DIR)/logs/preview-$(ARCH).log --stack $(ARCH) -- $(PULUMI_RUN) preview -s $(ARCH) $(POLICY_PACK)

# The CA is made once; the server certificate and bundle are remade when needed.
registry-tls: $(BIN)/rocm-bake ## make this checkout's registry CA once (.rocm-bake/tls) and its server certificate
	@$(BIN)/python -m rocm_bake.registry.tls $(TLS_DIR)

# This checkout's registry: started once, found again by its pidfile; a port
# some other process answers on is refused, never adopted.
# It serves https with this checkout's CA (.rocm-bake/tls).
registry: registry-tls ## start this checkout's registry on 127.0.0.1:REGISTRY_PORT over https (storage in .registry/)
	$(BIN)/python -m rocm_bake.local start registry --port $(REGISTRY_PORT) --root $(REGISTRY_DIR) --tls-dir $(TLS_DIR)

plan: setup ## the resources stack ARCH declares, under the mock runtime (builds nothing)
	$(BIN)/rocm-bake plan $(ARCH)

list-nodes: setup ## fleet nodes and the arches they can GPU-test
	$(BIN)/rocm-bake nodes

arches-list: setup ## what ARCHES resolves to
	$(BIN)/rocm-bake arches list $(if $(ARCHES),--arches "$(ARCHES)")

# Outside Pulumi, the same core by hand: fetch each arch's wheels by arch tag
# (never :latest), build its index, and check each installs its own only.
ROCM_VERSION ?= 10.1.0
REGISTRY ?= 127.0.0.1:$(REGISTRY_PORT)
WHEEL_TARGETS ?= triton-wheel torch torchvision amd_aiter vllm
DIST ?= dist
INDEX_ARCHES = $(or $(ARCHES),$(ARCH))
# No default target: empty means the origin remote when it is on GitHub (rocm-bake publish says so).
GITHUB_REPO ?=

wheel-index: setup ## fetch each arch's wheels from the registry by arch tag and build its index in dist/
	set -e; $(TRUST_REGISTRY) for a in $(INDEX_ARCHES); do \
	  $(BIN)/rocm-bake wheels fetch --arch $$a --out $(DIST) $(foreach t,$(WHEEL_TARGETS),--image $(REGISTRY)/rocm-bake/$(t):$$a-rocm$(ROCM_VERSION)); \
	  $(BIN)/rocm-bake index build --arch $$a --wheels $(DIST)/wheels/$$a --out $(DIST) --rocm-version $(ROCM_VERSION); \
	done

wheel-index-check: setup ## install each index in dist/ into throwaway venvs (pip and uv): its own arch only
	$(BIN)/rocm-bake index check $(DIST) $(foreach a,$(INDEX_ARCHES),--arch $(a))

# Publishing is a separate decision: it publishes what wheel-index fetched.
wheels-publish-dry: setup ## what publishing ARCH would do; changes nothing
	$(BIN)/rocm-bake publish --arch $(ARCH) --dist $(DIST) $(if $(GITHUB_REPO),--repo $(GITHUB_REPO)) --rocm-version $(ROCM_VERSION) --dry-run

wheels-publish: setup ## publish ARCH's index: a GitHub release and gh-pages (GITHUB_TOKEN)
	$(BIN)/rocm-bake publish --arch $(ARCH) --dist $(DIST) $(if $(GITHUB_REPO),--repo $(GITHUB_REPO)) --rocm-version $(ROCM_VERSION)

gpu-test: setup ## run IMAGE's GPU test for ARCH on a fleet node over ssh
	$(BIN)/rocm-bake gpu-test --arch $(ARCH) --image $(IMAGE)

# Each benchmark records ratio rows against a baseline run side by side in the
# same run; report.py writes them to bench/RESULTS.md.
BENCHES ?= $(filter-out bench/results.py bench/report.py,$(wildcard bench/*.py))
bench: setup ## run the benchmarks; write bench/RESULTS.md
	rm -rf bench/.results
	set -e; for b in $(BENCHES); do echo "== $$b"; $(BIN)/python $$b; done
	$(BIN)/python bench/report.py

# `make down` first: once .tools and .venv are gone, nothing of this checkout may be left running.
clean: down ## stop this checkout's daemons (make down), then remove what setup put here (.venv, .tools, build leftovers), naming each
	@for path in $(VENV) .tools build $(wildcard *.egg-info); do \
	  [ -e "$$path" ] && echo "clean: removing $$path ($$(du -sh "$$path" | cut -f1))" && rm -rf "$$path"; \
	done; true
	@for path in dist .rocm-bake .registry "$${XDG_CACHE_HOME:-$$HOME/.cache}/rocm-bake"; do \
	  [ -e "$$path" ] && echo "clean: kept $$path ($$(du -sh "$$path" | cut -f1))"; \
	done; true
	@echo "clean: docs/getting-started.md, 'The way back', says what those hold and how to remove them"

# Every target with its one line (the text after "##" on its rule).
help: ## this list
	@echo "make TARGET (no target: setup). Variables: ARCH, ARCHES, DEMO_ARCH, BUILDER, REGISTRY_PORT, ..."
	@awk -F ':.*## ' '/^[a-zA-Z0-9_.%-]+:.*## / { printf "  %-19s %s\n", $$1, $$2 }' $(MAKEFILE_LIST)
