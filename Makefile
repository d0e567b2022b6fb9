# Targets follow the Watermill ecosystem's names.
GO ?= go
PKGS ?= ./...

.PHONY: test test_all test_short test_race test_stress test_v fmt vet bench bench_go quickstart quickstart_check

# Every test: scripts/with-emulators.sh installs (npm ci) and starts kinesalite, dynalite and
# kinesis-local on 127.0.0.1, runs test_all, and stops them. This is what CI runs (.ci/run).
test:
	scripts/with-emulators.sh $(MAKE) test_all

# What `make test` runs once the emulators are up (tests that need them skip without them):
# everything under -race; Watermill's reconnect test, which is itself racy, without it; the
# universal suite's stress run; the examples.
test_all:
	$(GO) test -race -count=1 -timeout=20m $(PKGS)
	$(GO) test -count=1 -timeout=10m -run '^TestLiveReconnect$$' ./tests/
	$(MAKE) test_stress
	$(MAKE) quickstart_check

test_v:
	$(GO) test -race -count=1 -timeout=20m -v $(PKGS)

test_short:
	$(GO) test -short -count=1 -timeout=10m $(PKGS)

test_race:
	$(GO) test -short -race -count=1 -timeout=15m $(PKGS)

# The universal suite run STRESS_TEST_COUNT times in parallel (default 10), under -race.
test_stress:
	$(GO) test -tags=stress -race -count=1 -timeout=45m -run Stress ./tests/

# The benchmark table (tests/bench): every row, each a ratio against a baseline measured in
# the same run, printed and written to BENCHMARKS.md, with kinesalite up for the rows that need
# it. BENCH_FLAGS picks rows or repetitions, e.g. BENCH_FLAGS='-rows B1,B2 -runs 3'.
BENCH_FLAGS ?=
bench:
	scripts/with-emulators.sh $(GO) run ./tests/bench -out BENCHMARKS.md $(BENCH_FLAGS)

# The go test benchmarks (BenchmarkEndToEnd and the packages' own).
bench_go:
	$(GO) test -run=NONE -bench=. -benchmem $(PKGS)

fmt:
	gofmt -w $$(git ls-files '*.go')

vet:
	$(GO) vet $(PKGS)

quickstart:
	$(GO) run ./_examples/quickstart

# The examples must build and run to completion on memlog: no AWS, no network.
quickstart_check:
	$(GO) vet ./_examples/quickstart ./_examples/tracing
	$(GO) run ./_examples/quickstart > /dev/null
	$(GO) run ./_examples/tracing > /dev/null

# The seeded simulation of a consumer group (tests/sim) without the race detector: SEEDS seeds
# (1..SEEDS), one line per failing seed and a summary of how many ran and failed. SIM_MIX picks
# a scenario family (all, faults, restarts, subs, calm); SIM_SEED=n go test ./tests/sim replays one seed.
SEEDS ?= 1000
.PHONY: sim
sim:
	cd tests/sim && SIM_SEEDS=$(SEEDS) SIM_BRIEF=1 $(GO) test -count=1 -timeout=60m -run '^TestSimulation$$'
