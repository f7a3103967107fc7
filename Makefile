# One entry point for newcomers and CI: each target builds its own virtualenv.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# The peer proxies `make bench` measures llamad beside (pyproject's bench-peers group) get a
# virtualenv of their own: their pins would change the test environment's packages.
PEERS ?= .venv-bench-peers
# instructor pins jiter and rich below what the test extra's openai needs, so its test
# (tests/gateway/instructor_row.py) runs in a virtualenv of its own (pyproject's group).
INSTRUCTOR := .venv-instructor

.PHONY: demo test test-fast lint docs bench bench-peers clean screenshots schema

$(BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[test]" --group dev --group docs
	touch $@

demo: $(BIN)/.installed
	$(BIN)/llamad --demo

lint: $(BIN)/.installed
	$(BIN)/ruff check llamad tests bench
	$(BIN)/ruff format --check llamad tests bench
	$(BIN)/mypy
	$(BIN)/lint-imports

$(INSTRUCTOR)/.installed: pyproject.toml
	$(PYTHON) -m venv $(INSTRUCTOR)
	$(INSTRUCTOR)/bin/python -m pip install --quiet --upgrade pip
	$(INSTRUCTOR)/bin/python -m pip install --quiet --group instructor
	touch $@

# The peers' virtualenv holds LiteLLM's proxy, which `llamactl export litellm`'s test runs.
test: lint $(INSTRUCTOR)/.installed $(PEERS)/.installed
	$(BIN)/pytest

# The in-process tests alone (no llama-server, no daemon, no subprocess): tests/fast_layer.py.
test-fast: $(BIN)/.installed
	LLAMAD_TESTS=fast $(BIN)/pytest -q -rfE

# The docs site, into site/: any warning (a broken link or anchor) fails the build.
docs: $(BIN)/.installed
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

# The config's JSON Schema for editors, from the pydantic models (a test keeps it current).
schema: $(BIN)/.installed
	$(BIN)/python -m llamad.config.json_schema > etc/llamad.schema.json

# The docs' pictures of the page and of `llamactl top`, taken by their tests from a real run.
screenshots: $(BIN)/.installed
	LLAMAD_SCREENSHOTS=docs $(BIN)/pytest -q tests/gateway/test_page.py tests/gateway/test_top.py

$(PEERS)/.installed: pyproject.toml
	$(PYTHON) -m venv $(PEERS)
	$(PEERS)/bin/python -m pip install --quiet --upgrade pip
	$(PEERS)/bin/python -m pip install --quiet --group bench-peers
	touch $@

bench-peers: $(PEERS)/.installed

# Without the peers (no PyPI, say) the bench still runs and says which rows it skipped.
# BASELINE=REF measures commit REF's llamad beside the checkout's, in the same run: its
# tree is installed once into .venv-bench-base-<sha12>/ (docs/benchmarks.md, old beside new).
BASELINE ?=
bench: $(BIN)/.installed
	-$(MAKE) --no-print-directory bench-peers
	$(BIN)/python -m bench $(if $(BASELINE),--baseline $(BASELINE))

clean:
	rm -rf $(VENV) $(PEERS) $(INSTRUCTOR) .venv-bench-base-* .mypy_cache .pytest_cache .ruff_cache site
