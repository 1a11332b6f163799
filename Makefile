# Parley. `make run` and `make test` do all set-up on a fresh Debian 12 machine.
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
GO ?= go
# One build-tag set everywhere: SQLite from Debian's libsqlite3 (seconds to build, FTS5 included),
# and Fyne without animations (a focused text field's blinking cursor repainted the whole window
# a dozen times a second: 6.6 % of a core at rest, 1.3 % without; BenchmarkIdleCPU/focus).
TAGS ?= libsqlite3,no_animations
PY := /usr/bin/python3
export CGO_ENABLED := 1
export LANG ?= C.UTF-8
export PARLEY_TAGS := $(TAGS)
GOTEST_FLAGS ?= -count=1 -timeout 20m

.PHONY: all setup build run test test-go test-py vet bench bench-go bench-py load demo-asr test-models package test-package clean demo-tts clone-eval

all: build

setup:
	build/setup.sh all

build:
	build/setup.sh build

# The app: the desktop window when a display is available, else the headless server.
run: setup
	bin/parley

test: setup vet test-go test-py test-package

vet:
	@bad=$$(gofmt -l $$(git ls-files '*.go') 2>/dev/null); if [ -n "$$bad" ]; then echo "gofmt needed: $$bad"; exit 1; fi
	$(GO) vet -tags $(TAGS) ./...

# Packages that play and record through a private PulseAudio server run one at a time after
# the rest: a sound server starved by two parallel test binaries skips or repeats audio, which
# is the machine's doing, not Parley's.
REALTIME_PKGS := ./audio/device ./app/wire ./app/gui
test-go:
	$(GO) test -tags $(TAGS) $(GOTEST_FLAGS) $$($(GO) list ./... | grep -v -x -e '.*/audio/device' -e '.*/app/wire' -e '.*/app/gui')
	$(GO) test -tags $(TAGS) $(GOTEST_FLAGS) -p 1 $(REALTIME_PKGS)

test-py:
	$(PY) -m unittest discover -s train/tests -t .

# Benchmarks report ratios against baselines measured in the same run.
bench: setup bench-go bench-py load

# The official-size random ChatTTS export tts/chattts's benchmarks run on (~1.1 GB, made once).
CHATTTS_BENCH ?= /tmp/parley-chattts-official
CHATTTS_JOINS ?= /tmp/parley-chattts-joins
bench-go: $(CHATTTS_BENCH)/config.json $(CHATTTS_BENCH)/gpt.int8.onnx $(CHATTTS_JOINS)/decoder.onnx
	PARLEY_CHATTTS_OFFICIAL=$(CHATTTS_BENCH) PARLEY_CHATTTS_JOINS=$(CHATTTS_JOINS) \
		$(GO) test -tags $(TAGS) -run '^$$' -bench . -timeout 60m ./...

$(CHATTTS_BENCH)/config.json:
	$(MAKE) -C train chattts-official CHATTTS_OUT=$(CHATTTS_BENCH)

# an export made before --int8 gets its int8 GPT added
$(CHATTTS_BENCH)/gpt.int8.onnx: $(CHATTTS_BENCH)/config.json
	cd $(CURDIR) && $(PY) -m train.chattts.quantize $(CHATTTS_BENCH)

$(CHATTTS_JOINS)/decoder.onnx: $(CHATTTS_BENCH)/config.json
	$(PY) train/tts/chattts_joins_model.py --src $(CHATTTS_BENCH) --out $(CHATTTS_JOINS)

bench-py:
	$(MAKE) -C train bench

# The server's load-and-abuse test at full scale (make test runs it reduced): 12 × 60 MB
# uploads, 32 realtime sessions × 300 s, 64 Wyoming connections × 300 s, with RSS figures.
load:
	PARLEY_LOAD=full $(GO) test -tags $(TAGS) -count=1 -timeout 30m -run '^TestAbuse$$' -v ./app/serve

# Models the project makes itself (see train/README.md): the tiny test models and the
# embedded demo recogniser (about an hour on 2 cores).
test-models:
	$(MAKE) -C train test-models

demo-asr:
	$(MAKE) -C train demo-asr

# The embedded demo voice (assets/demo/chattts; about two hours on 2 free cores).
demo-tts: build
	$(MAKE) -C train demo-tts

# Issue 19's measurement of the voice-clone wizard, through the real CLI verbs in a private
# Parley home under CLONE_EVAL_OUT: an espeak-ng speaker no model has heard reads ~3.5 minutes;
# import, slice, label, proofread, finetune train + install, voices clone (3 s), finetune
# evaluate (speaker similarity and CER: random seed vs zero-shot clone vs fine-tune) and
# finetune asr (held-out CER before/after), each step timed; results.md/results.json there.
# CLONE_EVAL_MODEL= takes the installed or embedded ChatTTS voice (the demo voice);
# CLONE_EVAL_TEXT=prompts reads the wizard's own sentences instead of the demo models' domain.
CLONE_EVAL_OUT ?= /tmp/parley-clone-eval
CLONE_EVAL_MODEL ?=
CLONE_EVAL_TEXT ?= demo
CLONE_EVAL_ARGS ?=
clone-eval: setup
	$(PY) -m train.clone_eval --parley bin/parley --out $(CLONE_EVAL_OUT) --text $(CLONE_EVAL_TEXT) \
		$(if $(CLONE_EVAL_MODEL),--model $(CLONE_EVAL_MODEL)) $(CLONE_EVAL_ARGS)

# The desktop app as a Debian package and a tarball (dist/): binary, private ONNX Runtime,
# desktop entry, icon, man page, licences; Depends: derived from what the binary links.
package: setup
	build/package.sh

# Install the .deb into a fresh Debian 12 root (debootstrap) and use it there, first run
# included (needs root, the Debian archive and the npm registry; see build/test-package.sh).
# Part of `make test`: about 1.5 min to build the .deb and 1 min to test it on 2 busy cores.
test-package: setup
	build/package.sh deb
	build/test-package.sh

clean:
	rm -rf bin dist
