# gnmi-sidecar — developer entry points. See README.md.
#
#   make run      build and start the sidecar in front of a simulated device (journal in ./data)
#   make test     install test tools into ./bin, vet, and run every test with -race
#   make bench    Go benchmarks of the hot paths (journal, device), benchstat-comparable output,
#                 then gnmi-sidecar-bench: the sidecar against the device (docs/bench.md)
#   make bench-short  gnmi-sidecar-bench --short only (under a minute)
#   make lint     go vet + staticcheck, and the deployment files (hack/deploycheck)
#   make sim      the agent's randomized simulation and the differential test (random Sets of
#                 every shape through the sidecar, checked against a reference model) with
#                 more seeds (SEEDS=2000)
#   make fuzz     each fuzz target for FUZZTIME (30s) in turn (docs/testing.md)
#   make chaos    the chaos test for CHAOS_DURATION (10m): real processes, SIGKILLs, device
#                 restarts, rejections, hangs, network faults; make test runs it for 45 s

GO          ?= go
BIN         := $(CURDIR)/bin
# The developer command demo links the simulated device; the product
# binary bin/gnmi-sidecar does not (cmd/gnmi-sidecar/main.go), nor the
# benchmark, a command of its own (cmd/gnmi-sidecar-bench).
DEVTAGS     := -tags devtools
GNMI_CLI    := $(BIN)/gnmi_cli
# A third-party gNMI target (gnxi's gnmi_target, pinned in hack/gnmitarget)
# for the scenarios the sidecar must get exactly right on any device.
GNMI_TARGET := $(BIN)/gnmi_target
STATICCHECK := $(BIN)/staticcheck
PROTOC_GEN_GO := $(BIN)/protoc-gen-go

GNMI_VERSION        := v0.14.1
STATICCHECK_VERSION := v0.8.2
PROTOBUF_VERSION    := v1.36.12

# Tests find the gNMI reference client and the third-party target here.
export GNMI_CLI
export GNMI_TARGET
# A short test budget keeps CI far below its limit; override for local runs.
TEST_TIMEOUT ?= 20m
TEST_FLAGS   ?=
BENCH_FLAGS  ?= -benchtime=1x -count=1
# Extra options of gnmi-sidecar-bench, e.g. SIDECAR_BENCH_FLAGS='--scenarios latency,throughput --json'.
SIDECAR_BENCH_FLAGS ?=

SEEDS ?= 2000
# make sim: more options of the differential test, e.g. DIFF_FLAGS='-diff.seed=N'
# (replay) or '-diff.target=HOST:PORT' (an external device).
DIFF_FLAGS ?=

# make chaos: TestChaos (cmd/gnmi-sidecar/chaos_test.go) for longer than in
# make test, its processes built with -race; CHAOS_FLAGS='-chaos.seed=N'
# replays a run.
CHAOS_DURATION ?= 10m
# The faults' duration plus healing and the checks.
CHAOS_TIMEOUT  ?= 60m
CHAOS_FLAGS    ?=

# make fuzz: package:target, one go test -fuzz each (it takes one target).
# New inputs are minimized for at most 10 s, not Go's 60 s, so that the
# slower targets keep fuzzing.
FUZZTIME    ?= 30s
FUZZ_FLAGS  ?= -fuzzminimizetime 10s
FUZZ_TARGETS := journal:FuzzPathKey journal:FuzzPathKeyRoundTrip journal:FuzzRecordDecoding journal:FuzzCommitChange \
	agent:FuzzChangeRequest agent:FuzzSetBatcher agent:FuzzCoveringKeys agent/trace:FuzzParsePath agent/trace:FuzzRead \
	proxy:FuzzSetRequest proxy:FuzzGetRequest proxy:FuzzSubscribeRequest gnmipath:FuzzMatchesOrUnder \
	introspection:FuzzGet introspection:FuzzSubscribe \
	cmd/gnmi-sidecar:FuzzValueJSON

.PHONY: all build run test tools lint bench bench-short sim fuzz chaos proto clean

all: build

build:
	$(GO) build ./...

$(GNMI_CLI):
	GOBIN=$(BIN) $(GO) install github.com/openconfig/gnmi/cmd/gnmi_cli@$(GNMI_VERSION)

$(GNMI_TARGET): hack/gnmitarget/go.mod hack/gnmitarget/go.sum
	cd hack/gnmitarget && $(GO) build -o $(GNMI_TARGET) github.com/google/gnxi/gnmi_target

$(STATICCHECK):
	GOBIN=$(BIN) $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)

$(PROTOC_GEN_GO):
	GOBIN=$(BIN) $(GO) install google.golang.org/protobuf/cmd/protoc-gen-go@$(PROTOBUF_VERSION)

tools: $(GNMI_CLI) $(GNMI_TARGET) $(STATICCHECK)

# The sidecar on 127.0.0.1:9339 in front of an in-process simulated device
# (127.0.0.1:9340), journal in ./data: state survives stopping and starting.
run: $(GNMI_CLI)
	$(GO) build -o $(BIN)/gnmi-sidecar ./cmd/gnmi-sidecar
	$(GO) build $(DEVTAGS) -o $(BIN)/gnmi-sidecar-dev ./cmd/gnmi-sidecar
	$(BIN)/gnmi-sidecar-dev demo --listen 127.0.0.1:9339 --device-listen 127.0.0.1:9340 --journal-dir ./data --gnmi-cli ./bin/gnmi_cli

test: tools lint
	$(GO) test $(DEVTAGS) -race -timeout $(TEST_TIMEOUT) $(TEST_FLAGS) ./...

# The deployment files (deploy/) are checked offline by hack/deploycheck, a
# module of its own (k8s.io, Helm and Prometheus stay out of the sidecar's
# go.mod): the Helm chart rendered by the Helm SDK for 1, 3 and 500 devices,
# its alert rules and dashboard by Prometheus's rulefmt and PromQL parser
# (and their metric names against a running sidecar, in its tests),
# manifests by the Kubernetes API machinery and the Pod Security Standards, units by
# systemd-analyze (when installed), every option by the gnmi-sidecar built
# here (its tests build their own).
lint: $(STATICCHECK)
	$(GO) vet ./...
	$(GO) vet $(DEVTAGS) ./...
	$(STATICCHECK) $(DEVTAGS) ./...
	$(GO) build -o $(BIN)/gnmi-sidecar ./cmd/gnmi-sidecar
	cd hack/deploycheck && $(GO) vet ./... && $(STATICCHECK) ./... && $(GO) test ./...
	$(GO) -C hack/deploycheck build -o $(BIN)/deploycheck .
	$(BIN)/deploycheck -sidecar $(BIN)/gnmi-sidecar deploy

# The journal's benchmarks run a fixed workload each (hence -benchtime=1x) and
# report their figures as custom metrics; the device's, the agent's (batching,
# southbound requests) and the proxy's (request decomposition) are ordinary
# per-op ones.
bench:
	$(GO) test -run '^$$' -bench . $(BENCH_FLAGS) ./journal/...
	$(GO) test -run '^$$' -bench . -benchtime=200x -count=1 ./testbed/...
	$(GO) test -run '^$$' -bench . -benchmem -count=1 ./agent/ ./proxy/
	$(GO) build -o $(BIN)/gnmi-sidecar ./cmd/gnmi-sidecar
	$(GO) build -o $(BIN)/gnmi-sidecar-bench ./cmd/gnmi-sidecar-bench
	$(BIN)/gnmi-sidecar-bench $(SIDECAR_BENCH_FLAGS)

# The sidecar against the device, every docs/design.md §5 row at small sizes (< 1 min).
# The bench runs bin/gnmi-sidecar, next to it, for the child-process rows.
bench-short:
	$(GO) build -o $(BIN)/gnmi-sidecar ./cmd/gnmi-sidecar
	$(GO) build -o $(BIN)/gnmi-sidecar-bench ./cmd/gnmi-sidecar-bench
	$(BIN)/gnmi-sidecar-bench --short $(SIDECAR_BENCH_FLAGS)

# The agent's randomized simulation (make test runs 200 seeds), then the
# differential test through real processes (make test runs 12 seeds;
# docs/testing.md), its counts printed on stdout. The test binary runs in
# its package directory (it builds the binaries from there).
sim:
	$(GO) test -race -timeout 60m ./agent/ -run TestSimulation -sim.seeds=$(SEEDS)
	$(GO) test -c $(DEVTAGS) -o $(BIN)/differential.test ./cmd/gnmi-sidecar
	cd cmd/gnmi-sidecar && $(BIN)/differential.test -test.run '^TestDifferential$$' \
		-test.timeout 180m -diff.seeds=$(SEEDS) -diff.report $(DIFF_FLAGS)

# The seed corpora (f.Add and testdata/fuzz) also run in make test.
fuzz:
	@for t in $(FUZZ_TARGETS); do \
		echo "== $${t#*:} (./$${t%%:*})"; \
		$(GO) test -run '^$$' -fuzz "^$${t#*:}$$" -fuzztime $(FUZZTIME) $(FUZZ_FLAGS) ./$${t%%:*}/ || exit 1; \
	done

# The test binary runs in its package directory (it builds the binaries
# from there) and prints the counts on stdout.
chaos:
	$(GO) test -c $(DEVTAGS) -race -o $(BIN)/chaos.test ./cmd/gnmi-sidecar
	cd cmd/gnmi-sidecar && GNMI_SIDECAR_E2E_RACE=1 $(BIN)/chaos.test -test.run '^TestChaos$$' \
		-test.timeout $(CHAOS_TIMEOUT) \
		-chaos.duration $(CHAOS_DURATION) -chaos.report $(CHAOS_FLAGS)

# Regenerates the checked-in Go code of the repo's .proto files (needs protoc).
proto: $(PROTOC_GEN_GO)
	./hack/protoc.sh

clean:
	rm -rf $(BIN)
