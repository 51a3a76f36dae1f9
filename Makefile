# Two commands matter: `make demo` and `make test`. Both set up .venv first (idempotent).
.PHONY: setup demo test test-fast lint bench clean

VENV := .venv/bin

setup:
	@scripts/bootstrap.sh

demo: setup
	$(VENV)/rag doctor

# Fast suite first (no model loads), then the tests that load the real local models.
# pytest exits 5 when it collects nothing; make treats that as a failure.
test: setup
	$(VENV)/ruff check .
	$(VENV)/pytest -q
	$(VENV)/pytest -q -m slow

test-fast: setup
	$(VENV)/pytest -q

lint: setup
	$(VENV)/ruff check .
	$(VENV)/ruff format --check .

bench: setup
	$(VENV)/python bench/bench_models.py

clean:
	rm -rf .venv .rag .langgraph_api .pytest_cache .ruff_cache
