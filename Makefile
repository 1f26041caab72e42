# TAH — durable LLM agent sessions on NATS.
#
# Commands a newcomer needs:
#   make demo    build (the first time takes minutes: it says so), then the example end to end on a fresh data directory of its own (DEMO_LANG=zh: in Chinese)
#   make ui      the web UI on the last demo's data, on a free port (the node prints its address; Ctrl-C stops it)
#   make test    every test (vet, staticcheck, unit, integration, race, end-to-end, the JS client, natscli, the UI in chromium, vulncheck), as CI runs it
#   make build   bin/tah-node (the node) and bin/tahctl (the command line)
#   make install tah-node and tahctl into GOBIN (default: go env GOPATH's bin) or PREFIX/bin
#   make nats    bin/nats, the NATS CLI (natscli v0.5.0) of the README's nats commands; make test uses it
#   make image   bin/tah-image.tar, the container image of tah-node and tahctl (docker load -i / podman load -i), without a container runtime
#   make helm    bin/helm (helm v4 from deploy/go.mod), for the chart in deploy/helm/tah; make test uses it
#   make deploy-test  the image, the Helm chart and the compose file's cluster (deploy/), alone; make test runs it beside the rest
#   make fuzz    the projection fuzz targets, FUZZTIME each (default 60s)
#   make schema  regenerate docs/schema/ from the payload types (package event and wire)
#   make bench   speed, scale and memory against the floor: docs/benchmarks.md (~3-5 min)
#   make lint    gofmt, go vet and staticcheck
#   make vulncheck  known vulnerabilities that the code reaches (govulncheck, offline database)
#   make help    this list
#
# Everything a test needs is installed or built by these targets themselves.

# Every go command here runs the toolchain that go.mod's toolchain line names
# (the go command takes it from the module proxy once): a machine whose
# GOTOOLCHAIN is local would otherwise build with its own, older Go.
export GOTOOLCHAIN := $(or $(shell sed -n 's/^toolchain //p' go.mod),$(error go.mod has no toolchain line: add one, e.g. go mod edit -toolchain=go1.27.3))

GO        ?= go
FUZZTIME  ?= 60s
BENCHFLAGS ?=
PKGS      := ./...
BIN       := bin
JS_EXAMPLE := examples/tool-service-js
JS_STAMP   := $(JS_EXAMPLE)/node_modules/.package-lock.json
JS_CLIENT  := examples/client-js
JS_CLIENT_STAMP := $(JS_CLIENT)/node_modules/.package-lock.json
AGENT_CALLER := examples/agent-caller-js
AGENT_CALLER_STAMP := $(AGENT_CALLER)/node_modules/.package-lock.json
MCP_SERVERS := tools/mcp/testdata/npm
MCP_STAMP   := $(MCP_SERVERS)/node_modules/.package-lock.json
PEER       := bench/peer/langgraph
PEER_STAMP := $(PEER)/node_modules/.package-lock.json
RESTATE_PEER       := bench/peer/restate
RESTATE_PEER_STAMP := $(RESTATE_PEER)/node_modules/.package-lock.json
# The demo's data directory: empty, a new one of mktemp's under TMPDIR each
# time (scripts/demo.sh records it in bin/.demo-dir for make ui). A DEMO_DIR
# given must be empty, missing or a previous demo's.
DEMO_DIR   ?=
# The example's language: en or zh; empty, the locale's (zh_* is Chinese).
DEMO_LANG  ?=
# make ui's web UI: a free port by default, beside a tah-node on 9464.
UI_HTTP    ?= 127.0.0.1:0
# The NATS CLI, for the testscript that drives a node with it (natscli.txtar).
# Built from its module at this exact version, outside go.mod: TAH does not
# import it.
NATSCLI    := $(BIN)/nats
NATSCLI_VERSION := v0.5.0
# make image: the static binaries it holds (bin/image/), the tarball and the
# image's repository name (tagged :latest and :<tah-node's version>).
IMAGE_REPO ?= tah-node
IMAGE_TAR  ?= $(BIN)/tah-image.tar
IMAGE_BIN  := $(BIN)/image
# helm, built from the module proxy at deploy/go.mod's version (a tool of the
# deploy module, which keeps helm's and Kubernetes' dependencies out of the
# main module): rebuilt when deploy/go.mod changes.
HELM       := $(BIN)/helm
HELM_VERSION = $(shell sed -n 's|^[[:space:]]*helm.sh/helm/v4 \(v[^ ]*\).*|\1|p' deploy/go.mod)
# The deploy module builds TAH's packages from this tree (replace ../): when
# go.mod here gains or raises a dependency, -mod=mod lets its go.mod and
# go.sum follow (commit them: cd deploy && go mod tidy) instead of failing.
DEPLOY_GO  = cd deploy && $(GO)
DEPLOY_MOD = -mod=mod
# Where make install puts tah-node and tahctl: PREFIX/bin when PREFIX is given,
# else GOBIN, else the bin of go env GOPATH (where go install would).
PREFIX     ?=
INSTALL_DIR = $(if $(PREFIX),$(PREFIX)/bin,$(or $(GOBIN),$(shell $(GO) env GOPATH)/bin))
# A build records its VCS revision for --version even where GOFLAGS turns
# that off (-buildvcs=false); auto leaves it out when there is no git.
BUILDFLAGS ?= -buildvcs=auto

