# Everything is driven from here. `make setup` is idempotent; every other target depends on it.
PY      := .venv/bin/python
STAMP   := .venv/.installed
SUDO    := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
ENGINE  ?= $(shell command -v stockfish || ls /usr/games/stockfish 2>/dev/null)
export PYTHONUNBUFFERED := 1

# JAX for an accelerator too: `make setup ACCEL=cuda` (CUDA 13 wheels, NVIDIA driver >= 580),
# ACCEL=cuda12 (driver >= 525) or ACCEL=tpu; cpu (the default) adds nothing.
ACCEL   ?= cpu
ACCEL_EXTRA := $(if $(filter cuda,$(ACCEL)),cuda13,$(ACCEL))
ifeq ($(filter $(ACCEL_EXTRA),cpu cuda12 cuda13 tpu),)
$(error ACCEL=$(ACCEL) is not one of: cpu cuda cuda12 cuda13 tpu)
endif
ACCEL_STAMP := $(if $(filter-out cpu,$(ACCEL_EXTRA)),.venv/.installed-$(ACCEL_EXTRA))

.PHONY: setup engine browser web test test-fast lint demo cpu-model annotate train puzzles bench \
	device-check search-report elo clean cpu-transformer FORCE

setup: $(STAMP) $(ACCEL_STAMP) engine browser

# pip's progress and its warnings (about the machine's pip settings as much as this project)
# go to .venv/pip.log, shown only when an install fails.
PIP_LOG    := .venv/pip.log
PIP_FAILED  = { tail -n 30 $(PIP_LOG); echo "pip install failed: the whole log is $(PIP_LOG)"; exit 1; }

# JAX 0.11 needs Python >= 3.12: tools/python_for_jax.sh finds one or fetches Debian's into
# .python/. A .venv on an older Python (or none) is made again. That fetched Python's ensurepip
# has no pip wheel, so pip comes from the one the script keeps in .python/wheels/.
VENV_STALE := $(shell $(PY) -c 'import sys; sys.exit(sys.version_info < (3, 12))' \
	>/dev/null 2>&1 || echo yes)

$(STAMP): pyproject.toml constraints.txt $(if $(VENV_STALE),FORCE)
	@if [ -n "$(VENV_STALE)" ]; then \
		python=$$(tools/python_for_jax.sh) || exit 1; \
		echo "Making .venv with $$python"; rm -rf .venv; \
		$$python -m venv .venv >/dev/null 2>&1 || { rm -rf .venv && \
			$$python -m venv --without-pip .venv && wheel=$$(ls .python/wheels/pip-*.whl) && \
			.venv/bin/python $$wheel/pip install -q --no-index $$wheel; } || exit 1; \
	fi
	@echo "Installing the Python packages into .venv (minutes the first time; log: $(PIP_LOG))"
	@$(PY) -m pip install --upgrade pip > $(PIP_LOG) 2>&1 || $(PIP_FAILED)
	@$(PY) -m pip install -c constraints.txt -e '.[dev]' >> $(PIP_LOG) 2>&1 || $(PIP_FAILED)
	@touch $(STAMP)

# The accelerator's JAX plugin and its CUDA (or TPU) libraries, then what JAX sees.
.venv/.installed-%: $(STAMP)
	@echo "Installing JAX for $* into .venv (log: $(PIP_LOG))"
	@$(PY) -m pip install -c constraints.txt -e '.[dev,$*]' >> $(PIP_LOG) 2>&1 || $(PIP_FAILED)
	$(PY) -m model.devices
	@touch $@

# Debian's stockfish lands in /usr/games, which is often not on PATH: look there too.
engine:
	@if ! command -v stockfish >/dev/null 2>&1 && [ ! -x /usr/games/stockfish ]; then \
		echo "No Stockfish found: installing Debian's package"; \
		$(SUDO) apt-get install -y -q stockfish >/dev/null 2>&1 || \
		{ $(SUDO) apt-get update -q >/dev/null && $(SUDO) apt-get install -y -q stockfish >/dev/null; }; \
	fi
	@$(PY) -m core.engine_path

# Debian's chromium and its driver, for the web board's test in a real browser
# (tests/eval/web); without them that test skips, saying so, and nothing else needs them.
BROWSER_FOUND = command -v chromedriver >/dev/null 2>&1 && { command -v chromium || \
	command -v chromium-browser || command -v google-chrome; } >/dev/null 2>&1
browser:
	@if ! { $(BROWSER_FOUND); }; then \
		echo "No chromium/chromedriver found: installing Debian's packages"; \
		$(SUDO) apt-get install -y -q chromium chromium-driver >/dev/null 2>&1 || \
		{ $(SUDO) apt-get update -q >/dev/null && \
		  $(SUDO) apt-get install -y -q chromium chromium-driver >/dev/null; } || \
		echo "Could not install chromium: the web board's browser test will skip"; \
	fi

test: setup
	$(PY) -m pytest -q tests

test-fast: setup
	$(PY) -m pytest -q -m "not slow" tests

lint: setup
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .

# The main job on the bundled sample (jobs/demo.py): annotate -> train -> metrics -> puzzles
# -> tournament; results/ gets JSON, the games' PGN and a plot. Re-running reuses finished steps.
demo: setup
	$(PY) -m jobs.demo $(DEMO_ARGS)

