"""Whether a full answer gives a gold answer: the answer benchmarks' own, strict judge.

A full answer is a sentence or more, so it is right when it *gives* one of the item's
gold answers, read as tokens (words, numbers, options, paths and dotted or hyphenated
names, as ``tools.answer_check`` reads them; the product's ``states``, which the
verifier uses to compare its own answer, is not this and does not change). "Gives" is
stricter than "contains" in two ways.

1. **A gold matches whole.**
   - Its tokens occur in the answer whole and adjacent: ``TAG`` is not in
     ``CLIENT-TAG`` nor ``stdout`` in ``stdout.log`` (a name joined by ``-``, ``.``,
     ``/`` or ``_`` is one token), ``-x`` is not ``-X``, and a backslash before a letter
     or escaping a sign belongs to its token: ``\\copy`` is not ``COPY``, ``123\\=123``
     is not ``123=123``.
   - A gold that is the first words of a longer gold of the same item, where the longer
     one goes on with options, names a command (``openssl pkey`` of ``openssl pkey -in
     oldkey.pem -out newkey.pem``). It stands for that command, so it counts only where
     the command the answer gives from it, to the end of its code span, line or
     sentence, has no option that none of those longer golds has: ``openssl pkey -in
     a.pem -pubout`` writes a public key and is another command. The option's argument
     (a file name) may differ; the longer gold itself still matches whole only.

2. **A gold the question already contains counts only where the answer gives it in a
   new role.** An answer restates its question, and a word of the question can be the
   gold ("Which password is sent?" -> "password"), so finding it in the answer says
   nothing unless the answer puts it somewhere the question did not. An occurrence in
   the answer gives the gold in a new role when
   - the question has it only in another letter case and the gold is written in
     capitals (``TAG``, ``BROWSER``): the question's "tag" is an English word, the
     gold a literal, and only the literal's own case gives the literal; or
   - the question offers it as one side of an "or" ("first or last") and the answer
     does not also say the other side: the answer chose it; or else
   - neither word next to it in the answer (the nearest one on each side that is not a
     stopword, stemmed) is its neighbour on the same side in the question: "the
     request tag pattern line" and "The password is sent" copy the question's phrase
     around the gold, "the branch named `hotfix`" puts the question's path name
     ``../hotfix`` where the question asked for a branch.

This judges the answer's text, not its meaning: an answer can give the gold in a new
role and still say something else wrong, and an answer that repeats the question's
phrase to say the right thing ("messages end up in the stdout stream" for a question
that passed "a stdout stream") is counted wrong. Both err towards "wrong", the safe side
for a measure of verified precision. Every answer counted right here is counted right
by ``states`` too (tested on the stored reports).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from tools.text import STOPWORDS, tokenize

# a word, number, option, path or name: ``states``' tokens, with a backslash before a
# letter (``\copy``, ``\N``) and backslash escapes inside (``123\=123``) kept in the
# token (a stray one before a digit, ``\0x4E545030``, is left out, as ``states`` does)
_TOKEN = re.compile(r"(?:\\(?=[A-Za-z])|-{1,2})?\w(?:[\w./-]|\\[^\s\w])*")
# where a command given in an answer ends: a code span's edge, a line, a sentence, a list
_COMMAND_END = re.compile(r"`|\n|[.;!?](?=\s|$)|,\s")


@dataclass(frozen=True)
class _Token:
    text: str  # as written, without a trailing ".", "-" or "/"
    key: str  # what a match compares: lower case, but options and backslash tokens as written
    start: int
    end: int

    @property
    def is_option(self) -> bool:
        return self.key.startswith("-")


def _tokens(text: str) -> list[_Token]:
    found = []
    for m in _TOKEN.finditer(text):
        word = m.group().rstrip(".-/")
        if not word:
            continue
        key = word if word[0] in "-\\" else word.lower()
        found.append(_Token(word, key, m.start(), m.start() + len(word)))
    return found


def _keys(tokens: Sequence[_Token]) -> list[str]:
    return [t.key for t in tokens]


def _at(haystack: Sequence[str], needle: Sequence[str]) -> list[int]:
    """Where ``needle`` occurs in ``haystack`` as adjacent items."""
    n = len(needle)
    return [i for i in range(len(haystack) - n + 1) if list(haystack[i : i + n]) == list(needle)]


def _command_options(golds: Sequence[str], gold: list[str]) -> frozenset[str] | None:
    """The options the longer golds that begin with ``gold`` go on with, when ``gold``
    names their command (it begins with a word and some longer gold goes on with an
    option); None when it does not."""
    if not gold or gold[0].startswith("-"):
        return None
    longer = [
        keys[len(gold) :]
        for keys in (_keys(_tokens(g)) for g in golds)
        if len(keys) > len(gold) and keys[: len(gold)] == gold
    ]
    options = frozenset(k for rest in longer for k in rest if k.startswith("-"))
    return options or None


def _same_command(answer: str, after: int, tokens: list[_Token], allowed: frozenset[str]) -> bool:
    """Whether the command the answer goes on with from ``after`` (to the end of its code
    span, line or sentence) has only options in ``allowed``."""
    end = _COMMAND_END.search(answer, after)
    stop = end.start() if end else len(answer)
    return all(t.key in allowed for t in tokens if after <= t.start < stop and t.is_option)


def _neighbour(tokens: Sequence[_Token], i: int, step: int) -> str | None:
    """The nearest word from ``tokens[i]`` in direction ``step`` that is not a stopword,
    stemmed (a plain word) or as its key (a name, number, option or path)."""
    i += step
    while 0 <= i < len(tokens):
        key = tokens[i].key
        if key.isalpha():
            if key not in STOPWORDS:
                return tokenize(key)[0] if tokenize(key) else key
        else:
            return key
        i += step
    return None


def _new_role(
    question: list[_Token], answer: list[_Token], at: int, gold_tokens: list[_Token]
) -> bool:
    """Whether the answer's occurrence of the gold at ``answer[at]`` gives it in a role
    the question does not (rule 2 of the module's docstring)."""
    gold = _keys(gold_tokens)
    n = len(gold)
    asked = _at(_keys(question), gold)
    if not asked:
        return True
    written = [t.text for t in gold_tokens]
    capitals = any(c.isupper() for c in "".join(written)[1:])
    if capitals and not any([t.text for t in question[j : j + n]] == written for j in asked):
        return [t.text for t in answer[at : at + n]] == written
    keys = _keys(question)
    others = {keys[j + n + 1] for j in asked if j + n + 1 < len(keys) and keys[j + n] == "or"}
    others |= {keys[j - 2] for j in asked if j >= 2 and keys[j - 1] == "or"}
    if others:
        return not others & set(_keys(answer))
    before = {_neighbour(question, j, -1) for j in asked} - {None}
    after = {_neighbour(question, j + n - 1, 1) for j in asked} - {None}
    return (
        _neighbour(answer, at, -1) not in before and _neighbour(answer, at + n - 1, 1) not in after
    )


def gives(question: str, answer: str, gold: str, golds: Sequence[str] = ()) -> bool:
    """Whether ``answer`` gives ``gold`` (one of the item's ``golds``) as the module's
    docstring says."""
    gold_tokens = _tokens(gold)
    want = _keys(gold_tokens)
    if not want:
        return False
    said = _tokens(answer)
    asked = _tokens(question)
    options = _command_options(golds, want)
    for at in _at(_keys(said), want):
        after = said[at + len(want) - 1].end
        if options is not None and not _same_command(answer, after, said, options):
            continue
        if _new_role(asked, said, at, gold_tokens):
            return True
    return False


def answer_is_right(question: str, answer: str, golds: Sequence[str]) -> bool:
    """Whether a full answer to ``question`` gives one of its gold answers: how the
    answer benchmarks count a full answer right (evaluation/answers.py)."""
    return any(gives(question, answer, gold, golds) for gold in golds)