.PHONY: help test unit lint vulncheck fuzz schema bench bench-deps tidy js-deps build install demo

help: ## print the commands
	@sed -n '3,/^#$$/p' Makefile | sed '$$d; s/^# \{0,1\}//'

build: ## bin/tah-node and bin/tahctl
	$(GO) build $(BUILDFLAGS) -o $(BIN)/tah-node ./cmd/node
	$(GO) build $(BUILDFLAGS) -o $(BIN)/tahctl ./cmd/tahctl

# cmd/node is built under the name tah-node: `go install ./cmd/...` would
# install a binary named node, which shadows Node.js.
install: ## tah-node and tahctl into GOBIN, or PREFIX/bin (make install PREFIX=/usr/local)
	@mkdir -p "$(INSTALL_DIR)"
	$(GO) build $(BUILDFLAGS) -o "$(INSTALL_DIR)/tah-node" ./cmd/node
	$(GO) build $(BUILDFLAGS) -o "$(INSTALL_DIR)/tahctl" ./cmd/tahctl
	@echo "installed $(INSTALL_DIR)/tah-node and $(INSTALL_DIR)/tahctl"
	@case ":$$PATH:" in *":$(INSTALL_DIR):"*) ;; \
		*) echo "$(INSTALL_DIR) is not on your PATH: add it (export PATH=\"$(INSTALL_DIR):\$$PATH\")" ;; esac

# Built once, when missing: go install of a module at a version, with the
# toolchain this Makefile exports. make nats is its name for people; make
# test and make unit depend on the file itself.
.PHONY: nats
nats: $(NATSCLI) ## bin/nats, the NATS CLI (natscli $(NATSCLI_VERSION)), for the README's nats commands
	@echo "$(NATSCLI): $$($(NATSCLI) --version 2>&1) (export PATH=\"$(CURDIR)/$(BIN):\$$PATH\" to run it as nats)"

$(NATSCLI):
	GOBIN=$(CURDIR)/$(BIN) $(GO) install github.com/nats-io/natscli/nats@$(NATSCLI_VERSION)

# scripts/demo.sh builds tah-node and tahctl itself, saying what takes time
# (the toolchain's download, the first compilation) and how long it took.
demo: ## the specification's example, end to end, on a fresh data directory
	@BIN=$(BIN) GO=$(GO) BUILDFLAGS='$(BUILDFLAGS)' DEMO_DIR='$(DEMO_DIR)' DEMO_LANG='$(DEMO_LANG)' bash scripts/demo.sh

.PHONY: ui browser

ui: ## the web UI (package inspector) on the last demo's data, at UI_HTTP (a free port), until Ctrl-C
	@BIN=$(BIN) GO=$(GO) BUILDFLAGS='$(BUILDFLAGS)' DEMO_DIR='$(DEMO_DIR)' DEMO_LANG='$(DEMO_LANG)' UI_HTTP='$(UI_HTTP)' bash scripts/demo.sh ui

browser: ## Debian's chromium (and a CJK font for its screenshots) for the UI's browser tests, when missing
	@command -v chromium >/dev/null 2>&1 || { \
		if [ "$$(id -u)" = 0 ]; then sudo=; else sudo=sudo; fi; \
		$$sudo apt-get update -q && $$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium fonts-wqy-microhei; }

# make test installs the browser and tells the browser test it must run.
test: browser
test: export TAH_BROWSER := required

