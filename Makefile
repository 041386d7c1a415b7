# The two commands a newcomer needs: `make run` and `make test`. Both create .venv on first use.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
export ENVSCHED_HOME ?= $(CURDIR)/var
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1

CHROMIUM := /usr/bin/chromium

.PHONY: run test lint ui mlflow-ui venv clean browser

$(BIN)/.installed: pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	# torch first, pinned to the CPU wheel: a bare `torch` would pull a multi-GB CUDA build.
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e '.[dev,ray,integrations,onnx,openvino]'
	# veRL without its dependencies (see the `integrations` extra in pyproject.toml for why).
	$(BIN)/pip install -q --no-deps 'verl==0.7.1'
	touch $@

venv: $(BIN)/.installed

# The browser test drives Debian's chromium through Playwright (never `playwright install`, which
# downloads a browser build): install the package when it is missing and we may (root).
browser:
	@test -x $(CHROMIUM) || { test "$$(id -u)" = 0 && \
		(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium); } || \
		echo "warning: $(CHROMIUM) missing and not root: install Debian's chromium for the browser test"

run: venv
	$(BIN)/envsched run

test: venv browser
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/python -m pytest -q

lint: venv
	$(BIN)/ruff check . && $(BIN)/ruff format --check .

ui: venv
	$(BIN)/envsched ui

mlflow-ui: venv
	$(BIN)/mlflow ui --backend-store-uri sqlite:///$(ENVSCHED_HOME)/mlflow/mlflow.db \
		--default-artifact-root $(ENVSCHED_HOME)/mlflow/artifacts -h 127.0.0.1 -p 5000

clean:
	rm -rf var
