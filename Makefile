# writ — common tasks. `make help` lists them.
GO       ?= go
BIN      ?= bin
FUZZTIME ?= 30s
SOAK_N   ?= 20
PKGS     := ./...

.PHONY: help build test test-js soak test-short bench bench-replay bench-quick fuzz verify demo clean images cluster-test

help: ## list targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-12s %s\n", $$1, $$2}'

# worker-agent runs as one process per hook event. Without cgo (which it
# only gets for the net package's libc resolver; NATS hosts are then
# resolved by Go's own resolver from /etc/hosts and DNS) it is a static
# binary that starts without the dynamic loader, libc and pthreads.
# writ-hook, the thin hook client install prefers when it sits beside
# worker-agent, links only the standard library.
build: ## build issuer, worker-agent, writ-hook and auditor into ./bin
	@mkdir -p $(BIN)
	$(GO) build -trimpath -o $(BIN)/ ./cmd/issuer ./cmd/auditor
	CGO_ENABLED=0 $(GO) build -trimpath -o $(BIN)/ ./cmd/worker-agent ./cmd/writ-hook

test: ## run every test with the race detector (real raft, boltdb, NATS, processes)
	$(GO) test -race -count=1 -timeout 20m $(PKGS)

test-js: ## the OpenClaw plugin's tests (node --test, offline, no npm dependencies)
	node --test integrations/openclaw

test-faults: ## the fault suite: partitions, flaky links, crashes, clock jumps, disk faults, tampering (WRIT_FAULTS=1)
	WRIT_FAULTS=1 $(GO) test -race -count=1 -timeout 15m ./tests/faults/...

soak: ## run the fault suite SOAK_N times (default 20) and print a table of passes, failures and first errors per scenario
	$(GO) run ./internal/testing/soak -n $(SOAK_N) $(if $(SOAK_RUN),-run '$(SOAK_RUN)')

test-short: ## quick tests without the race detector
	$(GO) test -count=1 -short $(PKGS)

bench: ## writ vs etcd vs JetStream KV side by side, one run (< 10 min on 2 cores); table + bench/results/bench.{json,csv,png}; then the auditor's replay
	$(GO) build -trimpath -o $(BIN)/issuer ./cmd/issuer
	cd bench && $(GO) run ./cmd/writbench -issuer $(abspath $(BIN))/issuer -out results
	@$(MAKE) --no-print-directory bench-replay

bench-replay: ## the auditor's replay: sequential and pipelined verify (events/s) and the projection (receipts/s)
	$(GO) test -run '^$$' -bench 'BenchmarkVerify' -benchtime 262144x -count 1 ./audit/
	$(GO) test -run '^$$' -bench 'BenchmarkProject' -benchtime 40000x -count 1 ./audit/projection/

bench-quick: ## the same with small N (< 2 min with a warm build cache); bench/results/bench-quick.*
	$(GO) build -trimpath -o $(BIN)/issuer ./cmd/issuer
	cd bench && $(GO) run ./cmd/writbench -quick -issuer $(abspath $(BIN))/issuer -out results

fuzz: ## run every fuzz target for FUZZTIME each
	@set -e; for pkg in $$($(GO) list ./...); do \
	  for f in $$($(GO) test -list '^Fuzz' $$pkg 2>/dev/null | grep '^Fuzz' || true); do \
	    echo "== $$pkg $$f"; $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) $$pkg; \
	  done; \
	done

verify: ## gofmt, go vet and go.mod drift
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)
	@cp go.mod /tmp/writ-go.mod.bak; cp go.sum /tmp/writ-go.sum.bak; \
	 $(GO) mod tidy; \
	 if ! diff -q go.mod /tmp/writ-go.mod.bak >/dev/null || ! diff -q go.sum /tmp/writ-go.sum.bak >/dev/null; then \
	   echo "go.mod/go.sum are not tidy: run 'go mod tidy' and commit"; \
	   cp /tmp/writ-go.mod.bak go.mod; cp /tmp/writ-go.sum.bak go.sum; exit 1; fi

demo: build ## start a dev issuer and run the scripted demo fleet against it
	./scripts/demo.sh

IMAGE     ?= writ:dev
IMAGE_CTX ?= $(BIN)/image

images: ## build static binaries and the FROM-scratch image $(IMAGE) (deploy/Dockerfile)
	rm -rf $(IMAGE_CTX)
	mkdir -p $(IMAGE_CTX)/rootfs/tmp $(IMAGE_CTX)/data
	chmod 1777 $(IMAGE_CTX)/rootfs/tmp
	chmod 0700 $(IMAGE_CTX)/data
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags='-s -w' -o $(IMAGE_CTX)/rootfs/ ./cmd/issuer ./cmd/worker-agent ./cmd/writ-hook ./cmd/auditor
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags='-s -w' -o $(IMAGE_CTX)/rootfs/writ-load ./deploy/loadgen
	docker build -f deploy/Dockerfile -t $(IMAGE) $(IMAGE_CTX)

cluster-test: ## 3 issuers + auditor in docker compose: spend load, partition the leader, kill a node, verify (SKIPs without Docker)
	MAKE="$(MAKE)" IMAGE="$(IMAGE)" ./scripts/cluster-test.sh

clean: ## remove build output and demo data
	rm -rf $(BIN) writ-data .demo