test: lint js-deps $(NATSCLI) ## vet, staticcheck, every test with the race detector (all but SQLite's translated C: scripts/test.sh), then known vulnerabilities
	@# scripts/test.sh: the tests with the race detector, the slowest packages'
	@# times, then vulncheck even when a test failed (both reported). Beside
	@# it, in the background, make deploy-test (helm's build, the image, the
	@# chart, the compose cluster: mostly waiting, little CPU once built), whose
	@# output is printed after the suites'.
	@log=$$(mktemp "$${TMPDIR:-/tmp}/tah-deploy-test.XXXXXX"); \
	$(MAKE) --no-print-directory deploy-test >"$$log" 2>&1 & dpid=$$!; \
	GO=$(GO) PKGS='$(PKGS)' bash scripts/test.sh; main=$$?; \
	wait $$dpid; deploy=$$?; \
	echo "== make deploy-test (ran beside the suites above):"; cat "$$log"; rm -f "$$log"; \
	if [ $$main -ne 0 ] || [ $$deploy -ne 0 ]; then \
		echo "make test: FAILED: suites and vulncheck $$([ $$main -eq 0 ] && echo passed || echo failed), deploy $$([ $$deploy -eq 0 ] && echo passed || echo failed)"; exit 1; \
	fi; echo "make test: suites, vulncheck and deploy passed"

# The deploy module's own tests (deploy/*_test.go): the image's tarball, helm
# lint and template with the rendered objects checked against the Kubernetes
# API types of deploy/go.mod's k8s.io/api, and the compose file's cluster run
# as processes (three nats-server, three tah-node, a node killed).
.PHONY: deploy-test image helm
deploy-test: $(HELM) ## the deploy module's tests: the image, the Helm chart, the compose file's cluster (about a minute once built)
	@start=$$(date +%s); \
	$(DEPLOY_GO) vet $(DEPLOY_MOD) ./... && HELM=$(CURDIR)/$(HELM) $(GO) test $(DEPLOY_MOD) -count=1 -timeout 10m ./...; rc=$$?; \
	echo "== deploy tests took $$(( $$(date +%s) - start ))s"; exit $$rc

helm: $(HELM) ## bin/helm: helm v4 (deploy/go.mod's version), built from the Go module proxy
	@$(HELM) version --short

$(HELM): deploy/go.mod deploy/go.sum
	$(DEPLOY_GO) build $(DEPLOY_MOD) -trimpath -ldflags='-X helm.sh/helm/v4/internal/version.version=$(HELM_VERSION)' -o $(CURDIR)/$(HELM) helm.sh/helm/v4/cmd/helm

# Static (CGO_ENABLED=0), trimmed paths and the VCS stamp (--version, and the
# image's labels, read from tah-node's build information); tah-image
# assembles the image from them without a container runtime (deploy/image).
image: ## bin/tah-image.tar: the image of tah-node, tahctl and tah-trust (docker load -i / podman load -i)
	CGO_ENABLED=0 $(GO) build -trimpath $(BUILDFLAGS) -ldflags='-s -w' -o $(IMAGE_BIN)/tah-node ./cmd/node
	CGO_ENABLED=0 $(GO) build -trimpath $(BUILDFLAGS) -ldflags='-s -w' -o $(IMAGE_BIN)/tahctl ./cmd/tahctl
	cd deploy && CGO_ENABLED=0 $(GO) build $(DEPLOY_MOD) -trimpath $(BUILDFLAGS) -ldflags='-s -w' -o $(CURDIR)/$(IMAGE_BIN)/tah-trust ./cmd/tah-trust
	$(DEPLOY_GO) run $(DEPLOY_MOD) ./cmd/tah-image --out $(CURDIR)/$(IMAGE_TAR) --repo $(IMAGE_REPO) \
		--bin tah-node=$(CURDIR)/$(IMAGE_BIN)/tah-node --bin tahctl=$(CURDIR)/$(IMAGE_BIN)/tahctl --bin tah-trust=$(CURDIR)/$(IMAGE_BIN)/tah-trust

unit: js-deps $(NATSCLI) ## fast tests without the race detector
	$(GO) test -count=1 $(PKGS)

lint: ## formatting, vet and staticcheck (a go.mod tool: go tool staticcheck)
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)
	$(GO) tool staticcheck $(PKGS)

