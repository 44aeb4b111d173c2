# Two commands do all set-up: `make test` and `make demo` create or reuse .venv and install
# what it lacks. On a machine without CUDA the CPU build of torch is installed first.
VENV ?= .venv
PY := $(VENV)/bin/python
# Override on machines whose default torch wheel is not the one you want.
TORCH_SPEC ?= torch==2.13.0
PYTEST_ARGS ?=

.PHONY: test demo install clean-cache paper

install: $(VENV)/.installed

$(VENV)/.installed: requirements.txt requirements-dev.txt requirements-gpu.txt
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi >/dev/null 2>&1; then \
		$(PY) -m pip install -q torch && $(PY) -m pip install -q -r requirements-gpu.txt; \
	else \
		$(PY) -c "import torch" 2>/dev/null || $(PY) -m pip install -q "$(TORCH_SPEC)"; \
	fi
	$(PY) -m pip install -q -r requirements.txt -r requirements-dev.txt
	touch $@

test: install
	$(PY) -m pytest -q $(PYTEST_ARGS) tests

demo: install
	$(PY) demo.py $(if $(FAST),--fast,)

clean-cache:
	rm -rf .cache

# The paper's tables from results/demo (needs Python only), then the PDFs (needs TeX).
paper: install
	$(MAKE) -C paper PY=$(abspath $(PY))

# Mutation testing of the core modules, each against its own fast tests (slow; not in `make test`).
# MUTANTS="grpo_loss stats" limits it to some; see the README's test section.
.PHONY: mutants
mutants: install
	$(PY) -c "import mutmut" 2>/dev/null || $(PY) -m pip install -q "mutmut>=3.8,<4"
	$(PY) tests/mutation/run_mutants.py $(MUTANTS)
