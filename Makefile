# Fjord: the two commands that matter are `make run` and `make test`.

GO ?= go
BIN := bin/fjord
# Fuzz budgets are execution counts, not durations: with a -fuzztime
# duration, Go 1.26's fuzz coordinator can fail a clean run with "context
# deadline exceeded" at the deadline (golang/go#75804, fixed in Go 1.27).
# Each count is about 10 s of fuzzing here; FuzzRecovery does file I/O
# and fsyncs per input, hence its small count.
FUZZ_FAST ?= 200000x
FUZZ_DISK ?= 1000x

.PHONY: run build test deps vet unit fuzz compat bench bench-json bench-compare bench-cluster bench-tier docker docker-test clean weed weed-bg

run:
	$(GO) run ./cmd/fjord

build:
	CGO_ENABLED=0 $(GO) build -trimpath -o $(BIN) ./cmd/fjord

# test runs everything CI runs: set-up, vet, unit tests (race), fuzz smoke,
# and the black-box compatibility suite against the real binary (with the
# upstream compose files of apache/kafka, Confluent and Bitnami in Docker).
# The tiered-storage tests run against SeaweedFS (bin/weed): weed-bg
# builds it in the background from the start (about 9 CPU-minutes cold),
# unit runs without it (those tests skip), and weed-test, after unit and
# fuzz, waits for the build and runs them.
test: weed-bg deps vet unit fuzz weed-test compat docker-test

# deps installs what the tests need on a fresh Debian machine.
deps:
	@if ! command -v nft >/dev/null 2>&1 || ! command -v iptables-nft >/dev/null 2>&1 || ! command -v ip >/dev/null 2>&1 || ! command -v kcat >/dev/null 2>&1 || ! command -v prometheus >/dev/null 2>&1 || ! command -v chromium >/dev/null 2>&1 || ! command -v keytool >/dev/null 2>&1 || ! /usr/bin/python3 -c 'import kafka' >/dev/null 2>&1 || ! /usr/bin/python3 -c 'import confluent_kafka' >/dev/null 2>&1; then \
		echo "installing kcat, prometheus, chromium, keytool (default-jre-headless), python3-kafka, python3-confluent-kafka, nftables, iptables and iproute2 (Debian packages)"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq kcat prometheus chromium default-jre-headless python3-kafka python3-confluent-kafka nftables iptables iproute2 >/dev/null; \
	fi

vet:
	$(GO) vet ./...
	cd compat-tests && $(GO) vet ./...
	cd cmd/fjord-bench && $(GO) vet ./...

# unit skips the tests that need SeaweedFS unless FJORD_WEED_BIN names a
# weed binary; weed-test runs them.
unit:
	$(GO) test -race -count=1 ./...
	cd cmd/fjord-bench && $(GO) test -count=1 ./...

fuzz:
	$(GO) test -run='^$$' -fuzz='^FuzzParseRequest$$' -fuzztime=$(FUZZ_FAST) ./protocol
	$(GO) test -run='^$$' -fuzz='^FuzzReadFrame$$' -fuzztime=$(FUZZ_FAST) ./protocol
	$(GO) test -run='^$$' -fuzz='^FuzzValidateBatch$$' -fuzztime=$(FUZZ_FAST) ./storage/recordbatch
	$(GO) test -run='^$$' -fuzz='^FuzzRecovery$$' -fuzztime=$(FUZZ_DISK) ./storage
	$(GO) test -run='^$$' -fuzz='^FuzzFilter$$' -fuzztime=$(FUZZ_FAST) ./broker/acl
	$(GO) test -run='^$$' -fuzz='^FuzzDecodeLogStart$$' -fuzztime=$(FUZZ_DISK) ./storage
	$(GO) test -run='^$$' -fuzz='^FuzzSealedIndex$$' -fuzztime=$(FUZZ_DISK) ./storage
	$(GO) test -run='^$$' -fuzz='^FuzzDecode$$' -fuzztime=$(FUZZ_FAST) ./controller
	$(GO) test -run='^$$' -fuzz='^FuzzParseJAAS$$' -fuzztime=$(FUZZ_FAST) ./broker/sasl
	$(GO) test -run='^$$' -fuzz='^FuzzParsePlain$$' -fuzztime=$(FUZZ_FAST) ./broker/sasl
	$(GO) test -run='^$$' -fuzz='^FuzzParseScramClientFirst$$' -fuzztime=$(FUZZ_FAST) ./broker/sasl
	$(GO) test -run='^$$' -fuzz='^FuzzParseScramClientFinal$$' -fuzztime=$(FUZZ_FAST) ./broker/sasl
	$(GO) test -run='^$$' -fuzz='^FuzzParseOAuthBearer$$' -fuzztime=$(FUZZ_FAST) ./broker/sasl
	$(GO) test -run='^$$' -fuzz='^FuzzOAuthBearerSigned$$' -fuzztime=100000x ./broker/sasl

