# Spindle. `make demo` shows it working; `make test` runs every suite.
SHELL := /bin/bash
export PATH := $(PATH):/usr/local/go/bin
GO ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo 0.1.0-dev)
LDFLAGS := -s -w -X github.com/spindle-rpc/spindle/version.Version=$(VERSION)
AGENT_PLATFORMS ?= linux/amd64 linux/arm64
HOST_PLATFORM := $(shell $(GO) env GOOS)/$(shell $(GO) env GOARCH)
AGENTS_DIR := bootstrap/agents
FUZZTIME ?= 60s
# Fuzzing must never be allowed to eat the machine: msgpack decoders that
# trust lengths are exactly what the fuzzers look for.
FUZZ_MEMLIMIT ?= 1GiB

.PHONY: all build agents test test-deps unit bench demo fuzz lint clean

all: build

# Agents first: the controller embeds them (compressed) for every platform
# it can reach, plus its own: gzip -9 for every target, and zstd -19 (when
# zstd is here) for targets that have zstd, each with a .sum (sha256 and size of the
# uncompressed binary) so that a connection's first stage can name every
# agent's hash without inflating any of them.
agents:
	@mkdir -p $(AGENTS_DIR)
	@for p in $(sort $(AGENT_PLATFORMS) $(HOST_PLATFORM)); do \
		os=$${p%/*}; arch=$${p#*/}; \
		echo "agent $$os/$$arch"; \
		CGO_ENABLED=0 GOOS=$$os GOARCH=$$arch $(GO) build -trimpath -ldflags '$(LDFLAGS)' \
			-o $(AGENTS_DIR)/spindle-agent-$$os-$$arch ./cmd/spindle-agent || exit 1; \
		f=$(AGENTS_DIR)/spindle-agent-$$os-$$arch; \
		echo "$$(sha256sum < $$f | cut -d' ' -f1) $$(wc -c < $$f)" > $$f.sum || exit 1; \
		if command -v zstd >/dev/null; then zstd -19 -q -f $$f -o $$f.zst || exit 1; \
		else rm -f $$f.zst; echo "  no zstd here: $$os/$$arch embedded as gzip only (targets with zstd unpack it 30 ms faster)"; fi; \
		gzip -9 -n -f $$f || exit 1; \
	done

build: agents
	@mkdir -p bin
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o bin/spindle ./cmd/spindle
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o bin/spindle-agent ./cmd/spindle-agent

# Everything the suites need on a fresh Debian machine (root): installed
# through apt, or a loud message saying what will be skipped.
test-deps:
	@scripts/test-deps.sh

# gofmt: every Go file but one of upstream x/crypto's, kept as upstream
# wrote it (third_party/xcrypto/README.spindle.md).
lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	cd third_party/yamux && $(GO) vet .
	cd third_party/xcrypto && $(GO) vet ./...

# third_party/yamux and third_party/xcrypto are modules of their own
# (patched copies, see their README.spindle.md): ./... does not reach them.
# They carry upstream's own tests, from the module cache at the copies'
# versions, beside the project's; each test skipped here by name is listed,
# with why, in the copy's README.spindle.md.
#
# yamux: upstream's suite runs without the race detector: its sessions
# send keepalives every 100 ms with a 250 ms write timeout, which a busy
# 2-core machine under -race misses (unmodified upstream fails there the
# same way); -short drops its two multi-gigabyte transfers (upstream's
# own switch for them), and TestHalfCloseSessionShutdown fails about one
# run in four upstream (a reset in its shutdown race). The project's
# own tests (recvqueue_test.go, flood_spindle_test.go) run under -race.
YAMUX_SKIP := ^TestHalfCloseSessionShutdown$$
# xcrypto: ssh/test's recorded sessions compare every byte with a
# recording made with upstream's 2 MiB channel window, and the copy's is
# 4 MiB (they pass with upstream's window). Four private-key tests spend
# minutes in bcrypt under -race (code the copy does not change): they run
# without it. TestSSHCLIControlClientConn races in upstream's test server
# (server_test.go closes the channel in a goroutine before it replies to
# "exec"; on a loaded machine the close wins and the client reads EOF).
XCRYPTO_RACY := ^TestSSHCLIControlClientConn$$
XCRYPTO_RECORDINGS := ^(TestRunCommandSuccess|TestRunCommandStdin|TestRunCommandStdinError|TestRunCommandFailed|TestWindowChange|TestServerKeyExchanges|TestServerCiphers|TestServerMACs)$$
XCRYPTO_SLOW := ^(TestParseEncryptedPrivateKeysWithPassphrase|TestParseEncryptedPrivateKeysWithUnsupportedCiphers|TestParseEncryptedPrivateKeysWithIncorrectPassphrase|TestMarshalPrivateKeyWithPassphrase)$$
# -timeout bounds one package: integration/ansible (three ansible-core
# versions, each playbook with ssh, spindle and the runner off) takes
# about 12 minutes on the slow kind of CI instance (BENCHMARKS.md).
unit: build lint
	SPINDLE_AGENT=$(CURDIR)/bin/spindle-agent $(GO) test -race -count=1 -timeout 20m ./...
	cd third_party/yamux && $(GO) test -count=1 -short -skip '$(YAMUX_SKIP)' .
	cd third_party/yamux && $(GO) test -race -count=1 -run '^(TestRecvQueue|TestSpindle)' .
	cd third_party/xcrypto && $(GO) test -race -count=1 -skip '$(XCRYPTO_RECORDINGS)|$(XCRYPTO_SLOW)|$(XCRYPTO_RACY)' ./...
	cd third_party/xcrypto && $(GO) test -count=1 -run '$(XCRYPTO_SLOW)' ./ssh
	/usr/bin/python3 -W error::ResourceWarning -m unittest discover -s ansible/plugin -p 'test_*.py'
	/usr/bin/python3 -W error::ResourceWarning -m unittest discover -s internal/pyrunner -p 'test_*.py'

