"""``rag doctor``: prove every configured model loads and answers, and time each step.

Each model is loaded and called in its own child process (``tools.isolated``): a model
library that crashes natively or hangs is then a failed check that names the signal or
the timeout, and the doctor goes on to the next model instead of dying with its patient.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from langchain_core.messages import HumanMessage

from tools.answer_check import SETTLE_PROBE, judge_for
from tools.config import Settings, by_section, masked
from tools.isolated import run_isolated
from tools.models.factory import ROLES, chat_model, chat_spec, embeddings
from tools.models.local_llm import REBUILD_ADVICE
from tools.outbound import destinations
from tools.store.backends import backend
from tools.verifier_thresholds import path_of, thresholds_for

PROBE_SENTENCE = "Retrieval augmented generation answers questions from documents."
PROBE_PROMPT = "Reply with one short sentence: what is 2 + 2?"
# The probe's first call with the default local model on an idle 2-core machine (1.4 s
# measured, 2026-11-23); several times this means the CPU is shared or misconfigured.
EXPECTED_LOCAL_PROBE_S = 1.5
SLOW_FACTOR = 3
BUSY_LOAD_PER_CORE = 0.75  # 1-minute load average per core, before any model runs
# On top of llm_timeout_s, for the child's imports and the model load (the 1.5B model
# loads in ~1 s and the imports take ~5 s idle; a loaded machine is many times slower).
LOAD_ALLOWANCE_S = 120.0
CRASH_ADVICE = f"if this is a local model, {REBUILD_ADVICE}"


@dataclass
class ModelCheck:
    kind: str
    spec: str
    roles: list[str] = field(default_factory=list)
    loaded: bool = False
    load_s: float | None = None
    first_call_s: float | None = None
    detail: str = ""
    error: str | None = None
    local: bool = False
    verifier: str = ""  # what a verifier's confidence is read from, and its thresholds


def register(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    parser = sub.add_parser("doctor", help="check configuration and every configured model")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument(
        "--settings",
        "--verbose",
        dest="settings",
        action="store_true",
        help="also print every setting's effective value (secrets masked), by section",
    )
    parser.set_defaults(run=run)
    return parser


def _check_chat(settings: Settings, spec: str, roles: list[str]) -> ModelCheck:
    check = ModelCheck("chat", spec, roles)
    started = time.perf_counter()
    try:
        model = chat_model(settings, roles[0])  # type: ignore[arg-type]
        check.local = hasattr(model, "_loaded")
        if check.local:  # force the load so it is timed on its own
            model._loaded()
        check.load_s = round(time.perf_counter() - started, 3)
        check.loaded = True
        started = time.perf_counter()
        reply = model.invoke([HumanMessage(PROBE_PROMPT)], max_tokens=16)
        check.first_call_s = round(time.perf_counter() - started, 3)
        usage = reply.usage_metadata or {}
        check.detail = f"{reply.text.strip()[:80]!r} ({usage.get('output_tokens', '?')} tokens)"
        if "verifier" in roles:
            check.verifier = _verifier_confidence(settings, model)
    except Exception as exc:  # doctor reports every failure instead of stopping at the first
        check.error = f"{type(exc).__name__}: {exc}"
    return check


def _verifier_confidence(settings: Settings, model: Any) -> str:
    """Prove the verifier gives the confidence ``verifier_confidence`` asks for, name the
    one it will use and the thresholds it is read against. A model that can give
    neither log-probabilities nor yes/no replies fails here rather than on every answer."""
    judge = judge_for(model, settings, retries=0)
    p_yes = judge.yes([HumanMessage(SETTLE_PROBE)]).shares["yes"]
    method = judge.method_in_use
    how = {
        "logprobs": "token log-probabilities",
        "sampled": f"sampled replies ({settings.verifier_samples} per check, temperature 1)",
    }[method]
    said = f"confidence from {how} (P(yes) {p_yes:.2f} on a probe)"
    thresholds = thresholds_for(settings, method)
    pair = f"{thresholds.sentence} / {thresholds.phrase}"
    return {
        "set": f"{said}; thresholds {pair} as set",
        "calibrated": f"{said}; thresholds {pair} calibrated for it ({path_of(settings)})",
        "default": f"{said}; default thresholds {pair}, calibrated for this model",
        "uncalibrated": f"{said}; UNCALIBRATED thresholds {pair}: {thresholds.warning}",
    }[thresholds.source]


def _check_embeddings(settings: Settings) -> ModelCheck:
    check = ModelCheck("embedding", settings.embedding_model, ["embedding"])
    started = time.perf_counter()
    try:
        model = embeddings(settings)
        if hasattr(model, "load_seconds"):
            model.load_seconds  # noqa: B018 - force the load so it is timed on its own
        check.load_s = round(time.perf_counter() - started, 3)
        check.loaded = True
        started = time.perf_counter()
        vector = model.embed_query(PROBE_SENTENCE)
        check.first_call_s = round(time.perf_counter() - started, 3)
        check.detail = f"{len(vector)}-d vector"
    except Exception as exc:
        check.error = f"{type(exc).__name__}: {exc}"
    return check


def probe_model(settings: Settings, kind: str, spec: str, roles: list[str]) -> ModelCheck:
    """Load one model and make its first call: what the doctor runs in each child."""
    if kind == "embedding":
        return _check_embeddings(settings)
    return _check_chat(settings, spec, roles)


Probe = Callable[[Settings, str, str, list[str]], ModelCheck]


def isolated_check(
    probe: Probe, settings: Settings, kind: str, spec: str, roles: list[str]
) -> ModelCheck:
    timeout_s = settings.llm_timeout_s + LOAD_ALLOWANCE_S
    result = run_isolated(probe, settings, kind, spec, roles, timeout_s=timeout_s)
    if result.ok:
        return result.value
    error = result.reason(timeout_s)
    if result.signal or result.timed_out:
        error = f"{error}; {CRASH_ADVICE}"
    return ModelCheck(kind, spec, roles, error=error)


def advise(models: list[dict[str, Any]], settings: Settings, load: float, cores: int) -> list[str]:
    """What the timings say about this machine, and the setting that would help."""
    advice = []
    busy = load >= BUSY_LOAD_PER_CORE * cores
    if busy:
        advice.append(
            f"the machine is busy: load average {load:.1f} on {cores} cores before any model "
            "ran. Local models share the CPU with that work, so answers take longer (on 2 "
            "cores one busy process beside the model made the first answer token come 1.5 "
            "times later; docs_corpus/performance.md)."
        )
    if settings.llm_threads > cores:
        advice.append(
            f"llm_threads={settings.llm_threads} is more than the {cores} cores: set "
            "llm_threads=0 (all cores)."
        )
    for m in models:
        took = m.get("first_call_s")
        if not m.get("local") or took is None or took <= SLOW_FACTOR * EXPECTED_LOCAL_PROBE_S:
            continue
        why = (
            "the machine is busy (above)."
            if busy
            else f"llm_threads={settings.llm_threads} uses only part of the {cores} cores: set "
            "llm_threads=0."
            if 0 < settings.llm_threads < cores
            else "check what else runs (top), or use a hosted generator_model (docs_corpus/"
            "models.md)."
        )
        advice.append(
            f"{m['spec']}: the first call took {took:.1f}s where about "
            f"{EXPECTED_LOCAL_PROBE_S}s is expected on an idle 2-core machine: {why}"
        )
    return advice


def check_store(settings: Settings) -> dict[str, Any]:
    """Where collections live, and whether the store answers (a database that cannot be
    reached fails here, before any question)."""
    return backend(settings).check(settings)


def diagnose(
    settings: Settings,
    probe: Probe = probe_model,
    on_check: Callable[[dict[str, Any]], None] | None = None,
) -> dict[str, Any]:
    load, cores = os.getloadavg()[0], os.cpu_count() or 1  # before our own models run
    by_spec: dict[str, list[str]] = {}
    for role in ROLES:
        by_spec.setdefault(str(chat_spec(settings, role)), []).append(role)
    wanted = [("chat", spec, roles) for spec, roles in by_spec.items()]
    wanted.append(("embedding", settings.embedding_model, ["embedding"]))
    checks = []
    for model in wanted:  # one at a time: each child holds a whole model in memory
        checks.append(isolated_check(probe, settings, *model))
        if on_check:
            on_check(asdict(checks[-1]))
    models = [asdict(c) for c in checks]
    store = check_store(settings)
    return {
        "ok": all(c.error is None for c in checks) and store["error"] is None,
        "config": masked(settings),
        "store": store,
        "models": models,
        "machine": {"cores": cores, "load_average_1m": round(load, 2)},
        "outbound": destinations(settings),
        "advice": advise(models, settings, load, cores),
    }


def _print_check(c: dict[str, Any]) -> None:
    status = "ok  " if c["error"] is None else "FAIL"
    timing = f"load {c['load_s']}s, first call {c['first_call_s']}s"
    print(f"  {status} {c['kind']:9} {c['spec']:24} roles={','.join(c['roles'])}")
    print(f"       {timing}; {c['error'] or c['detail']}", flush=True)
    if c["verifier"]:
        print(f"       verifier: {c['verifier']}", flush=True)


def print_settings(settings: Settings) -> None:
    """Every setting with its effective value (credentials as ***), by section, each
    under its rag.toml table name; then the credentials found in the environment."""
    print("configuration:")
    for section, values in by_section(masked(settings)).items():
        print(
            "  environment (shown only as set):" if section == "environment" else f"  [{section}]"
        )
        for key, value in values.items():
            print(f"    {key:28} {value}")


def run(args: argparse.Namespace, settings: Settings, probe: Probe = probe_model) -> int:
    """Models first (what a user runs the doctor for), then the store and every outbound
    address; the settings table, eighty lines, only when asked (``--settings``)."""
    if not args.json:
        print("models (loading each and making one call):", flush=True)
    report = diagnose(settings, probe, on_check=None if args.json else _print_check)
    if args.json:
        print(json.dumps(report, indent=2))
        return 0 if report["ok"] else 1
    store = report["store"]
    status = "ok  " if store["error"] is None else "FAIL"
    print(f"store:\n  {status} {store['store']} at {store['where']}")
    print(f"       {store['error'] or store['detail']}")
    print("outbound (every address this configuration sends data to):")
    for line in report["outbound"] or ["none: everything runs on this machine"]:
        print(f"  {line}")
    if getattr(args, "settings", False):
        print_settings(settings)
    else:
        print("settings: rag doctor --settings prints every setting's effective value")
    for line in report["advice"]:
        print(f"advice: {line}")
    print("doctor: all models working" if report["ok"] else "doctor: problems found", flush=True)
    return 0 if report["ok"] else 1