compat: build weed
	cd compat-tests && FJORD_BIN=$(CURDIR)/$(BIN) FJORD_WEED_BIN=$(CURDIR)/$(WEED) FJORD_REQUIRE_WEED=1 FJORD_REQUIRE_KCAT=1 FJORD_REQUIRE_PROMETHEUS=1 FJORD_REQUIRE_CHROMIUM=1 FJORD_REQUIRE_KEYTOOL=1 FJORD_REQUIRE_KAFKA_PYTHON=1 FJORD_REQUIRE_CONFLUENT_KAFKA=1 FJORD_REQUIRE_DOCKER=1 $(GO) test -count=1 -timeout 30m ./...

# faults runs every fault-injection scenario of compat-tests at full length
# (kill, freeze and isolate leaders, lose two of three nodes under an acks=all
# workload, then check nothing acknowledged was lost), and the power-cut tests
# of broker/brokertest over 200 seeds each (every node's power at once, and
# one node's; about 20 s a seed), and the sick-disk tests of broker/brokertest
# (EIO, ENOSPC, a stalled fsync on one node: about a minute in all);
# `make compat` and `go test` run the short ones.
.PHONY: faults
faults: build
	cd compat-tests && FJORD_BIN=$(CURDIR)/$(BIN) FJORD_FAULTS=full $(GO) test -count=1 -timeout 20m -run TestFault -v ./...
	FJORD_POWERCUT_SEEDS=200 $(GO) test -count=1 -timeout 6h -run 'TestPowerCut' -v ./broker/brokertest
	$(GO) test -count=1 -timeout 10m -run 'TestSickDisk' -v ./broker/brokertest

# faults-net runs TestNetworkFaults at full length: five fjord nodes, each
# in its own network namespace on a bridge, under an acks=all workload and a
# transactional chain while nftables rules partition (minority, bridge,
# one-way), drop 30 % of, delay (NFQUEUE, 200 ± 100 ms) and flap their
# links, three rounds of every fault; it checks nothing acknowledged was
# lost, every committed transaction whole and no aborted one visible, and
# that every node serves within 2 s of each heal. Needs root (ip netns, nft,
# iptables-nft).
.PHONY: faults-net
faults-net: build
	cd compat-tests && FJORD_BIN=$(CURDIR)/$(BIN) FJORD_NETFAULTS=full FJORD_REQUIRE_NETNS=1 $(GO) test -count=1 -timeout 30m -run 'TestNetworkFaults$$|TestNetLab$$' -v .

# soak runs TestSoak for DURATION (default 1h): three fjord processes at
# RF 3 under 3,500 acks=all records/s and a consumer group, a fault every
# 2 minutes (kill -9, freeze, isolate, two nodes down, clean restart, topic
# churn), each node's memory, descriptors and goroutines sampled every 10 s
# into soak-results/soak.csv and soak.png; the histories are checked at the
# end and nothing may grow without bound.
DURATION ?= 1h
.PHONY: soak
soak: build
	mkdir -p soak-results
	cd compat-tests && FJORD_BIN=$(CURDIR)/$(BIN) FJORD_SOAK=$(DURATION) FJORD_SOAK_OUT=$(CURDIR)/soak-results $(GO) test -count=1 -timeout 24h -run 'TestSoak$$' -v .

# console-screenshots renders docs/console/*.png: the web console in
# headless Chromium, as TestConsoleInChromium sets it up.
.PHONY: console-screenshots
console-screenshots: build
	cd compat-tests && FJORD_BIN=$(CURDIR)/$(BIN) FJORD_REQUIRE_CHROMIUM=1 FJORD_CONSOLE_SCREENSHOTS=$(CURDIR)/docs/console $(GO) test -count=1 -run TestConsoleInChromium .

