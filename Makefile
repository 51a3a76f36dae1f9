# Two commands matter: `make demo` and `make test`. Both set up .venv first (idempotent).
.PHONY: setup demo test test-fast lint bench clean clean-native

VENV := .venv/bin

setup:
	@scripts/bootstrap.sh

# The main job on the embedded defaults: check the models, ingest the service's own
# documentation, and answer a question from it with citations and a verification verdict.
DEMO_QUESTION ?= How do I switch the answer generator to an OpenAI-compatible server?

demo: setup
	$(VENV)/rag doctor
	$(VENV)/rag ingest docs_corpus
	$(VENV)/rag ask "$(DEMO_QUESTION)"

# Fast suite first (no model loads), then the tests that load the real local models.
# pytest exits 5 when it collects nothing; make treats that as a failure.
# The `rag ui` browser test drives Debian's chromium: installed once by install_browser.sh.
test: setup
	$(VENV)/ruff check .
	@scripts/install_browser.sh
	$(VENV)/pytest -q
	$(VENV)/pytest -q -m slow

test-fast: setup
	$(VENV)/pytest -q

lint: setup
	$(VENV)/ruff check .
	$(VENV)/ruff format --check .

bench: setup
	$(VENV)/python bench/bench_models.py
	$(VENV)/python bench/bench_ingest.py
	$(VENV)/python bench/bench_graph.py
	$(VENV)/python bench/bench_ttft.py

clean:
	rm -rf .venv .rag .langgraph_api .pytest_cache .ruff_cache

# Forget the built llama-cpp-python wheels: the next `make setup` builds and installs one
# with the current flags (scripts/build_llama.sh; LLAMA_CMAKE_ARGS to choose your own).
clean-native:
	rm -rf "$${RAG_CACHE_DIR:-$$HOME/.cache/agentic-rag}"/wheels/llama-* .venv/.installed-*