test: test-deps unit

# The benchmark harness is a binary of its own (users of bin/spindle never
# need it: it makes throwaway users and sudoers entries). Its ssh group
# needs --ssh-target TARGET, or root and /usr/sbin/sshd (it then starts a
# throwaway sshd of its own on 127.0.0.1); its cli_* rows run bin/spindle.
bench: build
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o bin/spindle-bench ./cmd/spindle-bench
	bin/spindle-bench $(BENCHFLAGS)

demo: build
	@CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o bin/spindle-demo ./cmd/spindle-demo
	@CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o bin/spindle-bench ./cmd/spindle-bench
	@echo "== spindle info local"; bin/spindle info local
	@echo "== spindle run local -- uname -a"; bin/spindle run local -- uname -a
	@echo "== spindle ping -c 5 local"; bin/spindle ping -c 5 local
	@echo "== over SSH (a throwaway SSH server embedded in Go; no sshd needed)"; bin/spindle-demo
	@echo "== spindle-bench core"; bin/spindle-bench --rounds 3 core

# An input of FuzzChildFrames runs a link and two collections (a few ms):
# minimizing a new one for go test's default 60 s would take the whole run.
fuzz:
	GOMEMLIMIT=$(FUZZ_MEMLIMIT) GO=$(GO) sh scripts/fuzz-one.sh ./router FuzzReadFrame $(FUZZTIME)
	GOMEMLIMIT=$(FUZZ_MEMLIMIT) GO=$(GO) sh scripts/fuzz-one.sh ./router FuzzMessageUnmarshal $(FUZZTIME)
	GOMEMLIMIT=$(FUZZ_MEMLIMIT) GO=$(GO) sh scripts/fuzz-one.sh ./router FuzzChildFrames $(FUZZTIME) -fuzzminimizetime 200x
	GOMEMLIMIT=$(FUZZ_MEMLIMIT) GO=$(GO) sh scripts/fuzz-one.sh ./internal/wire FuzzValidate $(FUZZTIME)
	GOMEMLIMIT=$(FUZZ_MEMLIMIT) GO=$(GO) sh scripts/fuzz-one.sh ./internal/wire FuzzUnmarshal $(FUZZTIME)
	GOMEMLIMIT=$(FUZZ_MEMLIMIT) GO=$(GO) sh scripts/fuzz-one.sh ./connectors FuzzAgentLender $(FUZZTIME)
	GOMEMLIMIT=$(FUZZ_MEMLIMIT) GO=$(GO) sh scripts/fuzz-one.sh ./bootstrap FuzzReadHello $(FUZZTIME)
	GOMEMLIMIT=$(FUZZ_MEMLIMIT) GO=$(GO) sh scripts/fuzz-one.sh ./services/exec FuzzOutputFrames $(FUZZTIME)
	GOMEMLIMIT=$(FUZZ_MEMLIMIT) GO=$(GO) sh scripts/fuzz-one.sh ./services/exec FuzzStdinPart $(FUZZTIME)
	GOMEMLIMIT=$(FUZZ_MEMLIMIT) GO=$(GO) sh scripts/fuzz-one.sh ./services/fs FuzzWalkStream $(FUZZTIME)
	GOMEMLIMIT=$(FUZZ_MEMLIMIT) GO=$(GO) sh scripts/fuzz-one.sh ./services/agentfwd FuzzForwardedRequests $(FUZZTIME)
	GOMEMLIMIT=$(FUZZ_MEMLIMIT) GO=$(GO) sh scripts/fuzz-one.sh ./internal/cli FuzzSOCKS $(FUZZTIME)
	GOMEMLIMIT=$(FUZZ_MEMLIMIT) GO=$(GO) sh scripts/fuzz-one.sh ./services/tunnel FuzzHeader $(FUZZTIME)
	GOMEMLIMIT=$(FUZZ_MEMLIMIT) GO=$(GO) sh scripts/fuzz-one.sh ./daemon/proto FuzzReadMsg $(FUZZTIME)
	GOMEMLIMIT=$(FUZZ_MEMLIMIT) GO=$(GO) sh scripts/fuzz-one.sh ./ansible/wire FuzzReadRequest $(FUZZTIME)
	GOMEMLIMIT=$(FUZZ_MEMLIMIT) GO=$(GO) sh scripts/fuzz-one.sh ./ansible/wire FuzzReadResponse $(FUZZTIME)
	GOMEMLIMIT=$(FUZZ_MEMLIMIT) GO=$(GO) sh scripts/fuzz-one.sh ./ansible FuzzDecodeHost $(FUZZTIME)
	GOMEMLIMIT=$(FUZZ_MEMLIMIT) GO=$(GO) sh scripts/fuzz-one.sh ./internal/pyrunner FuzzFamily $(FUZZTIME)

clean:
	rm -rf bin $(AGENTS_DIR)/spindle-agent-*
