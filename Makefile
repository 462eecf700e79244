# Two commands do all set-up on a fresh machine: `make up ARCH=gfx950` and
# `make test`. `make setup` is the step both share.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
ARCH ?= gfx950
ARCHES ?=
REGISTRY_PORT ?= 5000
REGISTRY_DIR ?= $(CURDIR)/.registry
PULUMI_CONFIG_PASSPHRASE ?=
export PULUMI_CONFIG_PASSPHRASE

.PHONY: setup test up preview registry list-nodes plan arches-list wheel-index wheel-index-check bench clean

setup: $(BIN)/rocm-bake

$(BIN)/rocm-bake: pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $@

test: setup
	$(BIN)/python -m pytest

# The embedded defaults: file backend (no Pulumi Cloud account), a registry on
# 127.0.0.1:$(REGISTRY_PORT) started here, the local buildx builder, publish off.
up: setup registry
	@command -v pulumi >/dev/null || { echo "pulumi CLI not found: install it from https://www.pulumi.com/docs/install/ then re-run make up" >&2; exit 1; }
	@command -v docker >/dev/null || { echo "docker not found: rocm-bake builds images with docker buildx" >&2; exit 1; }
	pulumi login --local
	pulumi stack select --create $(ARCH)
	PATH=$(CURDIR)/$(BIN):$$PATH pulumi up -s $(ARCH) --yes

preview: setup
	pulumi login --local
	PATH=$(CURDIR)/$(BIN):$$PATH pulumi preview -s $(ARCH)

registry:
	@if curl -fsS http://127.0.0.1:$(REGISTRY_PORT)/v2/ >/dev/null 2>&1; then echo "registry already on 127.0.0.1:$(REGISTRY_PORT)"; \
	else $(BIN)/python -m rocm_bake.registry_server --port $(REGISTRY_PORT) --root $(REGISTRY_DIR) --daemon; fi

plan: setup
	$(BIN)/rocm-bake plan $(ARCH)

list-nodes: setup
	$(BIN)/rocm-bake nodes

arches-list: setup
	$(BIN)/rocm-bake arches list $(if $(ARCHES),--arches "$(ARCHES)")

bench: setup
	$(BIN)/python bench/index_build.py

clean:
	rm -rf $(VENV) build *.egg-info