vulncheck: ## fail on any known vulnerability that the code reaches (scripts/vulncheck.sh)
	@GO=$(GO) bash scripts/vulncheck.sh

fuzz: ## run the projection fuzz targets
	$(GO) test -run=NONE -fuzz=FuzzProjectContext -fuzztime=$(FUZZTIME) ./projection
	$(GO) test -run=NONE -fuzz=FuzzApply -fuzztime=$(FUZZTIME) ./projection
	$(GO) test -run=NONE -fuzz='FuzzAudit$$' -fuzztime=$(FUZZTIME) ./projection
	$(GO) test -run=NONE -fuzz=FuzzAuditSound -fuzztime=$(FUZZTIME) ./projection
	$(GO) test -run=NONE -fuzz=FuzzWindow -fuzztime=$(FUZZTIME) ./projection

schema: ## regenerate docs/schema from the event and wire types
	$(GO) test ./wire -run TestSchemasUpToDate -update

bench: bench-deps ## the benchmarks of docs/benchmarks.md (BENCHFLAGS="-quick -out=": a smoke run that writes nothing)
	$(GO) build -o bin/tah-bench ./cmd/tah-bench
	bin/tah-bench -out docs $(BENCHFLAGS)

tidy:
	$(GO) mod tidy

js-deps: $(JS_STAMP) $(JS_CLIENT_STAMP) $(AGENT_CALLER_STAMP) $(MCP_STAMP) ## npm dependencies of the JavaScript examples and the MCP servers (their tests run node)

$(JS_STAMP): $(JS_EXAMPLE)/package.json $(JS_EXAMPLE)/package-lock.json
	@if command -v npm >/dev/null 2>&1; then \
		cd $(JS_EXAMPLE) && npm ci --no-audit --no-fund && touch node_modules/.package-lock.json; \
	else \
		echo "npm not found: the JavaScript tool service test will be skipped (install Node.js 18+)"; \
	fi

$(JS_CLIENT_STAMP): $(JS_CLIENT)/package.json $(JS_CLIENT)/package-lock.json
	@if command -v npm >/dev/null 2>&1; then \
		cd $(JS_CLIENT) && npm ci --no-audit --no-fund && touch node_modules/.package-lock.json; \
	else \
		echo "npm not found: the JavaScript client test will be skipped (install Node.js 18+)"; \
	fi

$(AGENT_CALLER_STAMP): $(AGENT_CALLER)/package.json $(AGENT_CALLER)/package-lock.json
	@if command -v npm >/dev/null 2>&1; then \
		cd $(AGENT_CALLER) && npm ci --no-audit --no-fund && touch node_modules/.package-lock.json; \
	else \
		echo "npm not found: the agent protocol caller test will be skipped (install Node.js 18+)"; \
	fi

$(MCP_STAMP): $(MCP_SERVERS)/package.json $(MCP_SERVERS)/package-lock.json
	@if command -v npm >/dev/null 2>&1; then \
		cd $(MCP_SERVERS) && npm ci --no-audit --no-fund && touch node_modules/.package-lock.json; \
	else \
		echo "npm not found: the tests against MCP servers from npm will be skipped (install Node.js 20+)"; \
	fi

bench-deps: $(PEER_STAMP) $(RESTATE_PEER_STAMP) ## npm dependencies of the bench's peers (LangGraph.js with its SQLite checkpointer; Restate, its server and Node.js 22)

$(PEER_STAMP): $(PEER)/package.json $(PEER)/package-lock.json
	@if command -v npm >/dev/null 2>&1; then \
		cd $(PEER) && npm ci --no-audit --no-fund && touch node_modules/.package-lock.json; \
	else \
		echo "npm not found: the bench's peer row will be skipped (install Node.js 20+)"; \
	fi

# The Restate peer's packages ship restate-server's binary and Node.js 22 (its
# SDK wants 22 or later); none needs an install script (--ignore-scripts also
# keeps @scarf/scarf, a dependency of restate-server's, from reporting the install).
$(RESTATE_PEER_STAMP): $(RESTATE_PEER)/package.json $(RESTATE_PEER)/package-lock.json
	@if command -v npm >/dev/null 2>&1; then \
		cd $(RESTATE_PEER) && SCARF_ANALYTICS=false npm ci --no-audit --no-fund --ignore-scripts && touch node_modules/.package-lock.json; \
	else \
		echo "npm not found: the bench's Restate peer will be skipped (install Node.js 20+)"; \
	fi
