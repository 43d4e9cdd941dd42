# kvmlab: the two commands a user runs (see README.md).
#   make demo   installs what is missing, then runs the main job on labs/nested.toml
#   make test   installs what is missing, then runs the whole test suite
# Both are idempotent: a second run installs and downloads nothing.

SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
APT_PACKAGES := $(shell cat deps/apt.txt | grep -v '^\#')
APT_STAMP := $(VENV)/.apt-$(shell cat deps/apt.txt deps/deb-src.sh | md5sum | cut -c1-12)
PIP_STAMP := $(VENV)/.pip-$(shell cat pyproject.toml deps/constraints.txt | md5sum | cut -c1-12)

.PHONY: qemu10 demo test deps lint docs golden clean

demo: deps
	$(BIN)/kvmlab doctor || true
	$(BIN)/kvmlab run nested --suite quick --out kvmlab-report.html

# Unit tests on both CPUs (pytest-xdist), then the functional tests in two lanes: the main
# one, one test at a time, and beside it the side lane (tests/conftest.py SIDE_LANE): light
# tests, one small guest at a time, that touch nothing the main lane's tests compare or
# measure. A booting test keeps this 2-core host about half busy. The guest images both
# lanes boot are built first; the side lane's output follows the main lane's.
test: deps
	@$(BIN)/pytest -q -n 2 -m "not functional" --durations=10; unit=$$?; \
	$(BIN)/python -m tests.images; images=$$?; \
	side_log=$$(mktemp /tmp/kvmlab-side-lane.XXXXXX); \
	$(BIN)/pytest -q -p no:cacheprovider -m "functional and side" --durations=10 \
	    >"$$side_log" 2>&1 & side_pid=$$!; \
	$(BIN)/pytest -q -m "functional and not side" --durations=30; functional=$$?; \
	wait $$side_pid; side=$$?; \
	echo "---- side lane (tests/conftest.py SIDE_LANE), run beside the main lane ----"; \
	cat "$$side_log"; rm -f "$$side_log"; \
	echo "make test: unit tests exit $$unit, images $$images, functional tests exit" \
	    "$$functional (main lane), $$side (side lane)"; \
	[ $$unit -eq 0 ] && [ $$images -eq 0 ] && [ $$functional -eq 0 ] && [ $$side -eq 0 ]

lint: deps
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/ruff format --check src tests benchmarks
	$(BIN)/mypy

docs: deps
	$(BIN)/kvmlab check --explain -o md > docs/lab-reference.md
	$(BIN)/python -m kvmlab.runtime.waits > docs/timeouts.md

# After an intended rendering change: rewrite tests/golden (tests never write it), then review the diff.
golden: deps
	$(BIN)/python -m tests.render.golden

# The manual pages (man kvmlab-migrate) and bash completion, from the help text: written
# again at every set-up, so they follow the code.
MAN_DIR ?= /usr/local/share/man/man1
COMPLETION ?= /etc/bash_completion.d/kvmlab

deps: $(APT_STAMP) $(PIP_STAMP)
	@$(BIN)/python -m kvmlab.cli.manpages $(MAN_DIR) >/dev/null
	@mkdir -p $(dir $(COMPLETION)) && _KVMLAB_COMPLETE=source_bash $(BIN)/kvmlab >$(COMPLETION)

# QEMU 10.0 from bookworm-backports, unpacked under /opt/kvmlab-qemu10 beside Debian's 7.2
# (never installed over it): labs/migrate.toml's variant qemu10, as in
# kvmlab migrate --lab labs/migrate.toml --variant qemu10 (the README's strategy table).
qemu10:
	bash deps/qemu10.sh

$(APT_STAMP):
	@missing=$$(for p in $(APT_PACKAGES); do dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q '^install ok installed' || echo $$p; done); \
	added=$$(sh deps/deb-src.sh); \
	if [ -n "$$missing" ] || [ -n "$$added" ] || ! ls /var/lib/apt/lists/*_Packages* >/dev/null 2>&1 \
	    || ! ls /var/lib/apt/lists/*_Sources* >/dev/null 2>&1; then \
	  echo "installing Debian packages:" $$missing; \
	  apt-get -o DPkg::Lock::Timeout=600 update -q && \
	  DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -q --no-install-recommends $$missing; \
	fi
	@mkdir -p $(VENV) && rm -f $(VENV)/.apt-* && touch $@

$(PIP_STAMP): $(APT_STAMP)
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --disable-pip-version-check -c deps/constraints.txt -e '.[dev]'
	@rm -f $(VENV)/.pip-* && touch $@

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache
