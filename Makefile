# Herald — common tasks. `make help` lists them.
GO ?= go

.PHONY: help test test-race lint tidy bench demo build

help: ## list targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-10s %s\n", $$1, $$2}'

# Every package of every module in go.work (./... would stop at the root
# module's boundary); bench and the validator modules are outside the
# workspace and run with GOWORK=off. docs/modules.md lists the modules.
PKGS := github.com/heraldwf/herald/...
STANDALONE := bench metrics/prometheus/alerttest httpapi/openapitest

VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)

build: ## build the herald command into ./bin (herald version prints VERSION)
	$(GO) build -ldflags "-X main.version=$(VERSION)" -o bin/herald ./cmd/herald

demo: ## run the example workflows end to end on SQLite
	$(GO) run ./cmd/herald demo

test: ## run the tests of every module
	$(GO) test $(PKGS)
	@for m in $(STANDALONE); do (cd $$m && GOWORK=off $(GO) test ./...) || exit 1; done

test-race: ## run the tests with the race detector (what CI runs)
	$(GO) test -race $(PKGS)

lint: ## go vet, gofmt and the module-graph check, every module
	$(GO) vet $(PKGS)
	@for m in $(STANDALONE); do (cd $$m && GOWORK=off $(GO) vet ./...) || exit 1; done
	@out=$$(gofmt -l .); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	.ci/modcheck

tidy: ## tidy every module's go.mod (plain go mod tidy is wrong at the root: see .ci/tidy)
	.ci/tidy

bench: ## run the go test benchmarks
	$(GO) test -run '^$$' -bench . -benchmem $(PKGS)
