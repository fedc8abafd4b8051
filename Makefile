# The two commands a newcomer needs: `make demo` and `make test`.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: test lint calendar demo bench clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[test]'
	touch $(STAMP)

lint: $(STAMP)
	$(BIN)/ruff check placet tests bench examples
	$(BIN)/ruff format --check placet tests bench examples
	$(BIN)/mypy placet
	$(BIN)/lint-imports

# pytest exits 5 when it collected no test: that is a failure here, never a pass.
# Two workers (pytest-xdist), a file's tests in one: most tests wait on rclone, placet
# and browser children, so two at a time take ~11 of ~20 minutes on 2 cores
# (docs/decisions/0032-test-suite.md).
WORKERS ?= 2
test: lint
	$(BIN)/pytest -n $(WORKERS) --dist loadfile; rc=$$?; if [ $$rc -eq 5 ]; then echo 'pytest collected no tests' >&2; exit 1; fi; exit $$rc
	$(MAKE) --no-print-directory calendar

# The calendar guard (docs/decisions/0032-test-suite.md): the tests that check time
# in-process run again with the clock 5 years ahead. Left out: tests marked `transfers`
# and the files that run rclone or compare the kernel's file times with the clock (drive,
# executor, indexer, sync service/selection/names, MCP and CLI subprocesses with a rebuilt
# environment), since faketime reaches none of those. Every test under tests/store and
# tests/tui belongs here, and so does a new file there. The PostgreSQL runs of these tests
# are left out too: the server keeps the real clock anyway, placet never asks it the time
# (every timestamp is the caller's `now`), and the code under test is the same on both
# backends; they ran once in `make test`.
CALENDAR_TESTS := tests/project/test_calendar_guard.py tests/store tests/tui \
	tests/cli/test_proposals.py tests/sync/test_caps.py tests/sync/test_fingerprint.py \
	tests/sync/test_digest_caches.py tests/notify/test_outbox.py tests/notify/test_content.py \
	tests/executor/test_host_loop.py::test_the_handoff_counts_on_the_injected_clock
calendar: $(STAMP)
	@if ! command -v faketime >/dev/null; then \
		if [ -n "$$CI" ]; then echo 'faketime is missing (apt-get install faketime)' >&2; exit 1; fi; \
		echo 'warning: faketime is not installed; the calendar guard is skipped' >&2; exit 0; fi; \
	PLACET_CALENDAR_GUARD=1 faketime -f '+5y' $(BIN)/pytest -q -p no:cacheprovider \
		-m 'not transfers' -k 'not postgresql' $(CALENDAR_TESTS)

demo: $(STAMP)
	$(BIN)/python examples/demo.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
