"""Verifier thresholds per verifier model and confidence.

A confidence of 0.64 means something on one model's probability scale only: the
defaults of ``verify_threshold`` and ``verify_threshold_phrase`` were chosen on the
verifier benchmark's dev split with the default local verifier reading log-probabilities.
Another model, or the same model read by sampling, has its own scale, so
``rag eval verifier --split dev --calibrate`` records the thresholds it chooses for the
verifier and confidence it ran with, in ``<data_dir>/verifier_thresholds.json`` (or
``verifier_thresholds_file``), and
answering uses the record for the verifier in use. Which thresholds were used, and why,
travels with every verdict (``thresholds``), so an answer checked on thresholds no one
calibrated says so.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

from tools.config import READINGS, ConfigError, Settings

FILE_NAME = "verifier_thresholds.json"
THRESHOLD_FIELDS = ("verify_threshold", "verify_threshold_phrase")

# calibrated: recorded by --calibrate for this verifier and confidence;
# default: the defaults, calibrated for the default local verifier's log-probabilities;
# set: verify_threshold(_phrase) set by the operator, who answers for them;
# uncalibrated: another verifier inheriting the defaults (a warning everywhere)
Source = Literal["calibrated", "default", "set", "uncalibrated"]


@dataclass(frozen=True)
class Thresholds:
    sentence: float
    phrase: float
    source: Source

    @property
    def pair(self) -> tuple[float, float]:
        return (self.sentence, self.phrase)

    @property
    def warning(self) -> str | None:
        if self.source != "uncalibrated":
            return None
        return (
            "the verifier's thresholds were calibrated for the default local verifier, not "
            "this one: run rag eval verifier --split dev --squad --calibrate with it"
        )

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "warning": self.warning}


def path_of(settings: Settings) -> Path:
    return settings.verifier_thresholds_file or settings.data_dir / FILE_NAME


def key_of(verifier_model: str, method: str) -> str:
    return f"{verifier_model} ({method})"


def _recorded(settings: Settings) -> dict[str, Any]:
    path = path_of(settings)
    if not path.is_file():
        return {}
    try:
        recorded = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{path} is unreadable ({exc}): delete it and calibrate again") from None
    if not isinstance(recorded, dict):
        raise ConfigError(f"{path} is not a JSON object: delete it and calibrate again")
    return recorded


def thresholds_per_reading(settings: Settings) -> dict[str, Thresholds]:
    """The thresholds answering uses with ``settings``' verifier for each reading
    (``READINGS``): the operator's, else the recorded ones, else the defaults (uncalibrated
    unless the verifier is the default one read by log-probabilities). One read of the
    file for both, as the verify step needs both before it knows which reading it gets."""
    if settings.model_fields_set & set(THRESHOLD_FIELDS):
        mine = Thresholds(settings.verify_threshold, settings.verify_threshold_phrase, "set")
        return dict.fromkeys(READINGS, mine)
    recorded = _recorded(settings)
    default_verifier = settings.verifier_model == Settings.model_fields["verifier_model"].default
    found = {}
    for method in READINGS:
        if entry := recorded.get(key_of(settings.verifier_model, method)):
            found[method] = Thresholds(
                float(entry["sentence"]), float(entry["phrase"]), "calibrated"
            )
        else:
            source = "default" if default_verifier and method == "logprobs" else "uncalibrated"
            found[method] = Thresholds(
                settings.verify_threshold, settings.verify_threshold_phrase, source
            )
    return found


def thresholds_for(settings: Settings, method: str) -> Thresholds:
    """``thresholds_per_reading`` for one reading, "logprobs" or "sampled"."""
    return thresholds_per_reading(settings)[method]


def record(settings: Settings, method: str, chosen: dict[str, float], **about: Any) -> Path:
    """Write ``chosen`` ({"sentence", "phrase"}) for the verifier and ``method``, keeping
    the other verifiers' records; atomically, so a reader never sees half a file."""
    path = path_of(settings)
    recorded = _recorded(settings)
    recorded[key_of(settings.verifier_model, method)] = {
        "sentence": chosen["sentence"],
        "phrase": chosen["phrase"],
        **about,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", dir=path.parent, delete=False, suffix=".tmp") as out:
        json.dump(recorded, out, indent=1, sort_keys=True)
    os.replace(out.name, path)
    return path
