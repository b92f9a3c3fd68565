# The two commands of the README: `make demo` and `make test`. Each creates .venv and
# installs what it needs first, so they work on a fresh machine with Python 3.11.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint bench install browser fuzz fuzz-tools clean labs

# The C extensions are built by the install: a changed source installs (builds) again.
$(STAMP): pyproject.toml setup.py $(wildcard collectors/*.c)
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	# The SQS lab's instrumentation: its newest release (0.66b1) pins
	# opentelemetry-instrumentation==0.66b1 exactly, one beta behind the 0.66b2 the others
	# need, which no resolver accepts; its code runs unchanged on 0.66b2.
	$(BIN)/pip install --quiet --no-deps opentelemetry-instrumentation-boto3sqs==0.66b1
	touch $(STAMP)

install: $(STAMP)

# Debian's Chromium for the browser tests (never a downloaded browser build).
browser:
	@command -v chromium >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -qq && apt-get install -y -qq chromium >/dev/null; \
	  else echo "chromium missing: sudo apt-get install chromium (browser tests will be skipped)"; fi; }

# Debian's Sidekiq for the Sidekiq lab (tests/test_sidekiq_lab.py skips without it).
.PHONY: sidekiq
sidekiq:
	@command -v sidekiq >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -qq && apt-get install -y -qq ruby-sidekiq >/dev/null; \
	  else echo "ruby-sidekiq missing: sudo apt-get install ruby-sidekiq (the Sidekiq lab will be skipped)"; fi; }

# The fuzz job (docs/fuzzing.md): Debian's clang for the sanitizer builds of the C
# extensions, atheris (libFuzzer for Python) in the venv. FUZZ_SECONDS bounds the run.
FUZZ_SECONDS ?= 120
ATHERIS := atheris==3.0.0
FUZZ_STAMP := $(VENV)/.fuzz-installed

fuzz-tools:
	@command -v clang >/dev/null 2>&1 || command -v clang-14 >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -qq && \
	    apt-get install -y -qq clang libclang-rt-14-dev >/dev/null; \
	  else echo "clang missing: sudo apt-get install clang libclang-rt-14-dev"; exit 1; fi; }

$(FUZZ_STAMP): $(STAMP)
	$(BIN)/pip install --quiet $(ATHERIS)
	touch $(FUZZ_STAMP)

fuzz: $(FUZZ_STAMP) fuzz-tools
	$(BIN)/python fuzz/build.py
	$(BIN)/python fuzz/seeds.py
	fuzz/run.sh $(FUZZ_SECONDS)

# The BullMQ lab's Node packages (tests/bullmq_lab, pinned by its package-lock.json); the
# lab's tests are skipped with a message where npm is missing.
.PHONY: bullmq-lab
bullmq-lab:
	@if command -v npm >/dev/null 2>&1; then \
	  cd tests/bullmq_lab && npm ci --no-audit --no-fund --loglevel=error; \
	else echo "npm missing: apt-get install npm (the BullMQ lab tests will be skipped)"; fi

demo: $(STAMP)
	$(BIN)/dupescope demo

# Three pytest workers, a test file each at a time: many tests wait on real brokers, workers
# and collector processes, so three keep 2 cores busier than two do.
test: $(STAMP) browser sidekiq bullmq-lab labs
	$(BIN)/ruff check .
	$(BIN)/mypy --strict store derive queries
	$(BIN)/pytest -q -n 3 --dist loadfile --ignore=tests/test_collect_footprint.py
	# Alone: it bounds a collector's peak memory, which a busy second core pushes up.
	$(BIN)/pytest -q tests/test_collect_footprint.py

# The arq lab's workers (tests/test_arq_lab.py): arq 0.28 needs redis<6, which dupescope's
# own redis client (8.x) is not, so its workers and producer run from a venv of their own.
ARQ_LAB := $(VENV)/labs/arq
$(ARQ_LAB)/.installed:
	$(PY) -m venv $(ARQ_LAB)
	$(ARQ_LAB)/bin/pip install --quiet arq==0.28.0
	touch $(ARQ_LAB)/.installed

# RQ 2.0's workers (tests/test_rq_lab.py runs its lab on them too): their log lines and
# Redis state differ from RQ 3's.
RQ2_LAB := $(VENV)/labs/rq2
$(RQ2_LAB)/.installed:
	$(PY) -m venv $(RQ2_LAB)
	$(RQ2_LAB)/bin/pip install --quiet rq==2.0.0
	touch $(RQ2_LAB)/.installed

labs: $(ARQ_LAB)/.installed $(RQ2_LAB)/.installed

bench: $(STAMP)
	$(BIN)/python -m benchmarks

clean:
	rm -rf $(VENV) dupescope-data fuzz/build
