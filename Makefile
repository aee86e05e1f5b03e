# stackflow — see README.md. Every target installs what it needs on a fresh machine.
SHELL := /bin/bash
export PATH := $(PATH):/usr/local/go/bin
STACKFLOW_CACHE ?= $(HOME)/.cache/stackflow
export STACKFLOW_CACHE
GO ?= go
# stackflow's binaries and tests link without cgo, as its images do: Helm's kustomize imports Go's plugin
# package, which otherwise forces an external link through gcc (the worker: 14.6 s of CPU per link, 7.2 s
# without; 137 MB, 105 MB without). The pinned tools build as before (deploy/local/tools/build.sh).
export CGO_ENABLED ?= 0
BIN := $(CURDIR)/bin
LOCAL := $(BIN)/stackflow-local
E2E_TIMEOUT ?= 75m
# The packages `make e2e` runs, in this order: those of tests/ but tests/bench (benchmarks only: make
# bench), tests/e2e and tests/makespan (the harness's pure helpers: make unit) and tests/teardown (run
# last, with its build tag).
E2E_PACKAGES ?= $(filter-out ./tests/bench/ ./tests/e2e/ ./tests/makespan/ ./tests/teardown/,$(sort $(addprefix ./,$(dir $(wildcard tests/*/*_test.go)))))
# How make e2e runs them (deploy/local/scripts/e2e.sh): phases one after another; in a phase, lanes
# ("|") side by side, a lane's packages one after another. Phase 1, first lane: tests/samples builds make
# run's cloud (served by the stack's release for the samples' namespace only, on test hosts
# edpm-compute-0 and -1) and leaves it up; servers composes on it (in an OpenStack project of its own,
# its bridges scoped to its namespaces, its cluster-scoped objects under a watch filter); samplesdown
# tears it down and proves nothing is left; then the packages whose bridges serve cluster-scoped kinds
# (rollout, bridge) or that create served objects with no bridge of their own (install, api), one after
# another, as none of them may overlap another's cluster-scoped objects. Second lane: edpm and nova,
# whose bridges serve their own namespaces and kinds, on hosts -4 and -5 (e2e.EDPMLaneHosts). Phase 2:
# tests/stack alone (it starts processes on host 0 and checks the stack's own). A package that no phase
# names runs alone after them.
E2E_PHASE_1 ?= samples servers samplesdown install api rollout bridge | edpm nova
E2E_PHASE_2 ?= stack
E2E_PHASE_3 ?=
# pinned tool versions (WORKFLOWCHECK_VERSION among them)
include deploy/local/versions.env

.PHONY: all run up down status test unit e2e bench build tools packages generate lint clean images histories delete-samples help

## all: the same as build
all: build

## help: every target with what it does
help:
	@sed -n 's/^## //p' Makefile

## packages: Debian packages of the local stack (OpenStack libraries, MariaDB, RabbitMQ, Ansible, sshd)
packages:
	@bash deploy/local/scripts/install-packages.sh

## tools: pinned Kubernetes, etcd, kwok, Temporal CLI, tctl, controller-gen, workflowcheck and crd-ref-docs
## binaries, cached by version in ~/.cache/stackflow
# TOOLS: some of them only (make test leaves controller-gen to make generate)
tools:
	@bash deploy/local/tools/build.sh $(TOOLS)

# The tools the stack runs: what up builds (controller-gen, workflowcheck and crd-ref-docs serve make
# generate and make lint only, and a fresh machine would build them for minutes before make run).
STACK_TOOLS := etcd kube kwok temporal tctl

## build: stackflow's binaries into ./bin: the local stack's command, the bridge, the worker and the
## kubectl plugin kubectl-stackflow (linked into .stackflow/bin by `up`)
build:
	@mkdir -p $(BIN)
	$(GO) build -o $(BIN)/ ./deploy/local/cmd/stackflow-local ./bridge/cmd/stackflow-bridge ./worker/cmd/stackflow-worker ./deploy/describe/cmd/kubectl-stackflow

## generate: deepcopy and CRD YAML from api/ (controller-gen), the chart's RBAC rules from the code (deploy/rbac),
## the kinds reference docs/reference/kinds.md (crd-ref-docs), the OpenStack clients' mocks (mockgen)
generate: tools
	$(GO) generate ./api/... ./deploy/rbac/...
	@bash deploy/local/scripts/kinds-docs.sh
	@bash deploy/local/scripts/mocks.sh

## images: the bridge, worker, Nova, Keystone, Placement and Glance images as OCI layouts in bin/images, built from Debian packages and
## this tree without a container engine, each again only when its inputs changed; prints their digests
## (deploy/images)
images:
	@# -trimpath: the builder's own digest is part of every image's inputs; without it, the checkout's path
	@# would be, and a fresh checkout could not use the images an earlier one left in the cache
	cd deploy/images && $(GO) run -trimpath . -repo $(CURDIR) -out $(BIN)/images

## up: bring the local real stack up (idempotent); the images go onto its real node
up: packages build images
	@bash deploy/local/tools/build.sh $(STACK_TOOLS)
	$(LOCAL) up

## run: stack up, worker and bridge running, samples applied; stays in the foreground until Ctrl-C
run: up
	@bash deploy/local/scripts/run.sh

## delete-samples: remove what `make run` left (deploy/samples, and day2 if applied) the way a user would:
## a worker and a bridge serve the samples' workflows while they tear down what they made
delete-samples: build
	@bash deploy/local/scripts/delete-samples.sh

## down: stop everything `up` started
down:
	@if [ -x $(LOCAL) ]; then $(LOCAL) down; else $(GO) run ./deploy/local/cmd/stackflow-local down; fi

## status: what the local stack runs, with its addresses, logs and PIDs
status:
	@$(LOCAL) status

## test: packages, tools, build, lint, unit tests, then end-to-end tests against the real local stack and
## `down` proven clean; ends with a table of wall time per step and per e2e package (budget: 35 min warm)
test:
	@bash deploy/local/scripts/test.sh

## lint: gofmt, go vet (the module and deploy/images), workflowcheck over workflows and worker, and the kinds
## reference and the OpenStack clients' mocks current with the code
lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed: $$out"; exit 1; fi
	$(GO) vet ./...
	cd deploy/images && $(GO) vet ./...
	@# workflow code may not iterate a map, read the clock or start goroutines: a replay pairs commands
	@# with the history by type and position only, so such a change of order goes unseen until it misleads
	@bash deploy/local/tools/build.sh workflowcheck
	$(STACKFLOW_CACHE)/bin/workflowcheck-$(WORKFLOWCHECK_VERSION) -config workflows/workflowcheck.yaml ./workflows/... ./worker/...
	@# the kinds reference is generated from api/: an edited type or comment must come with make generate
	@tmp=$$(mktemp) && bash deploy/local/scripts/kinds-docs.sh $$tmp && \
	  if ! diff -u docs/reference/kinds.md $$tmp >/dev/null; then rm -f $$tmp; \
	    echo "docs/reference/kinds.md is stale: run make generate"; exit 1; fi; rm -f $$tmp
	@# the OpenStack clients' mocks are generated from their interfaces (mockgen): a changed interface
	@# comes with its regenerated mock
	@tmp=$$(mktemp -d) && bash deploy/local/scripts/mocks.sh $$tmp && \
	  for d in activities/openstack/mock activities/baremetal/mock; do \
	    if ! diff -r $$d $$tmp/$$d >/dev/null; then rm -rf $$tmp; \
	      echo "$$d is stale: run make generate"; exit 1; fi; done; rm -rf $$tmp

## unit: every test that needs no stack (the code's own, and the pure helpers of the e2e harness)
unit:
	$(GO) test -count=1 ./api/... ./workflows/... ./activities/... ./bridge/... ./worker/... ./deploy/... ./docs/ ./tests/e2e/ ./tests/makespan/
	cd deploy/images && $(GO) test -count=1 ./...
	# the upgrade test's build B (a GetVersion-guarded extra reconcile step) replays the whole corpus
	$(GO) test -count=1 -tags upgradeprobe -run 'TestReplay' ./workflows/

# Every e2e package appends its history sizes here (go test shows nothing of a package that passes).
HISTORY_REPORT := $(BIN)/history-sizes.txt
# The replay corpus of workflows/ (make e2e and make histories add to it).
HISTORIES := $(CURDIR)/workflows/testdata/histories
## e2e: the end-to-end packages against the real local stack (make run's samples removed first), their
## history sizes, the runs they add to the replay corpus, then `down` proven clean (tests/teardown)
e2e: up
	@# make run's samples use the same hosts and cloud: removed first, as a user would (their teardown runs)
	@bash deploy/local/scripts/delete-samples.sh
	@rm -f $(HISTORY_REPORT)
	@# go test shows a package's time only in its summary line: kept in bin/e2e.log for make test's table
	@# the phases and their lanes; each package's test binary linked ahead (e2e.sh)
	@# and each package adds to the replay corpus the runs of paths and changes it holds no run of yet:
	@# commit what appears under workflows/testdata/histories with the change that made it
	set -o pipefail; STACKFLOW_HISTORY_REPORT=$(HISTORY_REPORT) STACKFLOW_RECORD_HISTORIES=$(HISTORIES) E2E_ONLY="$(E2E_PACKAGES)" bash deploy/local/scripts/e2e.sh \
	  $(E2E_TIMEOUT) "$(E2E_PHASE_1)" "$(E2E_PHASE_2)" "$(E2E_PHASE_3)" 2>&1 | tee $(BIN)/e2e.log
	@echo "history sizes per e2e package, the suite's largest run first (every payload under 256 KiB, checked):"
	@sort -rn $(HISTORY_REPORT)
	set -o pipefail; $(GO) test -count=1 -tags teardown -timeout 5m ./tests/teardown/ 2>&1 | tee -a $(BIN)/e2e.log

## histories: record the replay corpus of workflows/ (workflows/testdata/histories) from the end-to-end
## packages that run every served kind and path; the unit tests replay it (tests/e2e.Recorder). The runs
## are added to what is recorded (a shape recorded already is skipped), so the runs of older code keep
## being replayed: workflows in flight outlive a release. HISTORY_PACKAGES=nova records one package;
## HISTORIES_FRESH=1 drops the packages' recorded runs first.
HISTORY_PACKAGES ?= samples servers samplesdown edpm rollout bridge nova
histories: up
	$(if $(HISTORIES_FRESH),rm -rf $(addprefix $(HISTORIES)/,$(HISTORY_PACKAGES)))
	for p in $(HISTORY_PACKAGES); do \
		STACKFLOW_RECORD_HISTORIES=$(HISTORIES) $(GO) test -count=1 -p 1 -timeout $(E2E_TIMEOUT) ./tests/$$p/ || exit 1; \
	done
	@echo "$$(find $(HISTORIES) -name '*.json' | wc -l) histories, $$(du -sh $(HISTORIES) | cut -f1)"

## bench: benchmarks against the real local stack (tests/bench; BENCH=<regexp> for some of them); prints
## figures and ratios, and keeps them with the commit and the machine line in bin/bench/<UTC time>.txt
bench: up
	@bash deploy/local/scripts/bench.sh

## clean: remove ./bin (the stack's state in .stackflow stays: make down stops it)
clean:
	rm -rf $(BIN)
