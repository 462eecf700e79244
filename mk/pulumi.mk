# The Pulumi side of the Makefile: a project-scoped file backend, a real
# passphrase, and the demo that runs the main job on this machine.
#
# .tools/bin/pulumi (written by tools/engines.py) runs the real CLI against
# .rocm-bake/state (PULUMI_BACKEND_URL), never the user's global login:
# `pulumi login --local` would switch every other project of theirs to this
# backend. Secrets are encrypted with a real passphrase: the user's own
# (PULUMI_CONFIG_PASSPHRASE or PULUMI_CONFIG_PASSPHRASE_FILE), else one made
# once at random and kept 0600 in .rocm-bake/passphrase.
#
# Every target here runs pulumi through that wrapper, which takes
# PULUMI_BACKEND_URL from the environment (or `make ... PULUMI_BACKEND_URL=`)
# when it is set: with the lines `make state-server` prints, `make up`,
# `make demo`, `make preview` and `make demo-destroy` use the team's bucket.
STATE_DIR ?= $(CURDIR)/.rocm-bake
PULUMI_RUN = $(CURDIR)/.tools/bin/pulumi
# Streams the engine's output, keeps all of it in a log, and ends a failure with one line: the first real
# cause and the log's path (naming the builder and its socket when it is the builder that is dead).
ENGINE_RUN = $(BIN)/python -m rocm_bake.engine_run
DEMO_ARCH ?= gfx950
DEMO_STACK = demo-$(DEMO_ARCH)
DEMO_PORT ?= 8081
# The CLI writes the state's salt into the tracked stack files; .tools/bin/pulumi
# takes it out when the CLI exits, holding the CLI's output open until it is
# done. So every pulumi line here reads that output to its end (engine_run, or
# $(...)), and the next line finds the stack files as committed.

$(STATE_DIR)/passphrase:
	@mkdir -p $(STATE_DIR)
	@umask 077 && $(PYTHON) -c 'import secrets; print(secrets.token_urlsafe(32))' > $@
	@echo "made a random Pulumi passphrase in $@ (keep it: the stacks' secrets are encrypted with it)"

passphrase: $(STATE_DIR)/passphrase ## make .rocm-bake/passphrase (random, 0600) unless you set your own

# A stack is created once, with the passphrase secrets provider.
stack-%: setup passphrase ## stack-NAME: create Pulumi stack NAME (passphrase secrets) unless it exists
	@selected=$$($(PULUMI_RUN) stack select $* 2>&1) || \
	  $(ENGINE_RUN) --log $(STATE_DIR)/logs/stack-init-$*.log -- $(PULUMI_RUN) stack init $* --secrets-provider passphrase

demo-base: setup registry builder ## make the demo base image with debootstrap and push it to the local registry
	$(TRUST_REGISTRY) $(BIN)/python dockerfiles/demo/base.py --registry 127.0.0.1:$(REGISTRY_PORT) --builder $(BUILDER) --buildx $(CURDIR)/.tools/bin/buildx

# The main job on this machine: engines, registry, builder, demo base, then
# `pulumi up --refresh` of the demo stack (a wiped registry is read as such and
# every image it lost is pushed again); ends with the pip line for the index it made.
demo: setup registry builder demo-base stack-$(DEMO_STACK) ## the main job here: setup, registry, builder, demo base, pulumi up --refresh of demo-DEMO_ARCH, index check
	$(ENGINE_RUN) --log $(STATE_DIR)/logs/demo-$(DEMO_STACK).log --builder $(BUILDER) -- $(PULUMI_RUN) up -s $(DEMO_STACK) --yes --skip-preview --refresh $(POLICY_PACK)
	PIP_CONFIG_FILE=/dev/null $(BIN)/rocm-bake index check $(DIST) --arch $(DEMO_ARCH)
	@echo
	@echo "The $(DEMO_ARCH) index is in $(DIST)/index/$(DEMO_ARCH)/. Install from it:"
	@echo
	@$(BIN)/rocm-bake index lines $(DIST) --arch $(DEMO_ARCH)
	@echo
	@echo "or serve it (python3 -m http.server $(DEMO_PORT) --directory $(DIST)) and take the lines of"
	@echo "  $(BIN)/rocm-bake index lines $(DIST) --arch $(DEMO_ARCH) --base http://127.0.0.1:$(DEMO_PORT)/index"
	@echo
	@echo ".tools/bin/pulumi runs the CLI against this project's state: .tools/bin/pulumi preview -s $(DEMO_STACK) --expect-no-changes"
	@echo "This checkout's registry (127.0.0.1:$(REGISTRY_PORT)) and builder ($(BUILDER)) keep running; make down stops them."

demo-destroy: setup ## pulumi destroy of the demo stack (the registry and the builder keep running: make down)
	$(ENGINE_RUN) --log $(STATE_DIR)/logs/destroy-$(DEMO_STACK).log -- $(PULUMI_RUN) destroy -s $(DEMO_STACK) --yes --skip-preview

# Team state: an S3 bucket on loopback (versitygw, built by `make setup`)
# with its data, port and keys under .rocm-bake/state-server/; prints the
# export lines that point pulumi at it (rocm_bake/local/state_server.py).
state-server: engines ## start an S3 bucket server (versitygw) on loopback for team state; prints the export lines
	@$(PYTHON) -m rocm_bake.local start state-server

state-server-stop: ## stop it; the buckets stay in .rocm-bake/state-server
	@$(PYTHON) -m rocm_bake.local stop state-server

.PHONY: passphrase demo demo-base demo-destroy state-server state-server-stop