# bench measures every figure of the performance issue, fjord next to
# franz-go's kfake (run as a child process), as ratios against their
# targets, in one run of about 5-15 minutes (docs/benchmarks.md).
# BENCH_ARGS adds flags, e.g. BENCH_ARGS='-all-skip manyparts -repeat 3'.
BENCH_ARGS ?=
bench: build
	cd cmd/fjord-bench && $(GO) run . -all -fjord-bin $(CURDIR)/$(BIN) $(BENCH_ARGS)

# bench-json is bench that also writes bench-results/COMMIT.json, for
# comparing two commits with bench-compare. Not part of `make test` (nor CI):
# its figures depend on the machine and how busy it is.
BENCH_COMMIT = $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)$(shell git status --porcelain --untracked-files=no 2>/dev/null | grep -q . && echo -dirty)
bench-json: build
	mkdir -p bench-results
	cd cmd/fjord-bench && $(GO) run . -all -fjord-bin $(CURDIR)/$(BIN) -json-out $(CURDIR)/bench-results/$(BENCH_COMMIT).json $(BENCH_ARGS)

# bench-compare A=bench-results/abc.json B=bench-results/def.json prints
# the figure-by-figure change from A to B.
bench-compare:
	cd cmd/fjord-bench && $(GO) run . -compare $(abspath $(A)),$(abspath $(B))

# bench-cluster measures the metadata quorum of a three-process cluster.
bench-cluster: build
	cd cmd/fjord-bench && $(GO) run . -cluster -fjord-bin $(CURDIR)/$(BIN)

# bench-tier measures tiered storage (issue 29): one node with a weed mini
# as its store; produce with tiering on vs off, 1 GiB read back from the
# store, 5 GiB produced under local.retention.bytes (docs/benchmarks.md).
# Not part of bench: it writes 6 GiB. BENCH_ARGS adds flags, e.g.
# BENCH_ARGS='-tier-skip bound'.
bench-tier: build weed
	cd cmd/fjord-bench && $(GO) run . -tier -fjord-bin $(CURDIR)/$(BIN) -weed-bin $(CURDIR)/$(WEED) $(BENCH_ARGS)

docker: build
	docker build -f docker/Dockerfile -t fjord:dev .

# docker-test builds the image and checks docker/docker-compose.yml with kcat.
docker-test:
	bash docker/test.sh

# weed builds SeaweedFS's weed at the version pinned in build-weed.sh to
# bin/weed, for the tiered-storage tests (storage/remote/s3/weedtest): about
# 250 s cold on two cores, a link with a warm Go build cache, nothing while
# bin/weed is newer than the script.
WEED := bin/weed
WEED_BUILD := storage/remote/s3/weedtest/build-weed.sh
weed: $(WEED)
$(WEED): $(WEED_BUILD)
	bash $(WEED_BUILD) $@

# weed-test runs the tests against SeaweedFS, waiting for weed-bg's build
# (bin/weed.status) while it runs (bin/weed.pid), else building bin/weed
# first.
WEED_PKGS := ./storage/remote/s3/... ./broker/remotestore/...
.PHONY: weed-test
weed-test:
	@if [ ! -f bin/weed.status ] && [ -f bin/weed.pid ] && kill -0 $$(cat bin/weed.pid) 2>/dev/null; then \
		FJORD_WEED_WAIT=$(CURDIR)/bin/weed.status FJORD_WEED_BIN=$(CURDIR)/$(WEED) FJORD_REQUIRE_WEED=1 $(GO) test -race -count=1 -timeout 45m $(WEED_PKGS); \
	else \
		$(MAKE) --no-print-directory weed && FJORD_WEED_BIN=$(CURDIR)/$(WEED) FJORD_REQUIRE_WEED=1 $(GO) test -race -count=1 $(WEED_PKGS); \
	fi

# weed-bg runs `make weed` in the background and returns at once: its
# output goes to bin/weed.log and its exit status, when it ends, to
# bin/weed.status, which weedtest waits for (FJORD_WEED_WAIT).
weed-bg:
	@mkdir -p bin && rm -f bin/weed.status
	@( $(MAKE) --no-print-directory weed >bin/weed.log 2>&1; echo $$? >bin/weed.status ) & echo $$! >bin/weed.pid
	@echo "building bin/weed in the background (bin/weed.log)"

# docker-tiered-test starts docker/docker-compose.tiered.yml (three nodes
# with tiered storage, SeaweedFS beside them) and checks it; not part of
# `make test`.
.PHONY: docker-tiered-test
docker-tiered-test:
	bash docker/test-tiered.sh

clean:
	rm -rf bin
