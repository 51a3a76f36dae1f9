"""Retrieved text is data, never instructions: neutralise what could pose as a prompt.

Documents nobody vetted can carry chat-template tokens (``<|im_start|>system``),
which llama.cpp turns into *real* role switches when it tokenises the prompt, and
role headers ("### System:", "Assistant:") or our own passage delimiters, which a
model may read as the start of a new instruction. These are rewritten into inert
text before any passage reaches a prompt; everything else is left as written, so
quotes and citations still match the stored chunks word for word.
"""

from __future__ import annotations

import re

PASSAGE_OPEN = "<passage>"
PASSAGE_CLOSE = "</passage>"

# ChatML / Llama 3 / Phi (<|...|>), Llama 2 ([INST], <<SYS>>), Gemma turns, BOS/EOS tags
# (a turn opener takes its role name with it, so no bare "system" line is left behind)
_TEMPLATE_TOKEN = re.compile(
    r"<\|im_start\|>(?:system|user|assistant)?|<start_of_turn>(?:user|model)?"
    r"|<\|[^|<>\n]{0,40}\|>|\[/?INST\]|<</?SYS>>|</?s>|<end_of_turn>",
    flags=re.IGNORECASE,
)
_ROLE_HEADER = re.compile(
    r"^([ \t>#*_-]*)(system|assistant|user|human|developer|verifier|instructions?)"
    r"(\s*(?:prompt|message|note)?\s*[*_]*:)",
    flags=re.IGNORECASE | re.MULTILINE,
)
_DELIMITER = re.compile(r"</?\s*passage\s*>", flags=re.IGNORECASE)
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\u200b-\u200f\u202a-\u202e\u2066-\u2069]")


def strip_template_tokens(text: str) -> str:
    """Remove chat-template control tokens (the part that is dangerous in any message)."""
    return _TEMPLATE_TOKEN.sub(" ", text)


def neutralise(text: str) -> str:
    """A passage's text, safe to place inside the prompt's passage delimiters.

    Template tokens and control characters are removed, our delimiters are removed,
    and a role header is quoted (``System:`` -> ``(quoted) System:``) so it reads as
    part of the document rather than a turn of the conversation.
    """
    text = _CONTROL.sub("", text)
    text = strip_template_tokens(text)
    text = _DELIMITER.sub(" ", text)
    return _ROLE_HEADER.sub(r"\1(quoted) \2\3", text)


def one_line(text: str) -> str:
    """Neutralised and on one line: for a passage's location (a file name, a heading)."""
    return " ".join(neutralise(text).split())


# Terminal control: C0 and C1 controls (ESC starts colour, title, clear-screen and
# hyperlink sequences; C1 CSI 0x9b does alone) and bidirectional overrides.
_TERMINAL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def printable(text: str) -> str:
    """Text a user or a document wrote, safe to print to a terminal: every control
    character shown as an escape (``\\x1b``), so nothing it contains can drive the
    terminal. Newlines and tabs stay."""
    return _TERMINAL.sub(lambda m: m.group(0).encode("unicode_escape").decode("ascii"), text)
