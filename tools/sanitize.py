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

from tools.text import SENTENCE_SPAN

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
# Plain-language text addressed to the model rather than to the document's readers:
# "ignore previous instructions", "note to the AI assistant", "reply only with the word",
# in English, German, French and Spanish. A document may say such things *about*
# injection (docs_corpus/security.md does); it is still never an instruction, and an
# answer that only repeats it is never verified (the planted check, graph/checks/).
_ADDRESSED = re.compile(
    r"""
    (?<!\(quoted\)\s)(?:
    \b(?:ignore|disregard|forget|override)\s+(?:all\s+|any\s+)?(?:of\s+)?(?:the\s+|your\s+)?
      (?:previous\s+|prior\s+|above\s+|earlier\s+|preceding\s+|other\s+|system\s+)?
      (?:instructions?|prompts?|rules|directions)\b
  | \b(?:note|message|instructions?|reminder)s?\s+(?:to|for)\s+(?:the\s+|any\s+|all\s+)?
      (?:ai\b|assistants?|models?\b|llms?\b|chatbots?|verifiers?|language\s+models?)
  | \b(?:reply|respond|answer|say|output)\b[^.!?\n]{0,20}\b(?:only|just|solely)\b
      [^.!?\n]{0,20}\bwords?\b
  | \b(?:reply|respond|answer)\s+(?:only\s+)?with\s+(?:the\s+)?(?:single\s+)?word\b
  | \byou\s+(?:must|should|have\s+to|are\s+to)\s+(?:always\s+)?(?:reply|respond|answer|say)\b
  | \bignorier\w*\s+(?:alle\s+)?(?:vorherigen|bisherigen|obigen|früheren)\s+anweisungen
  | \b(?:hinweis|nachricht)\s+(?:an|für)\s+(?:den\s+|die\s+)?(?:ki\b|assistent)
  | \bantworte\s+(?:nur|ausschließlich)\b
  | \bignore[rz]?\s+(?:toutes\s+)?(?:les\s+)?instructions
  | \b(?:note|message)\s+(?:à|pour)\s+(?:l['’]\s*)?(?:assistant|ia\b|intelligence)
  | \bréponds?\s+(?:uniquement|seulement)\b
  | \bignora\s+(?:todas\s+)?(?:las\s+)?instrucciones
  | \b(?:nota|mensaje)\s+para\s+(?:el\s+|la\s+)?(?:asistente|ia\b|modelo)
  | \bresponde\s+(?:solo|solamente|únicamente)\b
    )""",
    flags=re.IGNORECASE | re.VERBOSE,
)
# Paraphrased orders about the reply (issue 36): no fixed phrase, but a sentence that
# names whoever writes the answer (an AI, an assistant, "whoever writes the reply", "when
# this page is used to answer") *and* orders something (must, only, tell, include...).
# A document describing a system ("the server must respond with 401") names no such
# addressee. Measured on lab/data/planted_instructions.jsonl (`rag eval planted`).
_ADDRESSEE = re.compile(
    r"""(?:
    \bwhoever\s+(?:answers|responds|replies)\b
  | \bwhoever\s+(?:writes|gives|composes|drafts)\s+(?:the\s+|a\s+|any\s+)?(?:reply|response|answer)
  | \bif\s+you\s+are\s+(?:an?\s+)?(?:ai|assistant|(?:large\s+)?language\s+model|llm|bot|chatbot)\b
  | \bdear\s+(?:chatbot|assistant|ai|model|llm|bot)\b
  | \b(?:any|every|all|the)\s+(?:ai\s+)?
      (?:assistants?|chatbots?|bots?|models?|llms?|agents?|ai\s+systems?)\s+(?:reading|processing|summari[sz]ing|using|answering|that\s+reads?|which\s+reads?)\b
  | \b(?:ai\s+systems?|assistants?|bots?|chatbots?|(?:language\s+)?models?|llms?)(?:\s+and\s+\w+)?
      \s+(?:reading|processing|that\s+reads?)\s+(?:this|these|it)\b
  | \bwhen\s+(?:this|the)\s+(?:document|text|page|passage|file)\s+is\s+used\b
  | \b(?:responses?|answers?|replies|outputs?)\s+(?:generated|written|produced)
      \s+(?:from|with|using)\b
  | \b(?:any|every|each)\s+(?:generated\s+)?(?:reply|response|answer)
      \s+(?:based\s+on|to\s+(?:a|any|this)\s+question)
  | \bgenerated\s+(?:answers?|repl(?:y|ies)|responses?)\b
  | \breply'?s\s+author\b
  | \b(?:answering|responding)\s+(?:model|assistant|ai)\b
  | \bthe\s+(?:model|assistant|ai)\s+(?:answering|responding|replying)\b
  | \binstructions?\s+(?:for|to)\s+the\s+(?:answering\s+)?(?:model|assistant|ai)\b
  | \b(?:when|if|whenever)\s+(?:you\s+are\s+|you're\s+)?asked\b
  | \bwer\s+(?:die\s+)?antwort\w*\b[^.!?\n]{0,30}\b(?:schreibt|gibt|verfasst)
  | \bwenn\s+du\s+(?:\w+\s+)?gefragt\s+wirst
  | \bsi\s+on\s+(?:te|vous)\s+demande
  | \bcuando\s+(?:te|le)\s+pregunten
  | \b(?:jede|alle)\s+antwort\w*\s+(?:eines|einer|von)\s+(?:ki|assistent|sprachmodell)
  | \b(?:falls|wenn)\s+du\s+(?:ein|eine)\s+(?:sprachmodell|ki|assistent|chatbot)
  | \bquiconque\s+(?:rédige|écrit|donne|formule)\s+(?:la\s+|une\s+)?réponse
  | \btoute\s+réponse\s+(?:générée|produite|écrite)
  | \bsi\s+(?:tu\s+es|vous\s+êtes)\s+(?:une?\s+)?(?:ia|assistant|modèle|chatbot)
  | \bquien\s+(?:escriba|redacte|dé)\s+(?:la\s+)?respuesta
  | \bcualquier\s+(?:asistente|ia|modelo)\b
  | \bsi\s+eres\s+(?:una?\s+)?(?:ia|asistente|modelo)
  | \bchi\s+(?:scrive|redige|dà)\s+(?:la\s+)?risposta
  | \bse\s+sei\s+(?:una?\s+)?(?:ia|assistente|modello)
    )""",
    flags=re.IGNORECASE | re.VERBOSE,
)
_ORDER = re.compile(
    r"""\b(?:must|should|shall|has\s+to|have\s+to|is\s+to|are\s+to|needs?\s+to|required|
    only|always|never|make\s+sure|tell|say|reply|respond|write|include|output|print|end|sign|
    visit|link|mention|answer\s+is|muss|müssen|soll|sollen|immer|nur|ausschließlich|lautet|
    doit|doivent|uniquement|seulement|seule|debe|deben|tiene\s+que|únicamente|solo|deve|
    devono)\b""",
    flags=re.IGNORECASE | re.VERBOSE,
)
# A sentence ends at . ! ? followed by a space or the end, so a URL stays in its sentence.
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\u200b-\u200f\u202a-\u202e\u2066-\u2069]")


