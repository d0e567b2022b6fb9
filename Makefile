# Targets follow the Watermill ecosystem's names.
GO ?= go
PKGS ?= ./...

.PHONY: test test_all test_short test_race test_stress test_v fmt vet bench bench_go quickstart examples_check quickstart_check

# Every test: scripts/with-emulators.sh installs (npm ci) and starts kinesalite, dynalite and
# kinesis-local on 127.0.0.1, runs test_all, and stops them. This is what CI runs (.ci/run).
test:
	scripts/with-emulators.sh $(MAKE) test_all

# What `make test` runs once the emulators are up (tests that need them skip without them):
# everything under -race (among them TestLiveExample*, which run the examples on the servers,
# the consumer group in two processes); Watermill's reconnect test, which is itself racy,
# without it; the universal suite's stress run; the examples on memlog. (The scale run's small
# configuration is in the first line; make scale, the full table, takes 2-3 minutes more.)
test_all:
	$(GO) test -race -count=1 -timeout=20m $(PKGS)
	$(GO) test -count=1 -timeout=10m -run '^TestLiveReconnect$$' ./tests/
	$(MAKE) test_stress
	$(MAKE) examples_check

test_v:
	$(GO) test -race -count=1 -timeout=20m -v $(PKGS)

test_short:
	$(GO) test -short -count=1 -timeout=10m $(PKGS)

test_race:
	$(GO) test -short -race -count=1 -timeout=15m $(PKGS)

# The universal suite run STRESS_TEST_COUNT times in parallel (default 10): in consumer groups
# under -race, without a group plain. Without a group, TestConcurrentSubscribe hands each of its
# 5,000 messages to all 50 subscribers, 2.5 million deliveries in the ten runs: 225 s under the
# race detector, most of the whole test run's CPU, against 25 s plain. The race detector still
# runs that suite once, in test_all; Watermill's own drivers run their stress targets plain.
test_stress:
	$(GO) test -tags=stress -race -count=1 -timeout=45m -run 'Stress(ConsumerGroups|SingleShardOrdered)$$' ./tests/universal/
	$(GO) test -tags=stress -count=1 -timeout=45m -run 'StressNoGroup$$' ./tests/universal/

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

# Every example must build, pass vet and run to completion by itself on memlog: no AWS, no
# network. The SDK's endpoint settings (AWS_ENDPOINT_URL_KINESIS, AWS_ENDPOINT_URL_DYNAMODB,
# AWS_ENDPOINT_URL) are removed from their environment, since scripts/with-emulators.sh (make test)
# sets the first two, and with an endpoint an example runs on that server.
EXAMPLES ?= quickstart router consumer-group replay tracing
# Each ends by itself in a few seconds; timeout (where there is one) stops one that hangs.
EXAMPLE_TIMEOUT := $(shell command -v timeout >/dev/null 2>&1 && echo timeout 60)
examples_check:
	$(GO) vet $(addprefix ./_examples/,$(EXAMPLES))
	@set -e; log=$$(mktemp); trap 'rm -f "$$log"' EXIT; for e in $(EXAMPLES); do \
		echo "go run ./_examples/$$e > /dev/null"; \
		if ! env -u AWS_ENDPOINT_URL_KINESIS -u AWS_ENDPOINT_URL_DYNAMODB -u AWS_ENDPOINT_URL $(EXAMPLE_TIMEOUT) $(GO) run ./_examples/$$e > /dev/null 2> "$$log"; then \
			cat "$$log" >&2; echo "_examples/$$e failed, or did not end within 60 s" >&2; exit 1; \
		fi; \
	done

quickstart_check: examples_check

# The seeded simulation of a consumer group (tests/sim) without the race detector: SEEDS seeds
# (1..SEEDS), one line per failing seed and a summary of how many ran and failed. SIM_MIX picks
# a scenario family (all, faults, restarts, subs, calm); SIM_SEED=n go test ./tests/sim replays one seed.
SEEDS ?= 1000
.PHONY: sim
sim:
	cd tests/sim && SIM_SEEDS=$(SEEDS) SIM_BRIEF=1 $(GO) test -count=1 -timeout=60m -run '^TestSimulation$$'

# The scale run (tests/scale) without the race detector: one consumer group of 50 instances on
# 1,000 and then 4,000 memlog shards, on fake time, through start, join (+10), leave (-10,
# Close) and crash (-5); prints a table per phase (time to an even spread, lease-table calls
# per instance and for the group, estimated DynamoDB RCU/WCU in all and on the hottest
# partition key, duplicates, losses) and the goals under it. SCALE_SHARDS=1000,4000 picks the
# sizes; SCALE_OUT=path also writes the table (markdown) to path. A plain go test runs a small
# configuration of it that checks only the invariants.
.PHONY: scale
scale:
	cd tests/scale && SCALE=1 SCALE_SHARDS=$(SCALE_SHARDS) $(if $(SCALE_OUT),SCALE_OUT=$(abspath $(SCALE_OUT))) $(GO) test -count=1 -timeout=30m -run '^TestScale(Members)?$$' -v
