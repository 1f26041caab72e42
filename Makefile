# TAH — durable LLM agent sessions on NATS.
#
# Commands a newcomer needs:
#   make test    every test (vet, unit, integration, race), as CI runs it
#   make fuzz    the projection fuzz targets, FUZZTIME each (default 60s)
#   make schema  regenerate docs/schema/ from the event payload types
#   make lint    gofmt and go vet
#   make help    this list
#
# Everything a test needs is installed or built by these targets themselves.

GO        ?= go
FUZZTIME  ?= 60s
PKGS      := ./...
JS_EXAMPLE := examples/tool-service-js
JS_STAMP   := $(JS_EXAMPLE)/node_modules/.package-lock.json

.PHONY: help test unit lint fuzz schema tidy js-deps

help: ## print the commands
	@sed -n '3,10p' Makefile | sed 's/^# \{0,1\}//'

test: lint js-deps ## vet and every test, with the race detector
	$(GO) test -race -count=1 -timeout 15m $(PKGS)

unit: js-deps ## fast tests without the race detector
	$(GO) test -count=1 $(PKGS)

lint: ## formatting and vet
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)

fuzz: ## run the projection fuzz targets
	$(GO) test -run=NONE -fuzz=FuzzProjectContext -fuzztime=$(FUZZTIME) ./projection
	$(GO) test -run=NONE -fuzz=FuzzApply -fuzztime=$(FUZZTIME) ./projection

schema: ## regenerate docs/schema from the event types
	$(GO) test ./event -run TestSchemasUpToDate -update

tidy:
	$(GO) mod tidy

js-deps: $(JS_STAMP) ## npm dependencies of the JavaScript tool service example (its test runs node)

$(JS_STAMP): $(JS_EXAMPLE)/package.json $(JS_EXAMPLE)/package-lock.json
	@if command -v npm >/dev/null 2>&1; then \
		cd $(JS_EXAMPLE) && npm ci --no-audit --no-fund && touch node_modules/.package-lock.json; \
	else \
		echo "npm not found: the JavaScript tool service test will be skipped (install Node.js 18+)"; \
	fi
