# Herald — common tasks. `make help` lists them.
GO ?= go

.PHONY: help test test-race lint bench demo build

help: ## list targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-10s %s\n", $$1, $$2}'

VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)

build: ## build the herald command into ./bin (herald version prints VERSION)
	$(GO) build -ldflags "-X main.version=$(VERSION)" -o bin/herald ./cmd/herald

demo: ## run the example workflows end to end on SQLite
	$(GO) run ./cmd/herald demo

test: ## run the tests
	$(GO) test ./...

test-race: ## run the tests with the race detector (what CI runs)
	$(GO) test -race ./...

lint: ## go vet and gofmt
	$(GO) vet ./...
	@out=$$(gofmt -l .); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

bench: ## run the go test benchmarks
	$(GO) test -run '^$$' -bench . -benchmem ./...
