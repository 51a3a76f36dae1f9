"""The Python surface docs_corpus/python-api.md lists: ``from graph import graph`` is a
compiled graph, built on first use, that answers as README's "Python" section calls it;
``build_graph`` and ``config_for`` are beside it. Fakes reach the nodes as the runtime
context, as every caller's services do."""

from __future__ import annotations

import subprocess
import sys

from langgraph.graph.state import CompiledStateGraph

import graph as package
from graph import build_graph, config_for


def test_the_graph_is_built_on_first_use_so_importing_stays_cheap():
    probe = (
        "import graph, graph.nodes\n"
        "assert 'graph' not in vars(graph), 'built at import'\n"
        "from graph import graph as g\n"
        "assert vars(graph)['graph'] is g and graph.graph is g\n"
        "print(type(g).__name__)"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "CompiledStateGraph"


def test_the_public_surface_is_three_names():
    assert sorted(package.__all__) == ["build_graph", "config_for", "graph"]
    assert callable(build_graph) and callable(config_for)
    try:
        package.no_such_name  # noqa: B018
    except AttributeError as exc:
        assert "no_such_name" in str(exc)
    else:
        raise AssertionError("an unknown name must raise AttributeError")


def test_the_readme_call_answers(corpus_env, models):
    from graph import graph

    assert isinstance(graph, CompiledStateGraph)
    out = graph.invoke(
        {"question": "How do I install the service?"},
        {"configurable": {"k": 4}},
        context=models.services,
    )
    assert out["answer"] == "Run make demo to install the service [1]."
    assert out["references"] and out["outcome"] == "verified"
    # and with config_for, any setting
    out = graph.invoke(
        {"question": "How do I install the service?"},
        config_for(k=3, llm_timeout_s=300),
        context=models.services,
    )
    assert out["outcome"] == "verified"
