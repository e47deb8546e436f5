# Everything is driven from here. `make setup` is idempotent; every other target depends on it.
PY      := .venv/bin/python
STAMP   := .venv/.installed
SUDO    := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
ENGINE  ?= $(shell command -v stockfish || ls /usr/games/stockfish 2>/dev/null)
export PYTHONUNBUFFERED := 1

.PHONY: setup engine test test-fast lint demo annotate train puzzles bench clean

setup: $(STAMP) engine

$(STAMP): pyproject.toml constraints.txt
	@[ -x $(PY) ] || python3 -m venv .venv
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -c constraints.txt -e '.[dev]'
	@touch $(STAMP)

# Debian's stockfish lands in /usr/games, which is often not on PATH: look there too.
engine:
	@if ! command -v stockfish >/dev/null 2>&1 && [ ! -x /usr/games/stockfish ]; then \
		echo "No Stockfish found: installing Debian's package"; \
		$(SUDO) apt-get install -y -q stockfish >/dev/null 2>&1 || \
		{ $(SUDO) apt-get update -q >/dev/null && $(SUDO) apt-get install -y -q stockfish >/dev/null; }; \
	fi
	@$(PY) -m pipeline.engine_path

test: setup
	$(PY) -m pytest -q tests

test-fast: setup
	$(PY) -m pytest -q -m "not slow" tests

lint: setup
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .

demo: setup
	@echo "make demo: not yet available (issue 6)"; exit 1

annotate: setup
	@echo "make annotate: not yet available (issue 3)"; exit 1

train: setup
	@echo "make train: not yet available (issue 4)"; exit 1

puzzles: setup
	@echo "make puzzles: not yet available (issue 5)"; exit 1

bench: setup
	$(PY) -m bench.tokenize

clean:
	rm -rf .venv .pytest_cache .ruff_cache *.egg-info