def strip_template_tokens(text: str) -> str:
    """Remove chat-template control tokens (the part that is dangerous in any message)."""
    return _TEMPLATE_TOKEN.sub(" ", text)


def neutralise(text: str) -> str:
    """A passage's text, safe to place inside the prompt's passage delimiters.

    Template tokens and control characters are removed, our delimiters are removed,
    and a role header or a plain-language instruction to the model is quoted
    (``System:`` -> ``(quoted) System:``) so it reads as part of the document rather
    than a turn of the conversation.
    """
    text = _CONTROL.sub("", text)
    text = strip_template_tokens(text)
    text = _DELIMITER.sub(" ", text)
    text = _ADDRESSED.sub(lambda m: f"(quoted) {m.group(0)}", text)
    text = SENTENCE_SPAN.sub(_quote_order, text)
    return _ROLE_HEADER.sub(r"\1(quoted) \2\3", text)


def _is_order(sentence: str) -> bool:
    return bool(_ADDRESSEE.search(sentence) and _ORDER.search(sentence))


def _quote_order(match: re.Match[str]) -> str:
    sentence = match.group(0)
    if "(quoted)" in sentence or not _is_order(sentence):
        return sentence
    lead = len(sentence) - len(sentence.lstrip())
    return f"{sentence[:lead]}(quoted) {sentence[lead:]}"


def addressed_to_model(text: str) -> list[str]:
    """The sentences of ``text`` that address the model (plain-language injection): a
    known phrase, or an order to whoever writes the reply."""
    return [
        m.group(0).strip()
        for m in SENTENCE_SPAN.finditer(text)
        if _ADDRESSED.search(m.group(0)) or _is_order(m.group(0))
    ]


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
