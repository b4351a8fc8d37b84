# ironlink — make targets. See README.md and docs/reference/make.md.
SHELL := /bin/bash
GO ?= go
BUF_VERSION := v1.75.0
BUF := $(GO) run github.com/bufbuild/buf/cmd/buf@$(BUF_VERSION)
STATICCHECK_VERSION := v0.8.2
STATICCHECK := $(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)
BIN := bin
# Stamped into every binary (internal/version): `ironlink-hub version` prints both.
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT ?= $(shell git rev-parse HEAD 2>/dev/null)
GOBUILD := $(GO) build -trimpath -ldflags "-X github.com/ironlink/ironlink/internal/version.Version=$(VERSION) -X github.com/ironlink/ironlink/internal/version.Commit=$(COMMIT)"

.PHONY: all build generate check-generated lint tidy-check breaking test bench bench-short bench-million soak demo clean

all: build

## build: compile ironlink (the operator CLI), ironlink-hub, ironlink-satellite and the OpenStack simulator into bin/ (version stamped)
build:
	$(GOBUILD) -o $(BIN)/ironlink ./hub/cmd/ironlink
	$(GOBUILD) -o $(BIN)/ironlink-hub ./hub/cmd/ironlink-hub
	$(GOBUILD) -o $(BIN)/ironlink-satellite ./satellite/cmd/ironlink-satellite
	$(GOBUILD) -o $(BIN)/ironlink-openstacksim ./internal/openstacksim/cmd/ironlink-openstacksim
	$(GOBUILD) -o $(BIN)/ironlink-lb ./internal/tcpproxy/cmd/ironlink-lb

## generate: regenerate gen/ from proto/ with buf and the local plugins pinned in go.mod
generate:
	rm -rf gen
	$(BUF) generate

## check-generated: fail when gen/ differs from what `make generate` produces
check-generated: generate
	git diff --exit-code -- gen || (echo "gen/ is out of date: run make generate and commit" >&2; exit 1)
	test -z "$$(git status --porcelain -- gen)" || (git status --porcelain -- gen; echo "gen/ has untracked files: run make generate and commit" >&2; exit 1)

## lint: gofmt, go mod tidy (no diff), go vet, staticcheck (pinned) and buf lint
lint: tidy-check
	@out=$$(gofmt -l $$(git ls-files '*.go' | grep -v '^gen/') 2>&1); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(STATICCHECK) ./...
	$(BUF) lint

## tidy-check: fail when go.mod/go.sum differ from what `go mod tidy` writes
tidy-check:
	@$(GO) mod tidy -diff || (echo "go.mod/go.sum are not tidy: run go mod tidy and commit" >&2; exit 1)

## breaking: buf breaking of proto/ against the merge-base with main (on main: HEAD~1); see scripts/buf-breaking.sh
breaking:
	BUF="$(BUF)" ./scripts/buf-breaking.sh

## test: everything — unit, storage (real PostgreSQL) and end-to-end (real processes) tests
test: build
	./scripts/test.sh $(TEST_ARGS)

## bench: every benchmark figure, each as "ironlink ratio: <name> <ours/raw>" against its raw ceiling measured in the same run, checked against test/bench/baseline (about 60 min; BENCH_MILLION=0 leaves out the million-device reads, about 25 min)
bench:
	./scripts/bench.sh full
	./scripts/bench-check.sh bin/bench-full.out

## bench-short: the short benchmarks CI runs after make test (about 3 min), every baseline figure required; a figure below its floor is measured once more (a regression fails twice)
bench-short:
	./scripts/bench.sh short
	./scripts/bench-check.sh --all bin/bench-short.out || { \
		echo "bench-short: a figure fell below its floor or is missing; measuring the short set once more (each figure counts with its best run)"; \
		BENCH_OUT=bin/bench-short-again.out ./scripts/bench.sh short && \
		cat bin/bench-short.out bin/bench-short-again.out > bin/bench-short-both.out && \
		./scripts/bench-check.sh --all bin/bench-short-both.out; }

## bench-million: the operator reads at 1,000,000 devices with a year of history (test/bench BenchmarkMillionReads; about 35 min, most of it generating the fleet); also the last step of make bench
bench-million:
	./scripts/bench.sh million
	./scripts/bench-check.sh bin/bench-million.out

## soak: the soak with its invariant checker (test/soak, docs/howto/soak.md) for SOAK_MINUTES (default 60); prints a summary table
SOAK_MINUTES ?= 60
soak:
	$(GO) test -tags soak -count=1 -v -timeout $$(( $(SOAK_MINUTES) * 2 + 20 ))m -run '^TestSoak$$' ./test/soak -args -soak.minutes=$(SOAK_MINUTES)

## demo: PostgreSQL, a hub and a satellite against the built-in OpenStack simulator
demo: build
	./scripts/demo.sh

## clean: remove bin/
clean:
	rm -rf $(BIN)
