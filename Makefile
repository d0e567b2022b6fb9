# Targets follow the Watermill ecosystem's names.
GO ?= go
PKGS ?= ./...

.PHONY: test test_short test_race test_stress test_v fmt vet bench quickstart quickstart_check

# Every test, with the race detector, then the universal suite's stress run (also under
# -race). This is what CI runs (.ci/run); about 3 minutes on 2 cores.
test:
	$(GO) test -race -count=1 -timeout=20m $(PKGS)
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
	$(GO) test -tags=stress -race -count=1 -timeout=45m ./tests/...

bench:
	$(GO) test -run=NONE -bench=. -benchmem $(PKGS)

fmt:
	gofmt -w $$(git ls-files '*.go')

vet:
	$(GO) vet $(PKGS)

quickstart:
	$(GO) run ./_examples/quickstart

# The quickstart must build and run to completion on memlog: no AWS, no network.
quickstart_check:
	$(GO) vet ./_examples/quickstart
	$(GO) run ./_examples/quickstart > /dev/null
