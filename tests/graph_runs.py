"""Run the graph in a test that expects answers, and fail on any model fault.

The product turns a model fault into an honest abstention or a "not verified" label
(a typed ``error``), which is right for a user and wrong for a test: an answer test
that accepts "abstained" or "not verified" would pass on a model that cannot run at
all. Every real-model graph test runs through ``run_graph``, so a fault fails it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from langchain_core.runnables import RunnableConfig

from graph import build_graph, config_for
from graph.run import Node, run_of
from graph.services import Services

# the test process's real models, loaded once for every real-model test (as an entry
# point holds them for its process)
SERVICES = Services()


def model_faults(out: dict[str, Any]) -> list[str]:
    """Every model fault an answer object records: the run's error, the verifier's, the
    second opinion's and the guard's (the last three keep the answer, so they are not
    in ``error``)."""
    verdict = out.get("verdict") or {}
    found = [
        out.get("error") and f"run: {out['error']}",
        verdict.get("error") and f"verifier: {verdict['error']}",
        (verdict.get("second_opinion") or {}).get("error")
        and f"second opinion: {verdict['second_opinion']['error']}",
        (out.get("guard") or {}).get("error") and f"guard: {out['guard']['error']}",
    ]
    return [f for f in found if f]


def run_graph(state: dict[str, Any], config: RunnableConfig, context: Any = None) -> dict[str, Any]:
    out = build_graph(services=SERVICES).invoke(state, config, context=context)
    faults = model_faults(out)
    assert not faults, f"a model call failed, so this run proves nothing: {faults}"
    return out


def call_node(node: Node, state: dict[str, Any], config: RunnableConfig) -> dict[str, Any]:
    """One node on its own, with the run it would get inside the graph."""
    return node(state, run_of(state, config, None, SERVICES))  # type: ignore[arg-type]


# Generous deadline: CI machines are shared and noisy. Otherwise the defaults, k too (with
# k=4 the install question's outcome flipped on another CPU: issue 38).
RUN = {"llm_timeout_s": 900}


def ask(data_dir: Path, question: str, **state: Any) -> dict[str, Any]:
    """``question`` asked of the collection in ``data_dir`` (the slow tests' ``data_dir``
    fixture: the frozen docs), with ``RUN``'s settings, through ``run_graph``."""
    return run_graph({"question": question, **state}, config_for(data_dir=data_dir, **RUN))
