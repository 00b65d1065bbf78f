##@ Reliability

# The fast variants of the fault tests (test/e2e/chaos/...) and the security
# tests (test/e2e/security) run in `make test` with everything else. The
# targets below run the long variants and the long fuzz runs whose figures go
# into docs/reliability.md.

# Each long package takes 10-20 minutes on two loaded cores.
CHAOS_TIMEOUT ?= 90m
# Every child process's output, kept after the run (the sandboxes' own logs
# go with them).
CHAOS_LOGS ?= $(LOCALBIN)/chaos-logs
# KUBEFLEDGED_CHAOS_SEED=<n> replays the kill points of an earlier run.

# `make fuzz-long` runs every target of FUZZ_TARGETS (Makefile) for FUZZTIME_LONG.
FUZZTIME_LONG ?= 10m

.PHONY: test-chaos
test-chaos: tools ## Long fault-injection runs (more kills, caches, restarts); child logs in bin/chaos-logs.
	rm -rf $(CHAOS_LOGS) && mkdir -p $(CHAOS_LOGS)
	KUBEFLEDGED_CHAOS_LONG=1 KUBEFLEDGED_CHAOS_LOGS=$(CHAOS_LOGS) \
		go test -count=1 -v -p 1 -timeout $(CHAOS_TIMEOUT) ./test/e2e/chaos/... ./test/e2e/security/... \
		> $(LOCALBIN)/test-chaos.log 2>&1; rc=$$?; \
		grep -E '^(--- |ok |FAIL|PASS)|FIGURES|KNOWN DEFECT|GAP|seed ' $(LOCALBIN)/test-chaos.log; exit $$rc

# LOADED_RUNS runs of `make test`, in a fresh clone of HEAD, while hack/cpuhog
# keeps every core busy: waits that a quiet machine hides lose their races here.
LOADED_RUNS ?= 5

.PHONY: test-loaded
test-loaded: ## `make test` LOADED_RUNS times in a fresh clone of HEAD beside a CPU hog (hack/loaded-test.sh).
	hack/loaded-test.sh $(LOADED_RUNS)

.PHONY: fuzz-long
fuzz-long: ## Every fuzz target for FUZZTIME_LONG each; prints the execution counts for docs/reliability.md.
	@for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; name=$${t#*:}; \
		out=$$(go test -run '^$$' -fuzz "^$$name\$$" -fuzztime $(FUZZTIME_LONG) $$pkg 2>&1) || { echo "$$out"; exit 1; }; \
		echo "$$name ($$pkg): $$(echo "$$out" | grep -o 'execs: [0-9]*' | tail -1)"; \
	done