# The strongest model two cores make (jobs/cpu_model/recipe.py, ~70 min): self-play and Lichess games ->
# action values (evaluation positions excluded) -> gateau AV -> learning curve, evaluation,
# ablations in results/cpu-model/ -> models/cpu. Reruns reuse finished steps;
# CPU_MODEL_ARGS="--scale quick" is the couple-of-minutes version.
cpu-model: setup
	$(PY) -m jobs.cpu_model $(CPU_MODEL_ARGS)

# The same recipe with the square-token transformer (model/configs/cpu-transformer.toml) on the
# same data (data/cpu-model: made once, reused by either), 24,000 steps of 32 boards (the
# gateau's: 44.0% of the puzzles where 8,000 gave 42.5%, docs/cpu-model.md), shipped to
# models/cpu-transformer.
cpu-transformer: setup
	$(PY) -m jobs.cpu_model --config model/configs/cpu-transformer.toml --steps 24000 \
		--runs runs/cpu-transformer --results results/cpu-transformer \
		--models models/cpu-transformer $(CPU_MODEL_ARGS)

# PGN -> Stockfish action values -> Parquet (pipeline/annotate/annotate.py). Override any of
# INPUT (paths, globs, URLs), OUT, SPLIT, LIMIT (nodes=N | time=SECONDS), WORKERS (engines at
# once), ARGS (more flags, e.g. "--max-games 100 --num-shards 4"). An interrupted run resumes
# when rerun; a finished OUT/SPLIT is refused unless ARGS=--overwrite.
annotate: INPUT = data/sample/*.pgn.zst
annotate: OUT = data/annotated
annotate: SPLIT = train
annotate: LIMIT = nodes=2000
annotate: WORKERS = 2
annotate: setup
	$(PY) -m pipeline.annotate $(INPUT) --out $(OUT) --split $(SPLIT) --limit $(LIMIT) \
		--direct_num_workers=$(WORKERS) --direct_running_mode=multi_processing $(ARGS)

# Train (model/training/train.py): CONFIG, DATA (train shards), TEST (test shards; evaluation is
# skipped when absent), OUT (run dir: resumed when it holds checkpoints), ARGS ("--set k=v").
train: CONFIG = model/configs/small.toml
train: DATA = data/annotated/train
train: TEST = $(if $(filter %/train,$(DATA)),$(patsubst %/train,%/test,$(DATA)))
train: OUT = runs/small
train: setup
	$(PY) -m model.training.train --config $(CONFIG) --data $(DATA) \
		$(if $(wildcard $(TEST)),--test-data $(TEST),--test-data "") --out $(OUT) $(ARGS)

# Puzzle accuracy by rating. AGENT: one or more agent specs (`python -m eval.puzzles --help`),
# by default the model trained in runs/small if there is one, else Stockfish at 100k nodes.
AGENT   ?= $(if $(wildcard runs/small/checkpoints),neural:runs/small,stockfish:nodes=100000)
PUZZLES ?= data/sample/puzzles.csv
NUM     ?= 500
RESULTS ?= results
puzzles: setup
	$(PY) -m eval.puzzles $(foreach a,$(AGENT),--agent $(a)) --puzzles $(PUZZLES) --num $(NUM) \
		--out $(RESULTS)/puzzles.json --plot $(RESULTS)/puzzles.png

# The web board (eval/web): play the model and read its move values in a browser, at
# http://127.0.0.1:8000/ by default. WEB_ARGS: e.g. "--model models/cpu-av --port 8080".
web: setup
	$(PY) -m eval.web $(WEB_ARGS)

bench: setup
	$(PY) -m bench.tokenizer_speed
	$(PY) -m bench.graphs
	$(PY) -m bench.annotate_speed
	$(PY) -m bench.inference
	$(PY) -m bench.train_speed
	$(PY) -m bench.backbones
	$(PY) -m bench.chessbench_import
	$(PY) -m bench.dask_runner
	$(PY) -m bench.zstd_read
	$(PY) -m bench.uci
	$(PY) -m bench.uci_cold_start
	$(PY) -m bench.search
	$(PY) -m bench.web
	$(PY) -m bench.web_cold_start

# The device check (bench/device_check.py; ~7 min on one H100 or H200): the train step's
# examples/s and MFU against the reference on the same device, inference, a short training run
# with its puzzle accuracy, the model tests on the device. JSON in results/device/.
# ARGS=--dry-run runs every step on CPU at toy sizes.
device-check: setup
	$(PY) -m bench.device_check $(ARGS)

# What the tree search adds on one model (bench/search_report.py; ~20 min on 2 cores): JSON in results/search/.
MODEL   ?= models/cpu-av
search-report: setup
	$(PY) -m bench.search_report --model $(MODEL) --out $(RESULTS)/search $(ARGS)

# An absolute Elo (eval/elo/ladder.py): models/cpu searchless and searching, greedy and random,
# each against Stockfish UCI_Elo levels aimed where it scores half, until +-60 Elo or the time
# cap (25 minutes; ELO_ARGS="--max-minutes 60" for more). JSON, table, plot and games in
# $(RESULTS)/elo/: results/elo/ holds the committed measurement, so RESULTS=/tmp/mine keeps it.
# At a lower priority (ELO_NICE= for none): 25 minutes of both cores beside other work.
ELO_NICE ?= nice -n 5
elo: setup
	$(ELO_NICE) $(PY) -m eval.elo.ladder --out $(RESULTS)/elo $(ELO_ARGS)

FORCE:

clean:
	rm -rf .venv .pytest_cache .ruff_cache *.egg-info
