"""Why an answer is not verified, in the one sentence every surface shows.

Why one module: the CLI and the chat page once each composed their own explanation
from the verdict's fields, differently; now both show ``unverified_reason``'s sentence
(the chat page gets it from its server, rag_ui/exchange.py). The sentence still names
the checks' own readings (confidences, thresholds): saying it in plain words is the
next step (issue 60), and it happens here, once.
"""

from __future__ import annotations

from typing import Any

CHECK_THE_REFERENCES = "Check the references before relying on it."


def not_verified(verdict: dict[str, Any]) -> str:
    """What a user reads after the NOT VERIFIED label, on every surface."""
    return f"{unverified_reason(verdict)} {CHECK_THE_REFERENCES}"


def unverified_reason(verdict: dict[str, Any]) -> str:
    """What could not be checked, in a sentence."""
    if verdict.get("error"):
        return f"the check could not run ({verdict['error']})."
    missing = verdict.get("missing") or {}
    if missing:
        shown = "; ".join(f"{s!r}: {', '.join(m)}" for s, m in missing.items())
        return f"not found in the passages each statement cites: {shown}."
    opinion = verdict.get("second_opinion")
    if opinion and "error" in opinion:
        return f"the second opinion could not run ({opinion['error']})."
    if opinion:
        return (
            f"asked again with the passages in reverse order, the model answered "
            f"{opinion['answer']!r}, which does not agree with this answer (word overlap "
            f"{opinion['agreement']:.2f}, below {opinion['needed']})."
        )
    choice = verdict.get("literal_choice")
    if choice and choice["overruled"]:
        picked = (
            f"the verifier picked {choice['picked']}"
            if choice["picked"] != choice["literal"]
            else f"the verifier could not tell it from {choice['rival']}"
        )
        return (
            f"asked which of {', '.join(choice['options'])} belongs where the answer says "
            f"{choice['literal']}, {picked} (confidence {verdict.get('confidence')}, below "
            f"{verdict.get('threshold')})."
        )
    confidence = verdict.get("confidence")
    own_reading = own_answer_said(verdict) or copied_said(verdict)
    heard = f" {own_reading[:1].upper()}{own_reading[1:]}." if own_reading else ""
    return (
        f"the verifier is not sure the cited passages state this answer to this question "
        f"(confidence {confidence if confidence is not None else 'n/a'}, below "
        f"{verdict.get('threshold')}).{heard}"
    )


def own_answer_said(verdict: dict[str, Any]) -> str:
    """What the verifier's own answer to the question (check 5) said, for the user:
    never the internal NOT_IN_DOCUMENTS marker."""
    if not (own := verdict.get("own_answer")):
        return ""
    if not own.get("found", True):
        return "asked the question itself, the verifier found no answer in the passages"
    said = f"asked the question itself, the verifier answered {own['answer']!r}"
    if not own["agrees"]:
        return said
    if own.get("sure_enough", True):
        return f"{said} too"
    sure = f"{own['sure']:.2f}" if own.get("sure") is not None else "unknown"
    return f"{said} too, but was not sure of it (first word {sure})"


def copied_said(verdict: dict[str, Any]) -> str:
    """Why a third-look answer needs more than others: it is the words the generator
    copied once two readings had found no answer, so no second reading can agree."""
    if not verdict.get("copied"):
        return ""
    return (
        "this answer is the passage's words the model copied after two readings found "
        "none, so the verifier's yes alone must reach the threshold"
    )
